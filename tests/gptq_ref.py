#!/usr/bin/env python3
"""tests/gptq_ref.py — an independent float64 GPTQ in numpy, the reference for
tests/test_gptq.c (same codes expected).

Written from the paper's algorithm, not from nibble's C: no lazy blocks (every column's
error updates all later columns at once), the inverse through numpy's own Cholesky and
inverse, act-order by a stable sort. The codes on each fixed group grid are computed in
float32 exactly as nibble's quantizer defines them (quant/quant.h: w4a8 q = rint(x / d) + 8,
w4a16 q = rint((x - m) / d), with 1/d taken in float32, clamped to 0..15).

Usage: gptq_ref.py DIR   reads DIR/case.json, w.f32, h.f64, d.f32, m.f32; writes DIR/q.u8
"""
import json
import os
import sys

import numpy as np


def codes(path, x, d, m):
    x = np.float32(x)
    d = np.float32(d)
    inv = np.float32(1) / d if d != 0 else np.float32(0)
    if path == "w4a8":
        v = np.clip(x * inv, np.float32(-8), np.float32(7))
        return int(np.rint(v)) + 8
    v = np.clip((x - np.float32(m)) * inv, np.float32(0), np.float32(15))
    return int(np.rint(v))


def value(path, q, d, m):
    d = np.float32(d)
    if path == "w4a8":
        return float(d * np.float32(q - 8))
    return float(d * np.float32(q) + np.float32(m))


def main():
    dirname = sys.argv[1]
    case = json.load(open(os.path.join(dirname, "case.json")))
    n_out, n_in, group = case["n_out"], case["n_in"], case["group"]
    path, damp, act_order = case["path"], case["damp"], case["act_order"]
    w = np.fromfile(os.path.join(dirname, "w.f32"), dtype=np.float32).reshape(n_out, n_in)
    h = np.fromfile(os.path.join(dirname, "h.f64"), dtype=np.float64).reshape(n_in, n_in)
    ng = n_in // group
    d = np.fromfile(os.path.join(dirname, "d.f32"), dtype=np.float32).reshape(n_out, ng)
    m = np.fromfile(os.path.join(dirname, "m.f32"), dtype=np.float32).reshape(n_out, ng)

    perm = np.arange(n_in)
    if act_order:
        perm = np.argsort(-np.diag(h), kind="stable")
    hp = h[np.ix_(perm, perm)].copy()
    wp = w[:, perm].astype(np.float64)
    dead = np.diag(hp) <= 0
    hp[dead, dead] = 1.0
    wp[:, dead] = 0.0
    mean = np.mean(np.diag(h))
    hp += damp * (mean if mean > 0 else 1.0) * np.eye(n_in)
    hinv = np.linalg.inv(hp)
    u = np.linalg.cholesky(hinv).T  # upper: hinv = u^T u

    q = np.zeros((n_out, n_in), dtype=np.uint8)
    for i in range(n_in):
        col = perm[i]
        g = col // group
        for r in range(n_out):
            c = codes(path, wp[r, i], d[r, g], m[r, g])
            q[r, col] = c
            e = (wp[r, i] - value(path, c, d[r, g], m[r, g])) / u[i, i]
            wp[r, i + 1:] -= e * u[i, i + 1:]
    q.tofile(os.path.join(dirname, "q.u8"))


if __name__ == "__main__":
    main()
