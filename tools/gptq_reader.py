#!/usr/bin/env python3
"""tools/gptq_reader.py — an independent reader of GPTQ checkpoints (numpy only), to check
what `nibble export --format gptq` writes without any of nibble's code.

Written from the published descriptions, not from nibble's sources:
  * safetensors (the safetensors library's README, "Format"): u64 little-endian header
    size N, N bytes of JSON {name: {"dtype", "shape", "data_offsets": [b, e]}, optional
    "__metadata__"}, then the data; offsets are relative to the data, which they must
    cover with no holes or overlaps.
  * GPTQ (AutoGPTQ / GPTQModel QuantLinear, vLLM's gptq.py, transformers' GPTQConfig):
    for a linear layer with K inputs, N outputs, `bits` b and group size G, and
    p = 32 / b values per int32:
        qweight int32 [K/p, N]   value k of column n: bits b*(k%p).. of qweight[k//p, n]
        qzeros  int32 [K/G, N/p] zero of (g, n): bits b*(n%p).. of qzeros[g, n//p],
                                 plus 1 unless checkpoint_format is "gptq_v2"
        scales  f16   [K/G, N]
        g_idx   int32 [K]        the group of input k
        W[n, k] = scales[g_idx[k], n] * (q[k, n] - zero[g_idx[k], n])
    (values computed in float32: scale * small integer is exact there). This is the
    arithmetic of vLLM's torch fallback in its GPTQ linear method: shifts 0, b, 2b, ...
    over qweight rows and qzeros columns, zeros + 1, scales[g_idx] * (weight - zeros).

usage:
  gptq_reader.py check DIR                   validate every quantized module; print them
  gptq_reader.py list DIR                    the quantized modules, one per line
  gptq_reader.py dump DIR MODULE OUT         W [N, K] as .npy (OUT ends in .npy) or raw f32
  gptq_reader.py compare DIR MODULE=RAW ...  W equals the raw little-endian f32 [N, K] file
                                             bit for bit (+0 == -0), for every pair given
  gptq_reader.py same DIR_A DIR_B            every linear of A (GPTQ or float .weight)
                                             dequantizes to the same W as in B
Exit status 0 when everything holds, 1 otherwise (with a message on stderr).
"""
import json
import os
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
          "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "u1"}


class Fail(Exception):
    pass


def read_safetensors(path):
    """name -> numpy array (BF16 as float32), and the metadata."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise Fail(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise Fail(f"{path}: header of {n} bytes runs past the end")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    meta = header.pop("__metadata__", {})
    spans, out = [], {}
    for name, e in header.items():
        dt, shape, (b, end) = e["dtype"], e["shape"], e["data_offsets"]
        if dt not in DTYPES:
            raise Fail(f"{path}: {name}: dtype {dt} is not known")
        count = int(np.prod(shape)) if shape else 1
        size = count * np.dtype(DTYPES[dt]).itemsize
        if not 0 <= b <= end <= len(data) or end - b != size:
            raise Fail(f"{path}: {name}: data_offsets {b}..{end} do not hold {dt} {shape}")
        spans.append((b, end, name))
        a = np.frombuffer(data[b:end], dtype=DTYPES[dt]).reshape(shape)
        if dt == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a
    pos = 0
    for b, end, name in sorted(spans):
        if b != pos:
            raise Fail(f"{path}: {name}: starts at {b}, the tensor before ends at {pos} "
                       "(holes and overlaps are not allowed)")
        pos = end
    if pos != len(data):
        raise Fail(f"{path}: the tensors end at {pos}, the data has {len(data)} bytes")
    return out, meta


class Export:
    def __init__(self, d):
        self.dir = d
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            self.config = json.load(f)
        q = self.config.get("quantization_config")
        if not q or q.get("quant_method") != "gptq":
            raise Fail(f"{d}/config.json: no quantization_config with quant_method gptq")
        self.q = q
        self.bits = int(q["bits"])
        if self.bits not in (2, 4, 8):
            raise Fail(f"{d}: bits {self.bits} (2, 4 and 8 are read)")
        self.group = int(q["group_size"])
        self.v1 = q.get("checkpoint_format", "gptq") != "gptq_v2"
        files = sorted(x for x in os.listdir(d) if x.endswith(".safetensors"))
        if not files:
            raise Fail(f"{d}: no .safetensors file")
        self.t = {}
        for fn in files:
            t, meta = read_safetensors(os.path.join(d, fn))
            self.t.update(t)
        self.modules = sorted(k[:-len(".qweight")] for k in self.t if k.endswith(".qweight"))

    def dequant(self, mod):
        t, b = self.t, self.bits
        p = 32 // b
        qw = t[mod + ".qweight"].view(np.uint32)
        qz = t[mod + ".qzeros"].view(np.uint32)
        sc = t[mod + ".scales"]
        gi = t[mod + ".g_idx"].astype(np.int64)
        k8, n = qw.shape
        k = k8 * p
        if sc.dtype != np.float16:
            raise Fail(f"{mod}.scales: {sc.dtype}, GPTQ scales are f16")
        if qz.shape[1] * p != n or sc.shape[1] != n or gi.shape != (k,) or qz.shape[0] != sc.shape[0]:
            raise Fail(f"{mod}: shapes qweight {qw.shape} qzeros {qz.shape} scales {sc.shape} "
                       f"g_idx {gi.shape} disagree")
        if gi.min() < 0 or gi.max() >= sc.shape[0]:
            raise Fail(f"{mod}.g_idx: values outside 0..{sc.shape[0] - 1}")
        mask = np.uint32((1 << b) - 1)
        shifts = (np.arange(p, dtype=np.uint32) * b)
        q = ((qw[:, None, :] >> shifts[None, :, None]) & mask).reshape(k, n).astype(np.int32)
        z = ((qz[:, :, None] >> shifts[None, None, :]) & mask).reshape(qz.shape[0], n)
        z = z.astype(np.int32) + (1 if self.v1 else 0)
        w = sc.astype(np.float32)[gi] * (q - z[gi]).astype(np.float32)
        return np.ascontiguousarray(w.T)

    def weight(self, mod):
        """W [N, K] of any linear: GPTQ tensors, or a float .weight."""
        if mod + ".qweight" in self.t:
            return self.dequant(mod)
        w = self.t.get(mod + ".weight")
        if w is None:
            raise Fail(f"{self.dir}: no module {mod}")
        return w.astype(np.float32)

    def linears(self):
        out = set(self.modules)
        for name, a in self.t.items():
            if name.endswith(".weight") and a.ndim == 2 and "embed_tokens" not in name:
                out.add(name[:-len(".weight")])
        return sorted(out)


def check(e):
    g = e.group
    for m in e.modules:
        w = e.dequant(m)
        gi = e.t[m + ".g_idx"]
        if g > 0 and not np.array_equal(gi, np.arange(gi.shape[0]) // g):
            raise Fail(f"{m}.g_idx is not k // {g} (desc_act checkpoints are not written here)")
        if not np.all(np.isfinite(w)):
            raise Fail(f"{m}: non-finite weights")
        print(f"{m} [{w.shape[0]}, {w.shape[1]}] group {g}")
    print(f"{e.dir}: {len(e.modules)} GPTQ modules, bits {e.bits}, group {g}, "
          f"sym {e.q.get('sym')}, lm_head {e.q.get('lm_head', False)}")


def same_bits(a, b):
    """Equal as float32 values, +0 == -0, NaN never equal."""
    return a.shape == b.shape and bool(np.all(a == b))


def main(argv):
    if len(argv) < 3 or argv[1] not in ("check", "list", "dump", "compare", "same"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd = argv[1]
    try:
        if cmd == "same":
            a, b = Export(argv[2]), Export(argv[3])
            la, lb = a.linears(), b.linears()
            if la != lb:
                raise Fail(f"the linears differ: {sorted(set(la) ^ set(lb))}")
            for m in la:
                if not same_bits(a.weight(m), b.weight(m)):
                    raise Fail(f"{m}: the two exports differ")
            print(f"same: {len(la)} linears identical")
            return 0
        e = Export(argv[2])
        if cmd == "check":
            check(e)
        elif cmd == "list":
            print("\n".join(e.modules))
        elif cmd == "dump":
            w = e.weight(argv[3])
            if argv[4].endswith(".npy"):
                np.save(argv[4], w)
            else:
                w.astype("<f4").tofile(argv[4])
        else:
            for pair in argv[3:]:
                mod, _, path = pair.partition("=")
                w = e.weight(mod)
                ref = np.fromfile(path, dtype="<f4")
                if ref.size != w.size:
                    raise Fail(f"{mod}: {path} holds {ref.size} values, the module {w.size} "
                               f"({w.shape[0]} x {w.shape[1]})")
                ref = ref.reshape(w.shape)
                if not same_bits(w, ref):
                    bad = int(np.count_nonzero(w != ref))
                    raise Fail(f"{mod}: {bad} of {w.size} values differ from {path} "
                               f"(max |diff| {float(np.max(np.abs(w - ref))):g})")
            print(f"compare: {len(argv) - 3} modules equal bit for bit")
        return 0
    except (Fail, OSError, KeyError, ValueError) as ex:
        print(f"gptq_reader: {ex}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
