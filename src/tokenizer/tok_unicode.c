/* tokenizer/tok_unicode.c — UTF-8 decoding with WHATWG error handling, and NFC.
 *
 * NFC follows UAX #15: full canonical decomposition (Hangul algorithmically),
 * canonical ordering of combining marks by class, then canonical composition of
 * primary composites. Tables come from tok_unicode_data.h (generated).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_unicode_data.h"

int tok_utf8_next(const uint8_t *s, size_t n, uint32_t *cp, int *bad)
{
    uint8_t c = s[0];
    *bad = 1;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int need;
    uint32_t v;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n) {
            *bad = i;
            return 0;
        }
        uint8_t b = s[i];
        uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) {
            *bad = i;
            return 0;
        }
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return need + 1;
}

int tok_utf8_put(uint32_t cp, char *out)
{
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

enum nb_status tok_utf8_sanitize(const char *s, size_t n, char **out, size_t *out_len)
{
    /* Each invalid byte becomes at most 3 bytes. */
    if (n > (SIZE_MAX - 1) / 3) return nb_set_error(NB_ERR_NOMEM, "tokenize: text too long");
    char *o = malloc(n * 3 + 1);
    if (!o) return nb_set_error(NB_ERR_NOMEM, "tokenize: out of memory");
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, k = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            o[k++] = (char)u[i++];
            continue;
        }
        uint32_t cp;
        int bad, l = tok_utf8_next(u + i, n - i, &cp, &bad);
        if (l) {
            memcpy(o + k, u + i, (size_t)l);
            k += (size_t)l;
            i += (size_t)l;
        } else {
            k += (size_t)tok_utf8_put(0xFFFD, o + k);
            i += (size_t)bad;
        }
    }
    o[k] = '\0';
    *out = o;
    *out_len = k;
    return NB_OK;
}

/* ---------------------------------------------------------------- NFC */

#define SBASE  0xAC00u
#define LBASE  0x1100u
#define VBASE  0x1161u
#define TBASE  0x11A7u
#define LCOUNT 19u
#define VCOUNT 21u
#define TCOUNT 28u
#define NCOUNT (VCOUNT * TCOUNT)
#define SCOUNT (LCOUNT * NCOUNT)

static int ccc_of(uint32_t cp)
{
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = sizeof k_ccc / sizeof k_ccc[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < k_ccc[mid][0]) {
            hi = mid;
        } else if (cp > k_ccc[mid][1]) {
            lo = mid + 1;
        } else {
            return (int)k_ccc[mid][2];
        }
    }
    return 0;
}

/* Full canonical decomposition of cp into out (at most 4 + Hangul 3); returns count. */
static int decompose(uint32_t cp, uint32_t *out)
{
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t si = cp - SBASE;
        out[0] = LBASE + si / NCOUNT;
        out[1] = VBASE + (si % NCOUNT) / TCOUNT;
        if (si % TCOUNT) {
            out[2] = TBASE + si % TCOUNT;
            return 3;
        }
        return 2;
    }
    if (cp >= 0xC0) {
        size_t lo = 0, hi = sizeof k_decomp / sizeof k_decomp[0];
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cp < k_decomp[mid][0]) {
                hi = mid;
            } else if (cp > k_decomp[mid][0]) {
                lo = mid + 1;
            } else {
                uint32_t n = k_decomp[mid][2];
                if (n > 4) n = 4;
                memcpy(out, k_decomp_pool + k_decomp[mid][1], n * sizeof *out);
                return (int)n;
            }
        }
    }
    out[0] = cp;
    return 1;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    if (b < TOK_COMP_MIN_SECOND) return 0;
    size_t lo = 0, hi = sizeof k_comp / sizeof k_comp[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *e = k_comp[mid];
        if (a < e[0] || (a == e[0] && b < e[1])) {
            hi = mid;
        } else if (a > e[0] || b > e[1]) {
            lo = mid + 1;
        } else {
            return e[2];
        }
    }
    return 0;
}

enum nb_status tok_nfc(const char *s, size_t n, char **out, size_t *out_len)
{
    enum nb_status st = NB_OK;
    uint32_t *cps = NULL;
    char *o = NULL;
    const uint8_t *u = (const uint8_t *)s;
    *out = NULL;
    /* Fast path: nothing at or above U+0300 means the text is already NFC. */
    size_t i = 0;
    for (; i < n; i++)
        if (u[i] >= 0xCC) break;
    if (i == n) {
        o = malloc(n + 1);
        if (!o) return nb_set_error(NB_ERR_NOMEM, "NFC: out of memory");
        memcpy(o, s, n);
        o[n] = '\0';
        *out = o;
        *out_len = n;
        return NB_OK;
    }
    /* Decompose. Every code point takes at least one byte and expands to at most 4. */
    if (n > SIZE_MAX / (4 * sizeof *cps)) return nb_set_error(NB_ERR_NOMEM, "NFC: too long");
    cps = malloc((n * 4 + 1) * sizeof *cps);
    o = malloc(n * 4 + 1);
    if (!cps || !o) {
        st = nb_set_error(NB_ERR_NOMEM, "NFC: out of memory");
        goto fail;
    }
    size_t m = 0;
    for (i = 0; i < n;) {
        uint32_t cp;
        int bad, l = tok_utf8_next(u + i, n - i, &cp, &bad);
        if (!l) {
            cp = 0xFFFD;
            l = bad;
        }
        i += (size_t)l;
        m += (size_t)decompose(cp, cps + m);
    }
    /* Canonical ordering: stable insertion sort of each run of non-starters. */
    for (size_t k = 1; k < m; k++) {
        int c = ccc_of(cps[k]);
        if (!c) continue;
        size_t j = k;
        uint32_t v = cps[k];
        while (j > 0 && ccc_of(cps[j - 1]) > c) {
            cps[j] = cps[j - 1];
            j--;
        }
        cps[j] = v;
    }
    /* Compose. */
    size_t w = 0, starter = (size_t)-1;
    int last_ccc = -1;
    for (size_t k = 0; k < m; k++) {
        uint32_t c = cps[k];
        int cc = ccc_of(c);
        if (starter != (size_t)-1) {
            int blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= cc);
            /* last_ccc == -1: c directly follows the starter */
            if (!blocked) {
                uint32_t p = compose(cps[starter], c);
                if (p) {
                    cps[starter] = p;
                    continue;
                }
            }
        }
        if (cc == 0) {
            starter = w;
            last_ccc = -1;
        } else {
            last_ccc = cc;
        }
        cps[w++] = c;
    }
    size_t k2 = 0;
    for (size_t k = 0; k < w; k++)
        k2 += (size_t)tok_utf8_put(cps[k], o + k2);
    o[k2] = '\0';
    free(cps);
    *out = o;
    *out_len = k2;
    return NB_OK;
fail:
    free(cps);
    free(o);
    return st;
}
