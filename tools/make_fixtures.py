#!/usr/bin/python3
"""make_fixtures.py — write the tiny random models under tests/fixtures/models/ and their
golden outputs from tools/ref_forward.py (float64 numpy reference).

    /usr/bin/python3 tools/make_fixtures.py [OUT_DIR]     (default tests/fixtures/models)

Each fixture is a Hugging Face directory (config.json, model.safetensors) plus
golden.json: for each prompt (raw ids, no BOS) the logits at its last position and at
its middle position, and 12 greedy ids. Everything is seeded, so a rerun rewrites the
same files. docs/reference.md says what each fixture covers.
"""
import json
import os
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_forward import Model  # noqa: E402

N_GREEDY = 12
MAX_BYTES = 200 * 1024

# name -> (what it covers, config overrides, storage dtype, options)
FIXTURES = {
    "llama-llama3-bias": (
        "llama: untied lm_head, attention_bias (q/k/v/o biases, as HF's LlamaAttention), "
        "rope_scaling llama3 (factor 8, low 1, high 4, original context 32: head_dim 12 "
        "has frequencies in all three bands)",
        {"model_type": "llama", "tie_word_embeddings": False, "attention_bias": True,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 32}},
        "F32", {}),
    "llama-linear": (
        "llama: rope_scaling linear (factor 2), tied embeddings, rope_theta 500",
        {"model_type": "llama", "tie_word_embeddings": True, "rope_theta": 500.0,
         "rope_scaling": {"type": "linear", "factor": 2.0}, "num_hidden_layers": 3,
         "intermediate_size": 48},
        "F32", {}),
    "qwen2-sliding": (
        "qwen2: q/k/v bias, use_sliding_window with max_window_layers 1 and sliding_window 8 "
        "(layer 0 full, layers 1-2 sliding)",
        {"model_type": "qwen2", "use_sliding_window": True, "max_window_layers": 1,
         "sliding_window": 8, "num_hidden_layers": 3, "intermediate_size": 48},
        "F32", {}),
    "qwen3-hd24": (
        "qwen3: per-head q/k RMSNorm, head_dim 24 != hidden/heads (12)",
        {"model_type": "qwen3", "head_dim": 24, "intermediate_size": 48},
        "F32", {}),
    "spark-window": (
        "spark: gelu_pytorch_tanh (GEGLU), head_gate, layer_types sliding/full/sliding "
        "with sliding_window 8",
        {"model_type": "spark", "hidden_act": "gelu_pytorch_tanh", "head_gate": True,
         "sliding_window": 8, "num_hidden_layers": 3, "intermediate_size": 48,
         "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]},
        "F32", {}),
    "qwen3-bf16": (
        "qwen3 stored as BF16 (every tensor; the golden is computed on the stored values)",
        {"model_type": "qwen3", "num_hidden_layers": 3},
        "BF16", {}),
    "spark-f16": (
        "spark (GEGLU, head_gate, a sliding layer with window 8) stored as F16",
        {"model_type": "spark", "hidden_act": "gelu_pytorch_tanh", "head_gate": True,
         "sliding_window": 8, "num_hidden_layers": 3,
         "layer_types": ["full_attention", "sliding_attention", "full_attention"]},
        "F16", {}),
}

BASE_CONFIG = {
    "hidden_size": 48, "intermediate_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 112,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 128,
    "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
}

ARCH_CLASS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
              "qwen3": "Qwen3ForCausalLM", "spark": "SparkForCausalLM"}


def make_config(overrides, dtype):
    c = dict(BASE_CONFIG)
    c.update(overrides)
    c["architectures"] = [ARCH_CLASS[c["model_type"]]]
    c["torch_dtype"] = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype]
    c.setdefault("tie_word_embeddings", c["model_type"] != "llama")
    return c


def make_weights(cfg, rng):
    """Random float32 weights in HF names, scaled so activations stay O(1)."""
    E, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or E // H
    mt = cfg["model_type"]
    bias = mt == "qwen2" or cfg.get("attention_bias", False)
    o_bias = mt != "qwen2" and cfg.get("attention_bias", False)

    def normal(std, *shape):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    W = {"model.embed_tokens.weight": normal(0.4, V, E), "model.norm.weight": norm(E)}
    if not cfg["tie_word_embeddings"]:
        W["lm_head.weight"] = normal(0.4, V, E)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        W[p + "input_layernorm.weight"] = norm(E)
        W[p + "post_attention_layernorm.weight"] = norm(E)
        for name, rows in (("q", H * d), ("k", KV * d), ("v", KV * d)):
            W[p + "self_attn.%s_proj.weight" % name] = normal(0.15, rows, E)
            if bias:
                W[p + "self_attn.%s_proj.bias" % name] = normal(0.2, rows)
        W[p + "self_attn.o_proj.weight"] = normal(0.15, E, H * d)
        if o_bias:
            W[p + "self_attn.o_proj.bias"] = normal(0.1, E)
        if mt == "qwen3":
            W[p + "self_attn.q_norm.weight"] = norm(d)
            W[p + "self_attn.k_norm.weight"] = norm(d)
        if cfg.get("head_gate"):
            W[p + "self_attn.head_gate.weight"] = normal(0.3, H, E)
        W[p + "mlp.gate_proj.weight"] = normal(0.3, F, E)
        W[p + "mlp.up_proj.weight"] = normal(0.3, F, E)
        W[p + "mlp.down_proj.weight"] = normal(0.3, E, F)
    return W


def encode(a, dtype):
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    # BF16: round to nearest even on the top 16 bits of the f32 pattern
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2").tobytes()


def write_safetensors(path, W, dtype):
    header, blobs, off = {}, [], 0
    for name in sorted(W):
        b = encode(W[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(W[name].shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def prompts_for(name, vocab):
    """Three prompts of raw ids: 1 token, 11 tokens, and 40 tokens (longer than the
    sliding windows and than llama3's original context). Seeded by the name."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    return [[int(t) for t in rng.integers(3, vocab, n)] for n in (1, 11, 40)]


def top2_gap(logits):
    """Smallest gap between the best and second-best logit over rows."""
    s = np.sort(logits, axis=-1)
    return float((s[:, -1] - s[:, -2]).min())


def rounded(v):
    return [round(float(x), 7) for x in v]


def build(out_dir, name):
    about, overrides, dtype, _ = FIXTURES[name]
    cfg = make_config(overrides, dtype)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    W = make_weights(cfg, rng)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    st_path = os.path.join(d, "model.safetensors")
    write_safetensors(st_path, W, dtype)
    size = os.path.getsize(st_path)
    assert size < MAX_BYTES, "%s: model.safetensors is %d bytes" % (name, size)

    m = Model(d)  # read back what was written: BF16/F16 values as stored
    cases, all_greedy, margin = [], [], np.inf
    for p in prompts_for(name, cfg["vocab_size"]):
        logits = m.forward(p)
        mid = (len(p) - 1) // 2
        greedy = m.greedy(p, N_GREEDY)
        all_greedy.append(greedy)
        margin = min(margin, top2_gap(m.forward(p + greedy[:-1])[len(p) - 1:]))
        cases.append({"prompt": p, "greedy": greedy, "last_logits": rounded(logits[-1]),
                      "mid_logits_pos": mid, "mid_logits": rounded(logits[mid])})
    for g in all_greedy:
        assert len(set(g)) > 1, "%s: degenerate greedy output %s" % (name, g)
    # greedy ids are compared exactly: f32 must not be able to flip an argmax
    assert margin > 1e-3, "%s: greedy top-2 gap %.2g is too small" % (name, margin)
    golden = {"about": "tools/ref_forward.py (float64 numpy) on the stored weights; prompts "
                       "are raw ids (no BOS); last_logits after the whole prompt, mid_logits "
                       "at position mid_logits_pos; greedy: %d argmax ids" % N_GREEDY,
              "covers": about, "dtype": dtype, "cases": cases}
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("%-18s %-4s %6d bytes  top-2 gap %.3f  greedy %s" % (name, dtype, size, margin,
                                             " | ".join(" ".join(map(str, g[:6]))
                                                        for g in all_greedy)))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "fixtures",
                                                             "models")
    for name in FIXTURES:
        build(out, name)


if __name__ == "__main__":
    main()
