/* core/wformat.h — the weight-format vocabulary every layer shares: the weight paths a
 * user chooses (w4a8, ...), the packed layouts the kernels read, and the formats that
 * join them (a path in a layout, or a float type as stored), with their traits. It
 * sits in core/ because formats/ (the .nib reader), quant/ (the packers), kernels/ (the
 * GEMMs) and model/ all speak it and none of them may include another's headers.
 *
 * One matrix W is [n_out][n_in] (y = W x); its packed form is
 * one contiguous blob of planes, each plane starting at a 64-byte aligned offset
 * from the blob's start (the blob itself is 64-byte aligned in a .nib file).
 *
 * Layout NB_LAYOUT_ROWS (id 1) — row-major planes, the reference layout:
 *
 *   w4a8  (symmetric int4, zero fixed at 8):     w = d * (q - 8)
 *   w4a16 (asymmetric int4, scale and min):      w = d * q + m
 *     plane 0  qs     [n_out][n_in / 2] u8      element k of a row is byte k/2:
 *                                                low nibble for even k, high for odd k
 *        byte:  | k=1 (hi) | k=0 (lo) |  | k=3 | k=2 |  ...
 *     plane 1  d      [n_out][n_in / G] bf16    one scale per group of G along K
 *     plane 2  m      [n_out][n_in / G] bf16    w4a16 only: the group's min/offset
 *
 *   w8a16 (int8 per output channel):             w = d[r] * q
 *     plane 0  qs     [n_out][n_in] i8
 *     plane 1  d      [n_out] f32
 *
 *   bf16:  plane 0  [n_out][n_in] bf16
 *   f32:   plane 0  [n_out][n_in] f32
 *
 * G (group size) is 32, 64 or 128 and must divide n_in; n_in must be even.
 * Bits per weight are computed from these sizes (nb_layout_bpw in quant/quant.h), never typed in.
 *
 * Layout NB_LAYOUT_X16 (id 2) — the int4 paths (w4a8, w4a16) interleaved for SIMD:
 * the same planes and plane sizes as ROWS, another byte order. Needs n_out % 16 == 0
 * (other matrices stay ROWS). Block b holds output rows 16b..16b+15; chunk c holds
 * k = 8c..8c+7. Plane 0 is [n_out/16][n_in/8][64] bytes:
 *
 *   chunk (b, c), 64 bytes = 16 rows x one 32-bit lane:
 *
 *     byte:   0    1    2    3    4    5    6    7   ...  60   61   62   63
 *           +----+----+----+----+----+----+----+----+   +----+----+----+----+
 *     row:  |  r=0 (lane 0)     |  r=1 (lane 1)     |...|  r=15 (lane 15)   |
 *     lo:   | k0 | k1 | k2 | k3 | k0 | k1 | k2 | k3 |   | k0 | k1 | k2 | k3 |
 *     hi:   | k4 | k5 | k6 | k7 | k4 | k5 | k6 | k7 |   | k4 | k5 | k6 | k7 |
 *           +----+----+----+----+----+----+----+----+   +----+----+----+----+
 *     byte 4r+j: low nibble = q[16b+r][8c+j], high nibble = q[16b+r][8c+4+j]
 *
 *   so one 512-bit load, `& 0x0F`, gives 16 rows x k = 8c..8c+3 as u8 (one dword per
 *   row) and `>> 4 & 0x0F` gives k = 8c+4..8c+7: ready for vpdpbusd against 4
 *   broadcast activation bytes. The chunks of a block follow each other along K, and
 *   the blocks follow each other along the rows.
 *
 *   plane 1  d  [n_out/16][n_in/G][16] bf16   block b, group g: the 16 rows' scales
 *   plane 2  m  [n_out/16][n_in/G][16] bf16   w4a16 only, arranged as d
 */
#ifndef NB_CORE_WFORMAT_H
#define NB_CORE_WFORMAT_H

#include <stdint.h>

enum nb_wpath {
    NB_WPATH_F32 = 0,
    NB_WPATH_BF16,
    NB_WPATH_W8A16,
    NB_WPATH_W4A16,
    NB_WPATH_W4A8,
    NB_WPATH_COUNT
};

enum nb_layout { NB_LAYOUT_ROWS = 1, NB_LAYOUT_X16 = 2 };

#define NB_LAYOUT_ALIGN 64

/* "f32", "bf16", "w8a16", "w4a16", "w4a8". */
const char *nb_wpath_name(enum nb_wpath p);
/* w4a8 or w4a16: the int4 grids (groups along K, the X16 layout, GPTQ, recipes). */
static inline int nb_wpath_is_int4(enum nb_wpath p)
{
    return p == NB_WPATH_W4A8 || p == NB_WPATH_W4A16;
}
/* Returns 1 and sets *out for a known name, else 0. */
int nb_wpath_from_name(const char *name, enum nb_wpath *out);

/* Where each plane of a packed matrix lies. */
struct nb_layout_planes {
    int64_t n_planes;
    int64_t offset[3]; /* from the blob start, 64-byte aligned */
    int64_t size[3];   /* bytes */
    int64_t total;     /* blob size, a multiple of 64 */
};

/* Plane offsets and sizes for a matrix; returns 0 when the shape does not fit the
 * path (n_in not a multiple of the group, odd n_in for int4, sizes overflowing). */
int nb_layout_planes(enum nb_wpath p, int group, int64_t n_out, int64_t n_in,
                     struct nb_layout_planes *out);
/* The same for a given layout: NB_LAYOUT_ROWS is nb_layout_planes(); NB_LAYOUT_X16
 * has the same planes for w4a8 / w4a16 and n_out % 16 == 0, and fails otherwise. */
int nb_layout_planes_x(enum nb_wpath p, enum nb_layout layout, int group, int64_t n_out,
                       int64_t n_in, struct nb_layout_planes *out);
/* Bits per weight of a packed matrix, from its plane sizes (padding included); 0 when
 * the shape does not fit the path. */
double nb_layout_bpw(enum nb_wpath path, int group, int64_t n_out, int64_t n_in);

/* ---------------------------------------------------------------- formats */

/* A weight format: how one matrix is stored, hence which GEMM reads it and what input
 * that GEMM wants. A matrix of the model is a format, a group size (int4) and its
 * shape; the kernel table (kernels/kernels.h) has one GEMM per format. */
enum nb_wformat {
    NB_WF_F32 = 0,   /* plain f32 rows (a float source, or a .nib's f32 path) */
    NB_WF_F16,       /* plain f16 rows (a float source) */
    NB_WF_BF16,      /* plain bf16 rows (a float source, or a .nib's bf16 path) */
    NB_WF_W8A16,     /* w8a16, ROWS */
    NB_WF_W4A16,     /* w4a16, ROWS */
    NB_WF_W4A16_X16, /* w4a16, X16 */
    NB_WF_W4A8,      /* w4a8, ROWS */
    NB_WF_W4A8_X16,  /* w4a8, X16 */
    NB_WF_Q4_K,      /* GGUF Q4_K rows as stored (a k-quant source run by `--path source`) */
    NB_WF_Q6_K,      /* GGUF Q6_K rows as stored */
    NB_WF_Q4_K_X16,  /* GGUF Q4_K blocks shuffled into 16-row records, every bit kept */
    NB_WF_Q6_K_X16,  /* GGUF Q6_K blocks, likewise (kernels/qblock.h: the records) */
    NB_WF_Q5_K,      /* GGUF Q5_K rows as stored */
    NB_WF_Q4_0,      /* GGUF Q4_0 rows as stored */
    NB_WF_Q8_0,      /* GGUF Q8_0 rows as stored */
    NB_WF_Q5_K_X16,  /* their 16-row records */
    NB_WF_Q4_0_X16,
    NB_WF_Q8_0_X16,
    NB_WF_IQ4_NL,    /* GGUF IQ4_NL rows as stored */
    NB_WF_IQ4_XS,    /* GGUF IQ4_XS rows as stored */
    NB_WF_IQ4_NL_X16,
    NB_WF_IQ4_XS_X16,
    NB_WF_COUNT
};

/* The input rows a format's GEMM reads. */
enum nb_gemm_input {
    NB_INPUT_F32 = 0, /* f32 activations */
    NB_INPUT_Q8,      /* int8 per group of the weight's group size (w4a8) */
    NB_INPUT_Q8K,     /* int8 per 256 with one f32 scale, code sums per 16 (the k-quants) */
};

struct nb_wformat_info {
    const char *name;         /* "f32", "f16", "bf16", "w8a16", "w4a16", "w4a16-x16", ... */
    enum nb_wpath path;       /* the weight path (F16 counts as an unquantized f32-path weight) */
    enum nb_layout layout;    /* ROWS, or X16 */
    enum nb_gemm_input input; /* what its GEMM reads */
    int plain;                /* 1: float rows as stored, row-major, not a packed blob */
    int row_block;            /* output rows a SIMD GEMM wants per call boundary (16 for X16) */
};

/* Traits of a format (NULL for a value out of range). */
const struct nb_wformat_info *nb_wformat_info(enum nb_wformat f);
/* The format of a packed matrix of `path` in `layout` (non-int4 paths: ROWS). 1 and
 * *out set, or 0 for a pair that does not exist (X16 w8a16, ...). */
int nb_wformat_of(enum nb_wpath path, enum nb_layout layout, enum nb_wformat *out);
/* Plane offsets and sizes of a matrix in format f (see nb_layout_planes; NB_WF_Q4_K /
 * NB_WF_Q6_K: one plane of n_out rows of n_in / 256 blocks, total not padded;
 * NB_WF_Q4_K_X16 / NB_WF_Q6_K_X16: one plane of n_out / 16 x n_in / 256 records of
 * NB_Q4_K_X16_BYTES / NB_Q6_K_X16_BYTES, n_out a multiple of 16). */
#define NB_Q4_K_X16_BYTES 2368 /* 16 rows x 256 k, kernels/qblock.h */
#define NB_Q6_K_X16_BYTES 3392
#define NB_Q5_K_X16_BYTES 2880
#define NB_Q4_0_X16_BYTES 576  /* 16 rows x 64 k */
#define NB_Q8_0_X16_BYTES 1088
#define NB_IQ4_NL_X16_BYTES 576
#define NB_IQ4_XS_X16_BYTES 2240

/* A GGUF block format nibble runs as stored: its rows (one block: `elems` weights in
 * `bytes`) and its X16 records (16 rows x rec_k weights in rec_bytes). */
struct nb_block_info {
    const char *dtype; /* the GGUF type name: "Q4_K", ... */
    int elems, bytes;  /* one block of a row */
    int rec_k, rec_bytes;
    enum nb_wformat rows, x16; /* the two formats */
};
/* 1 and *out for a block format (rows or records), 0 for another. */
int nb_wformat_block(enum nb_wformat f, struct nb_block_info *out);
/* The same by GGUF type name ("Q4_K", ...): 0 for a type nibble does not run as stored. */
int nb_wformat_block_named(const char *dtype, struct nb_block_info *out);
/* 1 for the formats that hold a GGUF file's blocks (rows as stored, or their X16 records). */
static inline int nb_wformat_is_kquant(enum nb_wformat f)
{
    return nb_wformat_block(f, 0);
}
int nb_wformat_planes(enum nb_wformat f, int group, int64_t n_out, int64_t n_in,
                      struct nb_layout_planes *out);
/* The group of int8 activations a GEMM on f quantizes its input in: a block format with
 * per-block int8 inputs (Q4_0, Q8_0, IQ4_NL) takes its blocks' size (32), every other
 * format the weight's own group. */
int nb_wformat_act_group(enum nb_wformat f, int group);

#endif
