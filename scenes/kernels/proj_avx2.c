/*
 * proj_avx2.c: the bf16 projection's AVX2 + FMA path (kern_proj takes it
 * when kern_isa_now() is KERN_AVX2).
 *
 * Without vdpbf16ps each weight is widened to f32 (a bf16 is an f32's top
 * half: vpunpck{l,h}wd with zero) and multiplied in f32 FMAs: 16 rows cost 16
 * multiply-adds per weight, two 8-lane FMAs per cycle make ~2 weight bytes
 * per cycle per core, so this path is bound by the FMA pipes, not memory.
 * Its shape serves that:
 *
 *   - x (16 rows, rounded to bf16 and widened back: exactly what the other
 *     paths multiply) is f32 in blocks of P2_KBLOCK columns, 16 KiB, in L1,
 *     each 16 columns in the order the widening leaves the weights (P2_POS);
 *   - weight rows go 3 at a time and x rows 4 at a time: 12 ymm
 *     accumulators, 3 weight vectors and one x vector fill the 16
 *     registers; a step of 8 columns is 12 FMAs, and 4 such passes cover
 *     the 16 rows;
 *   - the first pass widens the group's block as it goes (each step widens
 *     its 3 weight vectors in registers and stores them to 3 KiB of f32
 *     scratch, in L1), the other 3 read the scratch (3 + 4 loads per 12
 *     FMAs).  Widening in a phase of its own before the passes left the FMA
 *     pipes idle while it ran: with it inside the first pass, where the
 *     out-of-order core overlaps it with FMAs, one thread went from 0.73 to
 *     0.78 of the FMA ceiling on host X with the weights in cache (Intel,
 *     2026-12-03), and the 2-thread benchmark from 0.66-0.72 to 0.69-0.77;
 *   - the widening is one vpunpcklwd or vpunpckhwd of 16 weights with a
 *     zero register, a shuffle, where vpmovzxwd + vpslld spent a shift on
 *     the FMA ports (0.75 of the FMA ceiling in a first-pass loop alone on
 *     host X against 0.81 for the unpack); the zero is made anew (vpxor, a
 *     zero idiom, no port) before each 3 widenings, in the register x takes
 *     after them, so 12 accumulators, 3 weights and x still fit 16;
 *   - the first pass also prefetches the group 4 ahead into L2, a line of
 *     each row per 32 columns (rows are read in pieces ldw apart;
 *     P2_PFAHEAD says why 4);
 *   - a pass's 12 sums go through hadd trees (4 vectors -> 4 sums) into
 *     acc[row][16], which goes to y once per chunk.
 *
 * The sums are f32 FMAs in another order than the portable path's: tests
 * compare both with a double reference, within the same stated bound.
 */
#include <string.h>

#include "paths.h"

#if KERN_HAVE_X86
#define P2_INLINE  __attribute__((always_inline)) static inline
#define P2_ROWS    16
#define P2_KBLOCK  256              /* 16 rows x 256 f32 = 16 KiB */
#define P2_XSTRIDE (P2_KBLOCK + 16) /* floats: rows not 1 KiB apart (L1 sets) */
#define P2_WROWS   3
#define P2_XR      4 /* x rows per pass */
/* Groups between the one computed and the one prefetched, into L2: a
 * group's rows are 3 pieces of 512 bytes 10-35 KiB apart, which the
 * hardware prefetchers do not follow, and from DRAM (a weight matrix does
 * not stay in cache between decode steps) 2 groups ahead into L1 left the
 * FMAs waiting: 0.60 of the FMA ceiling on host X (Intel, 2026-12-02)
 * against 0.72 at 4 into L2, 0.35 with no prefetch.  Past the block's last
 * group the next block's first groups are prefetched. */
#define P2_PFAHEAD 4
#define P2_CHUNK   512
/* Where column c of a 16-column piece sits in x and in the scratch: the
 * unpacks leave a piece's columns 0-3 and 8-11 in one vector (lanes 0-7),
 * 4-7 and 12-15 in the other (lanes 8-15). */
#define P2_POS(c) ((c) < 4 ? (c) : (c) < 8 ? (c) + 4 : (c) < 12 ? (c)-4 : (c))

typedef struct p2_block {
    const float *xf; /* [P2_ROWS][P2_XSTRIDE], zero past kb and nrows */
    size_t nrows, kb;
    const uint16_t *w;
    size_t n, ldw;
    const uint16_t *wnext; /* the next block's weights (NULL: none): prefetched */
    float *acc;            /* [n][P2_ROWS] */
} p2_block;

/* The part of the group's rows past the block's last multiple of 16
 * columns, widened into wf in P2_POS order (zero up to the next multiple
 * of 16): w is not read past kb. */
KERN_AVX2_TARGET P2_INLINE void widen_tail(const p2_block *b, const uint16_t *const *wr, float *wf)
{
    size_t kk = b->kb / 16 * 16, len = b->kb - kk;
    for (int i = 0; i < P2_WROWS; i++) {
        uint16_t tail[16] = {0};
        memcpy(tail, wr[i] + kk, len * sizeof(uint16_t));
        for (int c = 0; c < 16; c++)
            wf[(size_t)i * P2_KBLOCK + kk + P2_POS(c)] = kern_bf16_to_f32(tail[c]);
    }
}

/* a[i][r] += wv[i] * x row r, columns [kk, kk + 8). */
KERN_AVX2_TARGET P2_INLINE void p2_fma(__m256 a[P2_WROWS][P2_XR], const __m256 *wv, const float *x0,
                                       size_t kk)
{
#pragma GCC unroll 4
    for (int r = 0; r < P2_XR; r++) {
        __m256 xv = _mm256_load_ps(x0 + (size_t)r * P2_XSTRIDE + kk);
#pragma GCC unroll 3
        for (int i = 0; i < P2_WROWS; i++)
            a[i][r] = _mm256_fmadd_ps(wv[i], xv, a[i][r]);
    }
}

/* wv[i] = the group's row i, widened: of the 16 columns at s, the low
 * vector's 8 (hi 0: columns 0-3 and 8-11) or the high one's; kept in wf at
 * s + 8 hi for the later passes. */
KERN_AVX2_TARGET P2_INLINE void p2_widen(const uint16_t *const *wr, float *wf, size_t s, int hi,
                                         __m256 *wv)
{
    __m256i z;
    /* volatile: a zero of its own each time (see the top of the file) */
    __asm__ volatile("vpxor %x0, %x0, %x0" : "=x"(z));
#pragma GCC unroll 3
    for (int i = 0; i < P2_WROWS; i++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(wr[i] + s));
        wv[i] = _mm256_castsi256_ps(hi ? _mm256_unpackhi_epi16(z, v) : _mm256_unpacklo_epi16(z, v));
        _mm256_store_ps(wf + (size_t)i * P2_KBLOCK + s + 8 * (size_t)hi, wv[i]);
    }
}

/* The 16 columns at s, widened and multiplied. */
KERN_AVX2_TARGET P2_INLINE void p2_widen_fma(__m256 a[P2_WROWS][P2_XR], const uint16_t *const *wr,
                                             float *wf, const float *x0, size_t s)
{
    __m256 wv[P2_WROWS];
    p2_widen(wr, wf, s, 0, wv);
    p2_fma(a, wv, x0, s);
    p2_widen(wr, wf, s, 1, wv);
    p2_fma(a, wv, x0, s + 8);
}

/* acc[j + i][4p .. 4p + 4) += x rows 4p.. . the group's weight rows, over
 * the block (x is zero past kb, and so is wf up to a multiple of 16).  Pass 0
 * (wr set) widens the rows in registers as it goes and keeps them in wf for
 * the other passes, prefetching the group at `ahead` a line of each row per
 * 32 columns; the others read wf. */
KERN_AVX2_TARGET P2_INLINE void p2_pass(const p2_block *b, float *wf, size_t j, int p,
                                        const uint16_t *const *wr, const char *ahead)
{
    __m256 a[P2_WROWS][P2_XR], wv[P2_WROWS];
#pragma GCC unroll 3
    for (int i = 0; i < P2_WROWS; i++) {
#pragma GCC unroll 4
        for (int r = 0; r < P2_XR; r++)
            a[i][r] = _mm256_setzero_ps();
    }
    const float *x0 = b->xf + (size_t)(P2_XR * p) * P2_XSTRIDE;
    size_t kk = 0;
    if (wr != NULL) {
        /* no group ahead: the prefetches touch this group's first row */
        size_t kfull = b->kb / 16 * 16, ld2 = ahead != NULL ? b->ldw * 2 : 0;
        if (ahead == NULL)
            ahead = (const char *)wr[0];
        for (; kk + 32 <= kfull; kk += 32) {
#pragma GCC unroll 3
            for (int i = 0; i < P2_WROWS; i++)
                _mm_prefetch(ahead + (size_t)i * ld2 + 2 * kk, _MM_HINT_T1);
            p2_widen_fma(a, wr, wf, x0, kk);
            p2_widen_fma(a, wr, wf, x0, kk + 16);
        }
        if (kk < kfull) {
            p2_widen_fma(a, wr, wf, x0, kk);
            kk += 16;
        }
    }
    size_t kend = (b->kb + 15) / 16 * 16;
#pragma GCC unroll 4
    for (; kk < kend; kk += 8) {
#pragma GCC unroll 3
        for (int i = 0; i < P2_WROWS; i++)
            wv[i] = _mm256_load_ps(wf + (size_t)i * P2_KBLOCK + kk);
        p2_fma(a, wv, x0, kk);
    }
#pragma GCC unroll 3
    for (int i = 0; i < P2_WROWS; i++) {
        if (j + (size_t)i >= b->n)
            break;
        float *dst = b->acc + (j + (size_t)i) * P2_ROWS + P2_XR * (size_t)p;
        _mm_storeu_ps(
            dst, _mm_add_ps(_mm_loadu_ps(dst), kern_hsum4(a[i][0], a[i][1], a[i][2], a[i][3])));
    }
}

KERN_AVX2_TARGET static void p2_block_run(const p2_block *b)
{
    float wf[P2_WROWS * P2_KBLOCK] __attribute__((aligned(32)));
    int passes = (int)((b->nrows + P2_XR - 1) / P2_XR); /* passes of padding rows only: skipped */
    for (size_t j = 0; j < b->n; j += P2_WROWS) {
        const uint16_t *wr[P2_WROWS];
        for (int i = 0; i < P2_WROWS; i++) /* rows past n repeat row j; their sums are dropped */
            wr[i] = b->w + (j + (size_t)i < b->n ? j + (size_t)i : j) * b->ldw;
        size_t groups = (b->n + P2_WROWS - 1) / P2_WROWS, next = j / P2_WROWS + P2_PFAHEAD;
        const uint16_t *ahead = next < groups      ? b->w + next * P2_WROWS * b->ldw
                                : b->wnext != NULL ? b->wnext + (next - groups) * P2_WROWS * b->ldw
                                                   : NULL;
        if (b->kb % 16 != 0)
            widen_tail(b, wr, wf);
        p2_pass(b, wf, j, 0, wr, (const char *)ahead);
        for (int p = 1; p < passes; p++)
            p2_pass(b, wf, j, p, NULL, NULL);
    }
}

/* f32 rounded to bf16 (nearest even, NaN stays a quiet NaN) and widened
 * back, 8 lanes: kern_f32_to_bf16's arithmetic. */
KERN_AVX2_TARGET P2_INLINE __m256 round_bf16(__m256 v)
{
    __m256i u = _mm256_castps_si256(v), top = _mm256_set1_epi32((int)0xffff0000u);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_or_si256(_mm256_and_si256(u, top), _mm256_set1_epi32(0x400000));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_and_si256(r, top), quiet, nan));
}

KERN_AVX2_TARGET static void round_row(const float *src, size_t n, float *dst)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, round_bf16(_mm256_loadu_ps(src + i)));
    for (; i < n; i++)
        dst[i] = kern_bf16_to_f32(kern_f32_to_bf16(src[i]));
}

/* Each 16 columns of an xf row into P2_POS order: columns 4-7 and 8-11
 * change places. */
KERN_AVX2_TARGET static void order_row(float *row, size_t kpad)
{
    for (size_t c = 0; c < kpad; c += 16) {
        __m256 lo = _mm256_load_ps(row + c), hi = _mm256_load_ps(row + c + 8);
        _mm256_store_ps(row + c, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_store_ps(row + c + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

/* x rows [r0, r0 + nrows), columns [k0, k0 + kb), rounded, into xf (zero
 * padded to P2_ROWS rows and to a multiple of 16 columns, in P2_POS
 * order). */
KERN_AVX2_TARGET static void load_xf(const kern_mat *x, size_t r0, size_t nrows, size_t k0,
                                     size_t kb, float *xf)
{
    size_t kpad = (kb + 15) / 16 * 16;
    memset(xf + nrows * P2_XSTRIDE, 0, (P2_ROWS - nrows) * P2_XSTRIDE * sizeof(float));
    for (size_t r = 0; r < nrows; r++) {
        float *dst = xf + r * P2_XSTRIDE;
        memset(dst + kb, 0, (kpad - kb) * sizeof(float));
        if (x->dtype != HG_F32 || x->s_col != 1) {
            kern_mat_get_span(x, r0 + r, k0, kb, dst);
            round_row(dst, kb, dst);
        } else {
            for (size_t i = 0; i < kb;) { /* one tile's piece of the row at a time */
                size_t c = k0 + i, off = c % x->tcols;
                size_t len = kb - i < x->tcols - off ? kb - i : x->tcols - off;
                round_row((const float *)x->data + (c / x->tcols) * x->s_tile +
                              (r0 + r) * x->s_row + off,
                          len, dst + i);
                i += len;
            }
        }
        order_row(dst, kpad);
    }
}

KERN_AVX2_TARGET void kern_proj_chunk_avx2(const kern_mat *x, size_t r0, size_t nrows,
                                           const uint16_t *w, size_t n, size_t k, size_t ldw,
                                           float *y, size_t ldy)
{
    float xf[P2_ROWS * P2_XSTRIDE] __attribute__((aligned(32)));
    float acc[P2_CHUNK * P2_ROWS] __attribute__((aligned(32)));
    memset(acc, 0, n * P2_ROWS * sizeof(float));
    for (size_t k0 = 0; k0 < k; k0 += P2_KBLOCK) {
        size_t kb = k - k0 < P2_KBLOCK ? k - k0 : P2_KBLOCK;
        load_xf(x, r0, nrows, k0, kb, xf);
        p2_block b = {xf, nrows, kb, w + k0, n, ldw, k0 + kb < k ? w + k0 + kb : NULL, acc};
        p2_block_run(&b);
    }
    for (size_t r = 0; r < nrows; r++) {
        for (size_t j = 0; j < n; j++)
            y[r * ldy + j] = acc[j * P2_ROWS + r];
    }
}
#endif
