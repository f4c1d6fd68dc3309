/* kernels/x86/gemm_w4a8_amx.c — w4a8 GEMM on the X16 layout with AMX-INT8 (prefill).
 *
 * UNVERIFIED: compiled and unit-tested against the reference only where AMX exists; it
 * has never been measured on an AMX machine. dispatch.c installs it only after a
 * first-use self-check against nb_gemm_w4a8_x16_ref.
 *
 * Contract: nb_gemm_w4a8_fn on an NB_LAYOUT_X16 blob, r0 and r1 multiples of 16, the
 * same result bit for bit as nb_gemm_w4a8_x16_ref (int32 inner sums, then per group
 * y += (d_w * xd) * (float)(acc - 8 xsum) in group order, from 0). Tokens that do not
 * fill a 16-token tile (all of them when n_tok < 16) go to the AVX-512 VNNI kernel.
 * The calling thread must be allowed tile data (nb_amx_request_perm() returned 1).
 *
 * Tiles, K = min(group, 64) bytes of k per step:
 *   A  tmm4/5  16 tokens x K int8        loaded straight from xq (stride ldxq)
 *   B  tmm6/7  K/4 rows x 16 out rows x 4 bytes (VNNI order), u8 0..15:
 *              B row 2i   = chunk i of the step & 0x0F         (k 8i..8i+3 per row)
 *              B row 2i+1 = (chunk i of the step >> 4) & 0x0F  (k 8i+4..8i+7)
 *              i.e. one X16 chunk unpacks into two B rows with no shuffling
 *   C  tmm0..3 16 tokens x 16 out rows int32, 2 token tiles x 2 row blocks
 *   C += tdpbsud(A signed, B unsigned); after each group C is stored and flushed in f32.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

int nb_amx_request_perm(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

void nb_amx_config(int kstep)
{
    _Alignas(64) struct tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 4; i++) /* C */
        cfg.rows[i] = 16, cfg.colsb[i] = 64;
    for (int i = 4; i < 6; i++) /* A */
        cfg.rows[i] = 16, cfg.colsb[i] = (uint16_t)kstep;
    for (int i = 6; i < 8; i++) /* B */
        cfg.rows[i] = (uint8_t)(kstep / 4), cfg.colsb[i] = 64;
    _tile_loadconfig(&cfg);
}

/* kstep/8 chunks from `w` into kstep/4 B rows of 64 bytes. */
static void unpack_b(uint8_t *dst, const uint8_t *w, int kstep)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < kstep / 8; i++) {
        __m512i v = _mm512_loadu_si512((const void *)(w + 64 * i));
        _mm512_store_si512((void *)(dst + 128 * i), _mm512_and_si512(v, m4));
        _mm512_store_si512((void *)(dst + 128 * i + 64),
                           _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
    }
}

/* One C tile (16 tokens x 16 rows, int32) into the f32 sums yacc[16][16]. */
static void flush(float *yacc, const int32_t *c, const uint16_t *ds, const float *xd,
                  const int32_t *xsum, int64_t ldxg, int64_t g)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)ds);
    __m512 dw = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    for (int t = 0; t < 16; t++) {
        __m512 xdv = _mm512_set1_ps(xd[t * ldxg + g]);
        __m512i corr = _mm512_set1_epi32(8 * xsum[t * ldxg + g]);
        __m512i s = _mm512_load_si512((const void *)(c + 16 * t));
        __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(s, corr));
        __m512 y = _mm512_load_ps(yacc + 16 * t);
        _mm512_store_ps(yacc + 16 * t, _mm512_add_ps(y, _mm512_mul_ps(_mm512_mul_ps(dw, xdv), f)));
    }
}

/* mt (1, 2) token tiles of 16 from token 0, nb (1, 2) row blocks from blk. */
static void block(float *y, int64_t ldy, const int8_t *xq, const float *xd, const int32_t *xsum,
                  int64_t ldxq, int64_t ldxg, const uint8_t *qs, const uint16_t *ds, int64_t n_in,
                  int group, int64_t blk, int mt, int nb, int kstep)
{
    _Alignas(64) float yacc[2][2][256];
    _Alignas(64) int32_t cbuf[256];
    _Alignas(64) uint8_t bbuf[2][1024];
    memset(yacc, 0, sizeof yacc);
    const int64_t ng = n_in / group, bstride = 8 * n_in;
    for (int64_t g = 0; g < ng; g++) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t k0 = g * group; k0 < (g + 1) * group; k0 += kstep) {
            for (int b = 0; b < nb; b++)
                unpack_b(bbuf[b], qs + (blk + b) * bstride + k0 * 8, kstep);
            _tile_loadd(4, xq + k0, ldxq);
            _tile_loadd(6, bbuf[0], 64);
            _tile_dpbsud(0, 4, 6);
            if (nb > 1) {
                _tile_loadd(7, bbuf[1], 64);
                _tile_dpbsud(1, 4, 7);
            }
            if (mt > 1) {
                _tile_loadd(5, xq + 16 * ldxq + k0, ldxq);
                _tile_dpbsud(2, 5, 6);
                if (nb > 1) _tile_dpbsud(3, 5, 7);
            }
        }
        for (int t = 0; t < mt; t++)
            for (int b = 0; b < nb; b++) {
                if (t == 0 && b == 0) _tile_stored(0, cbuf, 64);
                if (t == 0 && b == 1) _tile_stored(1, cbuf, 64);
                if (t == 1 && b == 0) _tile_stored(2, cbuf, 64);
                if (t == 1 && b == 1) _tile_stored(3, cbuf, 64);
                flush(yacc[t][b], cbuf, ds + ((blk + b) * ng + g) * 16, xd + 16 * t * ldxg,
                      xsum + 16 * t * ldxg, ldxg, g);
            }
    }
    for (int t = 0; t < mt; t++)
        for (int b = 0; b < nb; b++)
            for (int i = 0; i < 16; i++)
                memcpy(y + (16 * t + i) * ldy + (blk + b) * 16, yacc[t][b] + 16 * i,
                       16 * sizeof(float));
}

void nb_gemm_w4a8_x16_amx(float *y, int64_t ldy, const int8_t *xq, const float *xd,
                          const int32_t *xsum, int64_t ldxq, int64_t ldxg, const void *w_blob,
                          int64_t n_out, int64_t n_in, int group, int n_tok, int64_t r0, int64_t r1)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A8, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return;
    const int full = n_tok / 16 * 16;
    if (full < n_tok) /* the tokens that do not fill a tile */
        nb_gemm_w4a8_x16_avx512vnni(y + full * ldy, ldy, xq + full * ldxq, xd + full * ldxg,
                                    xsum + full * ldxg, ldxq, ldxg, w_blob, n_out, n_in, group,
                                    n_tok - full, r0, r1);
    if (!full) return;
    const uint8_t *qs = (const uint8_t *)w_blob + pl.offset[0];
    const uint16_t *ds = (const uint16_t *)((const uint8_t *)w_blob + pl.offset[1]);
    const int kstep = group < 64 ? group : 64;
    const int64_t b0 = r0 / 16, b1 = r1 / 16;
    nb_amx_config(kstep);
    for (int t = 0; t < full; t += 32) {
        const int mt = full - t >= 32 ? 2 : 1;
        for (int64_t blk = b0; blk < b1; blk += 2) {
            const int nb = b1 - blk >= 2 ? 2 : 1;
            block(y + t * ldy, ldy, xq + t * ldxq, xd + t * ldxg, xsum + t * ldxg, ldxq, ldxg, qs,
                  ds, n_in, group, blk, mt, nb, kstep);
        }
    }
    _tile_release();
}
