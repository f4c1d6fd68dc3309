/* quant/kquant.h — float rows into GGUF block formats (kernels/qblock.h), written by
 * nibble: the blocks a llama.cpp file would hold, with the scales chosen by a weighted
 * least-squares search, so a recipe can give a matrix a 6- or 8-bit width that runs on
 * the block formats' integer kernels (kernels/x86/gemm_kq_*.c) after the lossless X16
 * repack (quant/kq_repack.h).
 *
 *   Q6_K  256 values: 16 sub-blocks of 16, q in -32..31, an int8 scale per sub-block
 *         under one f16 super-scale d:  x = (d * sc) * q            (6.5625 bits a value)
 *   Q8_0  32 values: q in -127..127, an f16 scale d:  x = d * q      (8.5 bits a value)
 *
 * The search, per sub-block of n values x with importances w (the calibration text's mean
 * squared activation of each input channel, or x^2 when there is none): candidate scales
 * s = amax / (nmax + 0.1 i), i in -10..10 (nmax 32 for Q6_K, signed towards the value of
 * largest magnitude), each scored by sum w (x - s q)^2 with q = clamp(round(x / s)) and
 * refitted once (s = sum w x q / sum w q^2, the least-squares scale of those codes); the
 * best is kept. Q6_K then rounds the 16 sub-block scales to int8 under d = (largest scale)
 * / -128 .. 127 and chooses every code again against its sub-block's rounded scale, so the
 * codes are optimal for the scales that are stored. Deterministic, no fused multiply-adds
 * (the file is the same on every CPU). */
#ifndef NB_QUANT_KQUANT_H
#define NB_QUANT_KQUANT_H

#include <stdint.h>

#include "core/error.h"
#include "core/wformat.h"

/* Rows [r0, r1) of x [n_out][n_in] (f32, row-major) into the file rows of `fmt` (NB_WF_Q6_K
 * or NB_WF_Q8_0; n_in a multiple of the block's elements) at dst, row r at
 * dst + r * (n_in / elems * block bytes). imp: n_in importances shared by every row, or NULL.
 * Thread-safe over disjoint row ranges. NB_ERR_INVALID_ARG for another format, a shape
 * that is not whole blocks or a bad range. */
enum nb_status nb_kquant_rows(enum nb_wformat fmt, const float *x, int64_t n_out, int64_t n_in,
                              const float *imp, int64_t r0, int64_t r1, void *dst);

/* The 256 codes of one Q6_K block, each as u = q + 32 in 0..63, into its ql / qh bits
 * (bytes 0..191; the scales and d are left as they are). */
void nb_q6_k_put_codes(uint8_t *block, const uint8_t *u);

#endif
