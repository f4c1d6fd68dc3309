#!/usr/bin/python3
"""ref_forward.py — an independent float64 reference forward pass for nibble's tests.

Written from the Hugging Face transformers semantics of LlamaForCausalLM,
Qwen2ForCausalLM and Qwen3ForCausalLM, plus the Spark options as nibble defines them
(see /work/shared/models/README.md). Standard library + numpy only; run it with
Debian's /usr/bin/python3 (python3-numpy).

    /usr/bin/python3 tools/ref_forward.py MODEL_DIR 1 2 3 ...     # logits + greedy ids

What it implements, per layer (h: the layer's normed input, x: the residual stream):
  RMSNorm        x / sqrt(mean(x^2) + eps) * w
  attention      q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv); o_proj (+bo)
                 bias: qwen2 always on q/k/v (never o); llama/qwen3 on q/k/v/o when
                 attention_bias is true (whatever biases the file holds are used)
                 qwen3: per-head RMSNorm of q and k (q_norm, k_norm) before RoPE
                 RoPE: HF half-split pairs (i, i + d/2), inv_freq = theta^(-2i/d),
                 rope_scaling linear (inv_freq / factor) or llama3 (wavelength bands)
                 GQA: query head j reads kv head j // (n_heads / n_kv_heads)
                 causal mask; sliding layers see only keys with q_pos - k_pos < window
                 spark head_gate: head j's output *= sigmoid(h . Wg[j]) before o_proj
  MLP            down(act(gate h) * up h); act = silu or tanh-gelu (gelu_pytorch_tanh)
  logits         rmsnorm(x) W_out (lm_head.weight, or the embedding when tied)
Stored F16/BF16 weights are widened exactly; all arithmetic is float64.
"""
import json
import math
import os
import struct
import sys

import numpy as np

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
           "F64": np.dtype("<f8")}


def read_safetensors(path):
    """{name: float64 array} from a .safetensors file (F32, F16, BF16 or F64)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = _DTYPES[info["dtype"]]
        a, b = info["data_offsets"]
        raw = np.frombuffer(blob[base + a:base + b], dtype=dt)
        if info["dtype"] == "BF16":  # bf16 is the top half of an f32
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = raw.astype(np.float64).reshape(info["shape"])
    return out


class Config:
    """The config.json keys the reference reads, with HF's defaults."""

    def __init__(self, d):
        self.model_type = d["model_type"]
        self.n_layers = d["num_hidden_layers"]
        self.hidden = d["hidden_size"]
        self.n_heads = d["num_attention_heads"]
        self.n_kv_heads = d.get("num_key_value_heads") or self.n_heads
        self.head_dim = d.get("head_dim") or self.hidden // self.n_heads
        self.eps = d.get("rms_norm_eps", 1e-6)
        self.theta = d.get("rope_theta", 10000.0)
        self.act = d.get("hidden_act", "silu")
        self.tied = d.get("tie_word_embeddings", self.model_type != "llama")
        self.head_gate = bool(d.get("head_gate", False))
        self.rope_scaling = d.get("rope_scaling")
        window = d.get("sliding_window")
        types = d.get("layer_types")
        if types is None:
            # Qwen2/Qwen3: use_sliding_window + max_window_layers (layers >= it slide).
            use = d.get("use_sliding_window", False) and window is not None
            mwl = d.get("max_window_layers", self.n_layers)
            types = ["sliding_attention" if use and i >= mwl else "full_attention"
                     for i in range(self.n_layers)]
        self.layer_window = [window if t == "sliding_attention" else None for t in types]


def rope_inv_freq(cfg):
    d = cfg.head_dim
    inv = 1.0 / cfg.theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    rs = cfg.rope_scaling
    kind = (rs.get("rope_type") or rs.get("type", "default")) if rs else "default"
    if kind == "default":
        return inv
    factor = float(rs["factor"])
    if kind == "linear":
        return inv / factor
    if kind == "llama3":
        lo_f, hi_f = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        old = float(rs["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / lo_f, inv / factor, inv)
        smooth = (old / wavelen - lo_f) / (hi_f - lo_f)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old / hi_f) & (wavelen <= old / lo_f)
        return np.where(medium, smoothed, scaled)
    raise ValueError("rope_scaling type %r is not supported" % kind)


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, inv_freq):
    """x: [T, heads, d]; rotate pairs (i, i + d/2) by pos * inv_freq[i]."""
    ang = pos[:, None] * inv_freq[None, :]                 # [T, d/2]
    cos = np.cos(np.concatenate([ang, ang], -1))[:, None]  # [T, 1, d]
    sin = np.sin(np.concatenate([ang, ang], -1))[:, None]
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def act(name, x):
    if name in ("silu", "swish"):
        return x / (1 + np.exp(-x))
    if name in ("gelu_pytorch_tanh", "gelu_tanh", "gelu_new"):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    raise ValueError("hidden_act %r is not supported" % name)


def linear(W, prefix, x):
    """x W^T (+ bias when the checkpoint has one)."""
    y = x @ W[prefix + ".weight"].T
    if prefix + ".bias" in W:
        y = y + W[prefix + ".bias"]
    return y


class Model:
    def __init__(self, path):
        with open(os.path.join(path, "config.json")) as f:
            self.cfg = Config(json.load(f))
        self.W = read_safetensors(os.path.join(path, "model.safetensors"))
        self.inv_freq = rope_inv_freq(self.cfg)

    def forward(self, ids):
        """Logits [len(ids), vocab] at every position of one sequence from position 0."""
        c, W = self.cfg, self.W
        T, H, KV, d = len(ids), c.n_heads, c.n_kv_heads, c.head_dim
        pos = np.arange(T, dtype=np.float64)
        x = W["model.embed_tokens.weight"][np.asarray(ids)]
        qi, ki = np.arange(T)[:, None], np.arange(T)[None, :]
        for l in range(c.n_layers):
            p = "model.layers.%d." % l
            h = rmsnorm(x, W[p + "input_layernorm.weight"], c.eps)
            q = linear(W, p + "self_attn.q_proj", h).reshape(T, H, d)
            k = linear(W, p + "self_attn.k_proj", h).reshape(T, KV, d)
            v = linear(W, p + "self_attn.v_proj", h).reshape(T, KV, d)
            if c.model_type == "qwen3":
                q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], c.eps)
                k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], c.eps)
            q, k = rope(q, pos, self.inv_freq), rope(k, pos, self.inv_freq)
            allowed = ki <= qi
            if c.layer_window[l] is not None:
                allowed &= (qi - ki) < c.layer_window[l]
            out = np.empty((T, H, d))
            for j in range(H):
                kv = j // (H // KV)
                s = q[:, j] @ k[:, kv].T / math.sqrt(d)
                s = np.where(allowed, s, -np.inf)
                s = np.exp(s - s.max(-1, keepdims=True))
                out[:, j] = (s / s.sum(-1, keepdims=True)) @ v[:, kv]
            if c.head_gate:
                g = 1 / (1 + np.exp(-(h @ W[p + "self_attn.head_gate.weight"].T)))  # [T, H]
                out = out * g[:, :, None]
            x = x + linear(W, p + "self_attn.o_proj", out.reshape(T, H * d))
            h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], c.eps)
            ff = act(c.act, linear(W, p + "mlp.gate_proj", h)) * linear(W, p + "mlp.up_proj", h)
            x = x + linear(W, p + "mlp.down_proj", ff)
        x = rmsnorm(x, W["model.norm.weight"], c.eps)
        head = W["model.embed_tokens.weight"] if c.tied else W["lm_head.weight"]
        return x @ head.T

    def greedy(self, ids, n):
        """n greedy continuation ids (argmax; the lowest id wins a tie)."""
        ids, out = list(ids), []
        for _ in range(n):
            t = int(np.argmax(self.forward(ids)[-1]))
            out.append(t)
            ids.append(t)
        return out


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: ref_forward.py MODEL_DIR ID [ID ...]")
    m = Model(argv[1])
    ids = [int(a) for a in argv[2:]]
    logits = m.forward(ids)
    np.set_printoptions(precision=6, linewidth=100)
    print("last logits[:8]:", logits[-1][:8])
    print("greedy:", m.greedy(ids, 12))


if __name__ == "__main__":
    main(sys.argv)
