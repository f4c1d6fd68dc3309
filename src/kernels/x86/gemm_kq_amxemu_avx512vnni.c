/* kernels/x86/gemm_kq_amxemu_avx512vnni.c — gemm_kq_amx.inc, gemm_w4a8_amx.inc,
 * gemm_w4a16_amx.inc and attn_amx.inc on an emulated tile register file (8 tiles of 16
 * rows x 64 bytes in thread-local memory; each tile instruction as its definition: tdpbsud
 * C[m][n] += sum over k of int8 A[m][4k+j] x u8 B[k][4n+j], int32 wrapping; tdpbf16ps
 * C[m][n] += A[m][2k] B[k][2n] + A[m][2k+1] B[k][2n+1] in f32, k in order), so the AMX
 * kernels' code is tested against the _ref twins on any AVX-512 VNNI CPU (test_kernels_x86
 * test_kq_x16, test_w4a8_x16_amx, test_w4a16_x16_amx; test_kernels_vec test_attn_tile).
 * Not in any kernel table: a test and lab twin only. */
#include <stdint.h>
#include <string.h>

#include "core/fp.h"
#include "kernels/kernels.h"

static _Thread_local struct {
    int rows[8], colsb[8];
    _Alignas(64) uint8_t t[8][1024];
} g_tiles;

/* The shapes of nb_amx_config: C 0..3 m x 64 B, A 4, 5 m x K B, B 6, 7 K/4 x 64 B. */
static void e_config(int k, int m)
{
    for (int i = 0; i < 8; i++) {
        g_tiles.rows[i] = i >= 6 ? k / 4 : m;
        g_tiles.colsb[i] = i == 4 || i == 5 ? k : 64;
    }
}

static void e_zero(int i)
{
    memset(g_tiles.t[i], 0, sizeof g_tiles.t[i]);
}

static void e_load(int i, const void *p, int64_t stride)
{
    for (int r = 0; r < g_tiles.rows[i]; r++)
        memcpy(g_tiles.t[i] + 64 * r, (const uint8_t *)p + r * stride, (size_t)g_tiles.colsb[i]);
}

static void e_store(int i, void *p, int64_t stride)
{
    for (int r = 0; r < g_tiles.rows[i]; r++)
        memcpy((uint8_t *)p + r * stride, g_tiles.t[i] + 64 * r, (size_t)g_tiles.colsb[i]);
}

/* C += A (signed) x B (signed when sb, else unsigned), dword sums wrapping as tdpbsud and
 * tdpbssd do */
static void e_dpbs(int c, int a, int b, int sb)
{
    for (int m = 0; m < g_tiles.rows[a]; m++)
        for (int n = 0; n < g_tiles.colsb[c] / 4; n++) {
            uint32_t acc;
            memcpy(&acc, g_tiles.t[c] + 64 * m + 4 * n, 4);
            for (int k = 0; k < g_tiles.colsb[a] / 4; k++)
                for (int j = 0; j < 4; j++)
                    acc += (uint32_t)((int32_t)(int8_t)g_tiles.t[a][64 * m + 4 * k + j] *
                                      (sb ? (int32_t)(int8_t)g_tiles.t[b][64 * k + 4 * n + j]
                                          : (int32_t)g_tiles.t[b][64 * k + 4 * n + j]));
            memcpy(g_tiles.t[c] + 64 * m + 4 * n, &acc, 4);
        }
}

static float e_bf16(const uint8_t *p)
{
    return nb_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static void e_dpbf16ps(int c, int a, int b)
{
    for (int m = 0; m < g_tiles.rows[a]; m++)
        for (int n = 0; n < g_tiles.colsb[c] / 4; n++) {
            float acc;
            memcpy(&acc, g_tiles.t[c] + 64 * m + 4 * n, 4);
            for (int k = 0; k < g_tiles.colsb[a] / 4; k++) {
                const uint8_t *pa = g_tiles.t[a] + 64 * m + 4 * k;
                const uint8_t *pb = g_tiles.t[b] + 64 * k + 4 * n;
                acc += e_bf16(pa) * e_bf16(pb);
                acc += e_bf16(pa + 2) * e_bf16(pb + 2);
            }
            memcpy(g_tiles.t[c] + 64 * m + 4 * n, &acc, 4);
        }
}

#define KQ_NAME(f)            nb_gemm_##f##_x16_amxemu
#define T_CONFIG(K)           e_config(K, 16)
#define T_CONFIG_ROWS(K, M)   e_config(K, M)
#define T_ZERO(i)             e_zero(i)
#define T_LOAD(i, p, stride)  e_load(i, p, stride)
#define T_STORE(i, p, stride) e_store(i, p, stride)
#define T_DPBSUD(c, a, b)     e_dpbs(c, a, b, 0)
#define T_DPBSSD(c, a, b)     e_dpbs(c, a, b, 1)
#define T_RELEASE()           ((void)0)
#include "kernels/x86/gemm_kq_amx.inc"
#define W4_NAME nb_gemm_w4a8_x16_amxemu
#include "kernels/x86/gemm_w4a8_amx.inc"
#define T_DPBF16PS(c, a, b) e_dpbf16ps(c, a, b)
#define W16_NAME            nb_gemm_w4a16_x16_amxemu
#define W16_REST            nb_gemm_w4a16_x16_avx512 /* any AVX-512 CPU: no bf16 needed */
#include "kernels/x86/gemm_w4a16_amx.inc"
#define ATT_NAME nb_attn_tile_amxemu
#define ATT_REST nb_attn_tile_avx512
#include "kernels/x86/attn_amx.inc"
