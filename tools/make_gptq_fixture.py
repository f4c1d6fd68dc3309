#!/usr/bin/python3
"""make_gptq_fixture.py — turn a float Hugging Face directory into GPTQ and AWQ
checkpoints as AutoGPTQ / GPTQModel / AutoAWQ lay them out, for nibble's tests.

    make_gptq_fixture.py SRC_DIR OUT_DIR VARIANT [--group G] [--break KIND]

numpy only, independent of nibble's C: its own minimal safetensors reader and writer,
round-to-nearest quantization per group (no GPTQ/AWQ search: the layout is what is
tested), packing written from the published layouts:

  GPTQ  qweight I32 [in*b/32, out], codes packed along the input dim, low bits first;
        qzeros I32 [groups, out*b/32] packed along the output dim; scales F16
        [groups, out]; g_idx I32 [in]; w = scale * (q - zero); checkpoint_format "gptq"
        (v1) stores zero - 1, "gptq_v2" stores zero.
  AWQ   (version gemm) qweight I32 [in, out/8] packed along the output dim in the nibble
        order 0 2 4 6 1 3 5 7; qzeros I32 [in/group, out/8] alike; scales F16
        [in/group, out]; zeros stored as they are.

VARIANT: gptq-sym-v1 (config in a separate quantize_config.json, as AutoGPTQ wrote it),
gptq-asym-v1, gptq-sym-v2, gptq-asym-v2, gptq-act (desc_act with a random permutation in
g_idx, v2), gptq-8bit (sym, v1), awq (asym, gemm).
--break KIND writes a malformed checkpoint: qweight-shape (layer 0 q_proj's qweight
loses a packed row), g_idx-range (a g_idx value = the number of groups), method
(quant_method fp8), no-scales (layer 0 q_proj's scales left out).

Besides the checkpoint, OUT_DIR/expected/ holds, for model.layers.0.self_attn.q_proj:
deq.f32 (the exact dequantization, f32 [out][in]), w4a16.f32 (the codes with bf16
d = bf16(scale), m = bf16(-scale * zero), decoded as nibble's w4a16 grid does:
f32(d * q) + m) and, when every zero is 8, w4a8.f32 (d * (q - 8)); and info.json.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

LINEAR = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
PROBE = "model.layers.0.self_attn.q_proj"
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble t of a word holds output 8u + AWQ_ORDER[t]
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        a, b = v["data_offsets"]
        buf = raw[base + a:base + b]
        if v["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=np.dtype(DTYPES[v["dtype"]]).newbyteorder("<"))
        out[name] = arr.reshape(v["shape"]).copy()
    return out


def write_safetensors(path, tensors):
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
             np.dtype(np.int32): "I32"}
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def bf16(x):
    """Round f32 to bf16 (nearest even), returned as f32."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def quantize(w, bits, group, sym, g_idx, zero_min):
    """RTN codes per (row, group): returns q [out][in], scales f16 [groups][out],
    zeros int [groups][out] (the true zero points)."""
    n_out, n_in = w.shape
    maxq = (1 << bits) - 1
    n_groups = int(g_idx.max()) + 1
    q = np.zeros((n_out, n_in), dtype=np.int64)
    scales = np.zeros((n_groups, n_out), dtype=np.float16)
    zeros = np.zeros((n_groups, n_out), dtype=np.int64)
    for g in range(n_groups):
        cols = np.nonzero(g_idx == g)[0]
        x = w[:, cols].astype(np.float64)
        if sym:
            amax = np.maximum(np.abs(x).max(axis=1), 1e-8)
            s = 2 * amax / maxq
            z = np.full(n_out, (maxq + 1) // 2)
        else:
            lo = np.minimum(x.min(axis=1), 0)
            hi = np.maximum(x.max(axis=1), 0)
            s = np.maximum(hi - lo, 1e-8) / maxq
            z = np.clip(np.rint(-lo / s), zero_min, maxq).astype(np.int64)
        s16 = s.astype(np.float16)
        s32 = s16.astype(np.float64)
        q[:, cols] = np.clip(np.rint(x / s32[:, None]) + z[:, None], 0, maxq)
        scales[g] = s16
        zeros[g] = z
    return q, scales, zeros


def pack_rows(codes, bits):
    """codes [n][m] -> int32 [n*bits/32][m]: along dim 0, low bits first."""
    per = 32 // bits
    c = codes.astype(np.uint64).reshape(codes.shape[0] // per, per, codes.shape[1])
    word = np.zeros((c.shape[0], c.shape[2]), dtype=np.uint64)
    for t in range(per):
        word |= c[:, t, :] << np.uint64(t * bits)
    return word.astype(np.uint32).view(np.int32)


def pack_cols(codes, bits, order=None):
    """codes [n][m] -> int32 [n][m*bits/32]: along dim 1; nibble t holds column
    per*u + order[t] (order None: t)."""
    per = 32 // bits
    order = order or list(range(per))
    c = codes.astype(np.uint64).reshape(codes.shape[0], codes.shape[1] // per, per)
    word = np.zeros(c.shape[:2], dtype=np.uint64)
    for t in range(per):
        word |= c[:, :, order[t]] << np.uint64(t * bits)
    return word.astype(np.uint32).view(np.int32)


VARIANTS = {
    #  name          method  bits sym  version  act   separate config file
    "gptq-sym-v1": ("gptq", 4, True, 1, False, True),
    "gptq-asym-v1": ("gptq", 4, False, 1, False, False),
    "gptq-sym-v2": ("gptq", 4, True, 2, False, False),
    "gptq-asym-v2": ("gptq", 4, False, 2, False, False),
    "gptq-act": ("gptq", 4, False, 2, True, False),
    "gptq-8bit": ("gptq", 8, True, 1, False, False),
    "awq": ("awq", 4, False, 0, False, False),
}


def main():
    args = sys.argv[1:]
    group, brk = 128, None
    if "--group" in args:
        i = args.index("--group")
        group = int(args[i + 1])
        del args[i:i + 2]
    if "--break" in args:
        i = args.index("--break")
        brk = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3 or args[2] not in VARIANTS:
        sys.exit(__doc__)
    src, out, variant = args
    method, bits, sym, version, act, separate = VARIANTS[variant]
    rng = np.random.default_rng(1234)
    cfg = json.load(open(os.path.join(src, "config.json")))
    tensors = read_safetensors(os.path.join(src, "model.safetensors"))
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    for f in os.listdir(src):
        if f.startswith("tokenizer") or f in ("special_tokens_map.json", "generation_config.json"):
            shutil.copyfile(os.path.join(src, f), os.path.join(out, f))
    res, info = {}, {"variant": variant}
    for name, arr in tensors.items():
        prefix = name[:-len(".weight")] if name.endswith(".weight") else None
        if not prefix or not any(prefix.endswith(k) for k in LINEAR) or arr.ndim != 2:
            res[name] = arr
            continue
        w = arr.astype(np.float32)
        n_out, n_in = w.shape
        G = group if group > 0 else n_in
        plain = np.arange(n_in) // G
        g_idx = plain[rng.permutation(n_in)] if act else plain
        q, scales, zeros = quantize(w, bits, G, sym, g_idx, 1 if version == 1 else 0)
        if method == "gptq":
            stored = zeros - (1 if version == 1 else 0)
            res[prefix + ".qweight"] = pack_rows(q.T, bits)
            res[prefix + ".qzeros"] = pack_cols(stored, bits)
            res[prefix + ".scales"] = scales
            res[prefix + ".g_idx"] = g_idx.astype(np.int32)
        else:
            res[prefix + ".qweight"] = pack_cols(q.T, bits, AWQ_ORDER)
            res[prefix + ".qzeros"] = pack_cols(zeros, bits, AWQ_ORDER)
            res[prefix + ".scales"] = scales
        if prefix == PROBE:
            s32 = scales.astype(np.float32)[g_idx].T  # [out][in]
            z = zeros[g_idx].T
            deq = s32 * (q - z).astype(np.float32)
            deq.astype("<f4").tofile(os.path.join(out, "expected", "deq.f32"))
            d = bf16(s32)
            m = bf16(-(s32 * z.astype(np.float32)))
            (d * q.astype(np.float32) + m).astype("<f4").tofile(
                os.path.join(out, "expected", "w4a16.f32"))
            if (zeros == 8).all():
                (d * (q - 8).astype(np.float32)).astype("<f4").tofile(
                    os.path.join(out, "expected", "w4a8.f32"))
            info.update({"tensor": PROBE, "shape": [n_out, n_in], "group": G, "bits": bits,
                         "sym": bool((zeros == (1 << (bits - 1))).all()),
                         "plain_order": not act})
    qc = {"quant_method": method, "bits": bits, "group_size": group}
    if method == "gptq":
        qc.update({"desc_act": act, "sym": sym, "damp_percent": 0.01, "true_sequential": True,
                   "static_groups": False})
        qc["checkpoint_format"] = "gptq" if version == 1 else "gptq_v2"
    else:
        qc.update({"version": "gemm", "zero_point": True})
    if brk == "qweight-shape":
        res[PROBE + ".qweight"] = res[PROBE + ".qweight"][:-1]
    elif brk == "g_idx-range":
        gi = res[PROBE + ".g_idx"].copy()
        gi[5] = gi.max() + 1
        res[PROBE + ".g_idx"] = gi
    elif brk == "method":
        qc["quant_method"] = "fp8"
    elif brk == "no-scales":
        del res[PROBE + ".scales"]
    elif brk:
        sys.exit(f"unknown --break {brk}")
    if separate:
        del qc["quant_method"]
        json.dump(qc, open(os.path.join(out, "quantize_config.json"), "w"), indent=2)
    else:
        cfg["quantization_config"] = qc
    cfg["torch_dtype"] = "float16"
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    write_safetensors(os.path.join(out, "model.safetensors"), res)
    json.dump(info, open(os.path.join(out, "expected", "info.json"), "w"))


if __name__ == "__main__":
    main()
