/*
 * attention_avx2.c: attention's AVX2 + FMA paths (QK, softmax, PV), taken
 * when kern_isa_now() is KERN_AVX2.  K and V rows are bf16, widened to f32
 * eight at a time (vpmovzxwd + vpslld); sums are f32 FMAs.
 *
 *   QK: token by token, each kv head's row is widened once per pass over up
 *       to 8 heads of its group, whose dot products accumulate in 8
 *       registers (q is f32, read from L1) and reduce through hadd trees;
 *       the row two tokens on is prefetched.
 *   PV: a block of A2_TB tokens at a time (their rows' piece for one kv head
 *       stays in L1): per slab of 16 dims, up to 6 heads accumulate in 12
 *       registers over the block's tokens, in token order as the portable
 *       loop adds; the next block's pieces are prefetched into L2.
 *   softmax: the portable arithmetic lane for lane (16 lanes as two
 *       vectors, exp in the same operations), so the same bits.
 *
 * QK and PV sum in another order (and with fused multiply-adds) than the
 * portable loops: tests hold both to the same stated bound.
 */
#include <math.h>

#include "paths.h"

#if KERN_HAVE_X86
#define A2_INLINE  __attribute__((always_inline)) static inline
#define A2_QK_MAXH 8  /* heads per QK pass: 8 accumulators */
#define A2_PV_MAXH 6  /* heads per PV pass: 12 accumulators, 2 V vectors, 1 weight */
#define A2_TB      16 /* PV's tokens per block */
#define A2_AHEAD   2  /* QK prefetches the row this many tokens on */

/* Token t's row (kv head 0). */
A2_INLINE const uint16_t *token_row(const chunk_blocks *cb, size_t t)
{
    const hg_kview *b = &cb->blocks[t / cb->block_size];
    return (const uint16_t *)b->data + (t % cb->block_size) * b->strides[0];
}

/* Calls `call(n)` with the constant n = nh (1..max), so that each instance
 * keeps its sums in registers. */
#define A2_BY_NH(nh, call)                                                                         \
    switch (nh) {                                                                                  \
    case 1:                                                                                        \
        call(1);                                                                                   \
        break;                                                                                     \
    case 2:                                                                                        \
        call(2);                                                                                   \
        break;                                                                                     \
    case 3:                                                                                        \
        call(3);                                                                                   \
        break;                                                                                     \
    case 4:                                                                                        \
        call(4);                                                                                   \
        break;                                                                                     \
    case 5:                                                                                        \
        call(5);                                                                                   \
        break;                                                                                     \
    case 6:                                                                                        \
        call(6);                                                                                   \
        break;                                                                                     \
    case 7:                                                                                        \
        call(7);                                                                                   \
        break;                                                                                     \
    default:                                                                                       \
        call(8);                                                                                   \
        break;                                                                                     \
    }

/* ------------------------------------------------------------------- QK */

/* scores[h][t] for the nh heads from h0 against k (token t, their kv
 * head). */
KERN_AVX2_TARGET A2_INLINE void qk_heads(const chunk_job *j, const uint16_t *k, size_t t, size_t h0,
                                         int nh)
{
    size_t d = j->cb->d;
    const float *q = j->q + h0 * d;
    __m256 acc[A2_QK_MAXH];
#pragma GCC unroll 8
    for (int h = 0; h < A2_QK_MAXH; h++)
        acc[h] = _mm256_setzero_ps();
    for (size_t c = 0; c < d; c += 8) {
        __m256 kv = kern_widen8(k + c);
#pragma GCC unroll 8
        for (int h = 0; h < nh; h++)
            acc[h] = _mm256_fmadd_ps(_mm256_load_ps(q + (size_t)h * d + c), kv, acc[h]);
    }
    float s[A2_QK_MAXH] __attribute__((aligned(16)));
#pragma GCC unroll 2
    for (int h = 0; h < nh; h += 4)
        _mm_store_ps(s + h, kern_hsum4(acc[h], acc[h + 1], acc[h + 2], acc[h + 3]));
#pragma GCC unroll 8
    for (int h = 0; h < nh; h++)
        j->scores[(h0 + (size_t)h) * j->ctok + t] = j->scale * s[h];
}

#define A2_QK(n) qk_heads(j, k, t, h0, n)

KERN_AVX2_TARGET bool kern_attn_qk_avx2(const chunk_job *j)
{
    const chunk_blocks *cb = j->cb;
    size_t d = cb->d, row_bytes = cb->kv_heads * d * 2;
    if (d % 8 != 0)
        return false;
    for (size_t t = 0; t < j->tokens; t++) {
        const uint16_t *row = token_row(cb, t);
        if (t + A2_AHEAD < j->tokens) {
            const char *ahead = (const char *)token_row(cb, t + A2_AHEAD);
            for (size_t c = 0; c < row_bytes; c += 64)
                _mm_prefetch(ahead + c, _MM_HINT_T0);
        }
        for (size_t g = 0; g < cb->kv_heads; g++) {
            const uint16_t *k = row + g * d;
            for (size_t h0 = g * j->group; h0 < (g + 1) * j->group; h0 += A2_QK_MAXH) {
                size_t left = (g + 1) * j->group - h0;
                int nh = (int)(left < A2_QK_MAXH ? left : A2_QK_MAXH);
                A2_BY_NH(nh, A2_QK)
            }
        }
    }
    return true;
}

/* ------------------------------------------------------------------- PV */

/* part[h][c0, c0 + 8 ns) += the block's tokens' p[h][t] V[t] for the nh
 * heads from h0 (kv head g), in token order. */
KERN_AVX2_TARGET A2_INLINE void pv_slab(const chunk_job *j, const uint16_t *const *rows, size_t t0,
                                        size_t nt, size_t g, size_t h0, int nh, size_t c0, int ns)
{
    size_t ctok = j->ctok, d = j->cb->d;
    float *part = j->part + h0 * d + c0;
    __m256 acc[A2_PV_MAXH][2];
#pragma GCC unroll 6
    for (int h = 0; h < nh; h++) {
#pragma GCC unroll 2
        for (int s = 0; s < ns; s++)
            acc[h][s] = _mm256_loadu_ps(part + (size_t)h * d + 8 * (size_t)s);
    }
    const float *p = j->scores + h0 * ctok + t0;
    for (size_t i = 0; i < nt; i++) {
        const uint16_t *v = rows[i] + g * d + c0;
        __m256 vv[2];
#pragma GCC unroll 2
        for (int s = 0; s < ns; s++)
            vv[s] = kern_widen8(v + 8 * s);
#pragma GCC unroll 6
        for (int h = 0; h < nh; h++) {
            __m256 w = _mm256_broadcast_ss(p + (size_t)h * ctok + i);
#pragma GCC unroll 2
            for (int s = 0; s < ns; s++)
                acc[h][s] = _mm256_fmadd_ps(w, vv[s], acc[h][s]);
        }
    }
#pragma GCC unroll 6
    for (int h = 0; h < nh; h++) {
#pragma GCC unroll 2
        for (int s = 0; s < ns; s++)
            _mm256_storeu_ps(part + (size_t)h * d + 8 * (size_t)s, acc[h][s]);
    }
}

/* Every slab of the nh heads from h0: 16 dims while they last, then 8. */
KERN_AVX2_TARGET A2_INLINE void pv_heads(const chunk_job *j, const uint16_t *const *rows, size_t t0,
                                         size_t nt, size_t g, size_t h0, int nh)
{
    size_t c0 = 0, d = j->cb->d;
    for (; c0 + 16 <= d; c0 += 16)
        pv_slab(j, rows, t0, nt, g, h0, nh, c0, 2);
    if (c0 < d)
        pv_slab(j, rows, t0, nt, g, h0, nh, c0, 1);
}

#define A2_PV(n) pv_heads(j, rows, t0, nt, g, h0, (n) < A2_PV_MAXH ? (n) : A2_PV_MAXH)

KERN_AVX2_TARGET bool kern_attn_pv_avx2(const chunk_job *j)
{
    const chunk_blocks *cb = j->cb;
    size_t d = cb->d;
    if (d % 8 != 0)
        return false;
    const uint16_t *rows[A2_TB];
    for (size_t t0 = 0; t0 < j->tokens; t0 += A2_TB) {
        size_t nt = j->tokens - t0 < A2_TB ? j->tokens - t0 : A2_TB;
        size_t t1 = t0 + nt, next = j->tokens - t1 < A2_TB ? j->tokens - t1 : A2_TB;
        for (size_t i = 0; i < nt; i++)
            rows[i] = token_row(cb, t0 + i);
        for (size_t g = 0; g < cb->kv_heads; g++) {
            for (size_t i = 0; i < next; i++) { /* the next block's piece for this kv head */
                const char *ahead = (const char *)(token_row(cb, t1 + i) + g * d);
                for (size_t c = 0; c < 2 * d; c += 64)
                    _mm_prefetch(ahead + c, _MM_HINT_T1);
            }
            for (size_t h0 = g * j->group; h0 < (g + 1) * j->group; h0 += A2_PV_MAXH) {
                size_t left = (g + 1) * j->group - h0;
                int nh = (int)(left < A2_PV_MAXH ? left : A2_PV_MAXH);
                A2_BY_NH(nh, A2_PV)
            }
        }
    }
    return true;
}

/* -------------------------------------------------------------- softmax */

/* attention.c's exp_nonpositive on 8 lanes, the same operations in the same
 * order (the build contracts no a * b + c), so the same bits. */
KERN_AVX2_TARGET A2_INLINE __m256 exp8_nonpositive(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256i n = _mm256_cvttps_epi32(
        _mm256_sub_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _mm256_set1_ps(0.5f)));
    __m256 nf = _mm256_cvtepi32_ps(n);
    __m256 r = _mm256_add_ps(_mm256_sub_ps(x, _mm256_mul_ps(nf, _mm256_set1_ps(0.693359375f))),
                             _mm256_mul_ps(nf, _mm256_set1_ps(2.12194440e-4f)));
    __m256 p = _mm256_add_ps(_mm256_set1_ps(1.0f / 120), _mm256_div_ps(r, _mm256_set1_ps(720.0f)));
    p = _mm256_add_ps(_mm256_set1_ps(1.0f / 24), _mm256_mul_ps(r, p));
    p = _mm256_add_ps(_mm256_set1_ps(1.0f / 6), _mm256_mul_ps(r, p));
    p = _mm256_add_ps(_mm256_set1_ps(0.5f), _mm256_mul_ps(r, p));
    p = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(r, p));
    p = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(r, p));
    __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2));
}

/* softmax_row's results bit for bit: the max is exact in any order (a NaN
 * score is skipped, as softmax_row's compare skips it), exp8 is
 * exp_nonpositive lane by lane, and the sum adds in softmax_row's order (16
 * lanes over whole groups of 16, the lanes in turn, then the tail). */
KERN_AVX2_TARGET void kern_attn_softmax_avx2(float *row, size_t n, float *m, float *l)
{
    size_t full = n / 16 * 16;
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    for (size_t t = 0; t < full; t += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(row + t), m0); /* NaN: keeps m0 */
        m1 = _mm256_max_ps(_mm256_loadu_ps(row + t + 8), m1);
    }
    float lane[16], mx = -INFINITY;
    _mm256_storeu_ps(lane, m0);
    _mm256_storeu_ps(lane + 8, m1);
    for (int k = 0; k < 16; k++)
        mx = lane[k] > mx ? lane[k] : mx;
    for (size_t t = full; t < n; t++)
        mx = row[t] > mx ? row[t] : mx;
    __m256 vmx = _mm256_set1_ps(mx), s0 = _mm256_setzero_ps(), s1 = s0;
    for (size_t t = 0; t < full; t += 16) {
        __m256 e0 = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(row + t), vmx));
        __m256 e1 = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(row + t + 8), vmx));
        _mm256_storeu_ps(row + t, e0);
        _mm256_storeu_ps(row + t + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    float tail[16] = {0};
    for (size_t t = full; t < n; t++)
        tail[t - full] = row[t];
    for (int h = 0; h < 16; h += 8)
        _mm256_storeu_ps(tail + h, exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(tail + h), vmx)));
    for (size_t t = full; t < n; t++)
        row[t] = tail[t - full];
    float sum = 0.0f;
    _mm256_storeu_ps(lane, s0);
    _mm256_storeu_ps(lane + 8, s1);
    for (int k = 0; k < 16; k++)
        sum += lane[k];
    for (size_t t = full; t < n; t++)
        sum += row[t];
    *m = mx;
    *l = sum;
}
#endif
