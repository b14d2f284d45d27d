/*
 * attention.c: paged attention in four kernels (kernels.h gives the math
 * and the args).  A chunk's scores, probabilities and partial output are
 * f32 in run-owned scratch; the merge applies the online-softmax rescaling
 * e^(m_c - M) to each chunk's sum and partial output.
 *
 * Every kernel checks its views' shapes and returns 1 (failing the run,
 * naming the kernel) when they do not agree, never reading out of bounds.
 */
#include <math.h>
#include <stdlib.h>

#include "paths.h"

#if KERN_HAVE_X86
/* The AVX-512 paths: chosen at run time. */
#define ATTN_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#endif
#define ATTN_INLINE __attribute__((always_inline)) static inline

/* Dot product of n floats in 16 partial sums (vectorizes without
 * reassociation), then the tail. */
ATTN_INLINE float dotf(const float *a, const float *b, size_t n)
{
    float lane[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int l = 0; l < 16; l++)
            lane[l] += a[i + (size_t)l] * b[i + (size_t)l];
    }
    for (int width = 8; width > 0; width /= 2) {
        for (int l = 0; l < width; l++)
            lane[l] += lane[l + width];
    }
    for (; i < n; i++)
        lane[0] += a[i] * b[i];
    return lane[0];
}

static bool blocks_of(const hg_kernel_ctx *ctx, uint32_t first, uint32_t nb, chunk_blocks *cb)
{
    if (nb == 0 || nb > KERN_ATTN_MAX_BLOCKS || first + nb > ctx->nargs)
        return false;
    const hg_kview *b0 = &ctx->args[first];
    *cb = (chunk_blocks){b0, nb, b0->shape[0], b0->shape[1], b0->shape[2]};
    for (uint32_t i = 0; i < nb; i++) {
        const hg_kview *b = &ctx->args[first + i];
        if (b->dtype != HG_BF16 || b->ndims != 3 || b->shape[0] != cb->block_size ||
            b->shape[1] != cb->kv_heads || b->shape[2] != cb->d || b->strides[2] != 1 ||
            b->strides[1] != cb->d || b->strides[0] != cb->kv_heads * cb->d)
            return false;
    }
    return cb->block_size > 0 && cb->kv_heads > 0 && cb->d > 0;
}

/* Token t's row for kv head g, widened to f32. */
ATTN_INLINE void block_row(const chunk_blocks *cb, size_t t, size_t g, float *out)
{
    const hg_kview *b = &cb->blocks[t / cb->block_size];
    const uint16_t *src =
        (const uint16_t *)b->data + (t % cb->block_size) * b->strides[0] + g * cb->d;
    for (size_t i = 0; i < cb->d; i++)
        out[i] = kern_bf16_to_f32(src[i]);
}

/* A dense f32 [rows, cols] view (2-D, or 3-D [1, rows, cols]). */
static float *dense_f32(const hg_kview *v, size_t rows, size_t cols)
{
    uint32_t d = v->ndims;
    if (v->dtype != HG_F32 || d < 2 || d > 3 || (d == 3 && v->shape[0] != 1) ||
        v->shape[d - 2] != rows || v->shape[d - 1] != cols || v->strides[d - 1] != 1 ||
        v->strides[d - 2] != cols)
        return NULL;
    return v->data;
}

/* scores[h][t] = scale * q[h] . K[t][h / group] */
ATTN_INLINE void qk_tokens(const chunk_job *j)
{
    size_t d = j->cb->d;
    for (size_t t = 0; t < j->tokens; t++) {
        for (size_t g = 0; g < j->cb->kv_heads; g++) {
            block_row(j->cb, t, g, j->row);
            for (size_t h = g * j->group; h < (g + 1) * j->group; h++)
                j->scores[h * j->ctok + t] = j->scale * dotf(j->q + h * d, j->row, d);
        }
    }
}

/* part[h] += p[h][t] V[t][h / group] */
ATTN_INLINE void pv_tokens(const chunk_job *j)
{
    size_t d = j->cb->d;
    for (size_t t = 0; t < j->tokens; t++) {
        for (size_t g = 0; g < j->cb->kv_heads; g++) {
            block_row(j->cb, t, g, j->row);
            for (size_t h = g * j->group; h < (g + 1) * j->group; h++) {
                float w = j->scores[h * j->ctok + t];
                float *out = j->part + h * d;
                for (size_t i = 0; i < d; i++)
                    out[i] += w * j->row[i];
            }
        }
    }
}

/* One row of scores in place: p = e^(s - max) over its first n; returns
 * (max, sum) through m and l.  16 partial maxima and sums: vectorizable. */
ATTN_INLINE void softmax_row(float *row, size_t n, float *m, float *l)
{
    float lane[16];
    for (int k = 0; k < 16; k++)
        lane[k] = -INFINITY;
    size_t t = 0;
    for (; t + 16 <= n; t += 16) {
        for (int k = 0; k < 16; k++)
            lane[k] = row[t + (size_t)k] > lane[k] ? row[t + (size_t)k] : lane[k];
    }
    float mx = -INFINITY;
    for (int k = 0; k < 16; k++)
        mx = lane[k] > mx ? lane[k] : mx;
    for (; t < n; t++)
        mx = row[t] > mx ? row[t] : mx;
    for (t = 0; t < n; t++)
        row[t] = kern_exp_nonpositive(row[t] - mx);
    float sum = 0.0f;
    for (int k = 0; k < 16; k++)
        lane[k] = 0.0f;
    for (t = 0; t + 16 <= n; t += 16) {
        for (int k = 0; k < 16; k++)
            lane[k] += row[t + (size_t)k];
    }
    for (int k = 0; k < 16; k++)
        sum += lane[k];
    for (; t < n; t++)
        sum += row[t];
    *m = mx;
    *l = sum;
}

static void qk_portable(const chunk_job *j)
{
    qk_tokens(j);
}

static void pv_portable(const chunk_job *j)
{
    pv_tokens(j);
}

static void softmax_portable(float *row, size_t n, float *m, float *l)
{
    softmax_row(row, n, m, l);
}

#if KERN_HAVE_X86
/*
 * The AVX-512 paths take the chunk's tokens ATTN_TB at a time: their rows
 * (kv_heads * D bf16 each, ATTN_TB * 2 KiB at Qwen3's 8 x 128) stay in L2
 * while passes over them walk one kv head, and a few heads of its group, at
 * a time, keeping the sums in registers:
 *
 *   QK: per 16 tokens, each head's 16 dot products (a vector of partial sums
 *       each) go through one sum tree to 16 scores (one horizontal add per
 *       dot product cost more than the products);
 *   PV: a head's output is D floats, too many registers for a group, so a
 *       pass covers a slab of 32 dims (one cache line of a row), every head
 *       of the pass accumulating in registers, added into part per block.
 *
 * A pass takes up to ATTN_MAXH heads of a group; the head count of a pass is
 * a constant in each instance (the switches below), so that the compiler
 * keeps the accumulators in registers.  While the passes walk one block of
 * tokens they prefetch the next block into L2, each pass the pieces of the
 * next block's rows it reads in this one (without it the passes wait for
 * memory: a pass reads each row in pieces kv_heads * D * 2 bytes apart, a
 * stride the hardware prefetcher follows late); and each pass prefetches
 * the piece it reads ATTN_AHEAD tokens on into L1.
 */
#define ATTN_MAXH  8
#define ATTN_TB    16 /* 32 measured 11-14% slower with the caches in DRAM */
#define ATTN_AHEAD 2

/* Row pointers (kv head 0) of tokens [t0, t0 + n) into rows. */
ATTN_INLINE void rows_at(const chunk_blocks *cb, size_t t0, size_t n, const uint16_t **rows)
{
    size_t b = t0 / cb->block_size, in = t0 % cb->block_size;
    for (size_t i = 0; i < n; i++) {
        rows[i] = (const uint16_t *)cb->blocks[b].data + in * cb->blocks[b].strides[0];
        if (++in == cb->block_size) {
            in = 0;
            b++;
        }
    }
}

/* Prefetches `bytes` of a row from `off` into L2 (row NULL: none). */
ATTN_AVX512 ATTN_INLINE void prefetch_l2(const uint16_t *row, size_t off, size_t bytes)
{
    if (row == NULL)
        return;
    for (size_t c = 0; c < bytes; c += 64)
        _mm_prefetch((const char *)(row + off) + c, _MM_HINT_T1);
}

/* Prefetches row i + ATTN_AHEAD of the block (kv head g, from dim c0,
 * `bytes` of it) into L1, if the block has it. */
ATTN_AVX512 ATTN_INLINE void prefetch_ahead(const uint16_t *const *rows, size_t i, size_t nt,
                                            size_t g, size_t d, size_t c0, size_t bytes)
{
    if (i + ATTN_AHEAD >= nt)
        return;
    const char *row = (const char *)(rows[i + ATTN_AHEAD] + g * d + c0);
    for (size_t c = 0; c < bytes; c += 64)
        _mm_prefetch(row + c, _MM_HINT_T0);
}

/* A block of the chunk's tokens: their rows (kv head 0), QK's scratch for
 * partial sums ([ATTN_MAXH][16] vectors), and the next block's rows: a pass
 * that reads a piece of row i prefetches the same piece of the next
 * block's row i into L2, so the passes over one block fetch all of the
 * next (ATTN_TB entries; NULL past the chunk's tokens). */
typedef struct token_block {
    const uint16_t *const *rows;
    size_t t0, nt;
    __m512 *buf;
    const uint16_t *const *next; /* the next block's rows, NULL past its end */
} token_block;

/* scores[h][t0 + i] for the nh heads from h0 and the block's nt tokens
 * (rows), kv head g: 16 tokens at a time, their dot products' partial sums
 * in buf ([nh][16] vectors). */
ATTN_AVX512 ATTN_INLINE void qk_heads(const chunk_job *j, const token_block *tb, size_t g,
                                      size_t h0, int nh)
{
    const uint16_t *const *rows = tb->rows;
    size_t t0 = tb->t0, nt = tb->nt;
    __m512 *buf = tb->buf;
    size_t d = j->cb->d;
    const float *q = j->q + h0 * d;
    for (size_t s0 = 0; s0 < nt; s0 += 16) {
        size_t ns = nt - s0 < 16 ? nt - s0 : 16;
        for (size_t i = 0; i < 16; i++) {
            __m512 acc[ATTN_MAXH];
#pragma GCC unroll 8
            for (int h = 0; h < nh; h++)
                acc[h] = _mm512_setzero_ps();
            if (i < ns) {
                const uint16_t *k = rows[s0 + i] + g * d;
                prefetch_l2(tb->next[s0 + i], g * d, 2 * d);
                prefetch_ahead(rows, s0 + i, nt, g, d, 0, 2 * d);
                for (size_t c = 0; c < d; c += 16) {
                    __m512 kv = kern_widen16(k + c);
#pragma GCC unroll 8
                    for (int h = 0; h < nh; h++)
                        acc[h] =
                            _mm512_fmadd_ps(_mm512_loadu_ps(q + (size_t)h * d + c), kv, acc[h]);
                }
            }
#pragma GCC unroll 8
            for (int h = 0; h < nh; h++)
                buf[h * 16 + (int)i] = acc[h];
        }
        __m512 scale = _mm512_set1_ps(j->scale);
        __mmask16 keep = (__mmask16)((1u << ns) - 1);
#pragma GCC unroll 8
        for (int h = 0; h < nh; h++)
            _mm512_mask_storeu_ps(j->scores + (h0 + (size_t)h) * j->ctok + t0 + s0, keep,
                                  _mm512_mul_ps(scale, kern_sum16(buf + h * 16)));
    }
}

/* part[h][c0, c0 + 16 ns) += the block's tokens' p[h][t] V[t] for the nh
 * heads from h0 (kv head g), summed in nh x ns registers. */
ATTN_AVX512 ATTN_INLINE void pv_slab(const chunk_job *j, const token_block *tb, size_t g, size_t h0,
                                     int nh, size_t c0, int ns)
{
    const uint16_t *const *rows = tb->rows;
    size_t t0 = tb->t0, nt = tb->nt;
    size_t ctok = j->ctok, d = j->cb->d;
    float *part = j->part + h0 * d + c0;
    __m512 acc[ATTN_MAXH][2];
#pragma GCC unroll 8
    for (int h = 0; h < nh; h++) {
#pragma GCC unroll 2
        for (int s = 0; s < ns; s++)
            acc[h][s] = _mm512_loadu_ps(part + (size_t)h * d + 16 * (size_t)s);
    }
    const float *p = j->scores + h0 * ctok + t0;
    for (size_t i = 0; i < nt; i++) {
        const uint16_t *v = rows[i] + g * d + c0;
        prefetch_l2(tb->next[i], g * d + c0, 32 * (size_t)ns);
        prefetch_ahead(rows, i, nt, g, d, c0, 32 * (size_t)ns);
        __m512 vv[2];
#pragma GCC unroll 2
        for (int s = 0; s < ns; s++)
            vv[s] = kern_widen16(v + 16 * s);
#pragma GCC unroll 8
        for (int h = 0; h < nh; h++) {
            __m512 w = _mm512_set1_ps(p[(size_t)h * ctok + i]);
#pragma GCC unroll 2
            for (int s = 0; s < ns; s++)
                acc[h][s] = _mm512_fmadd_ps(w, vv[s], acc[h][s]);
        }
    }
#pragma GCC unroll 8
    for (int h = 0; h < nh; h++) {
#pragma GCC unroll 2
        for (int s = 0; s < ns; s++)
            _mm512_storeu_ps(part + (size_t)h * d + 16 * (size_t)s, acc[h][s]);
    }
}

/* Every slab of the nh heads from h0: 32 dims while they last, then 16. */
ATTN_AVX512 ATTN_INLINE void pv_heads(const chunk_job *j, const token_block *tb, size_t g,
                                      size_t h0, int nh)
{
    size_t c0 = 0, d = j->cb->d;
    for (; c0 + 32 <= d; c0 += 32)
        pv_slab(j, tb, g, h0, nh, c0, 2);
    if (c0 < d)
        pv_slab(j, tb, g, h0, nh, c0, 1);
}

typedef enum attn_kernel { ATTN_QK, ATTN_PV } attn_kernel;

/* One pass of kernel k over the block: the nh heads from h0 (a constant
 * in every call below, so each instance keeps its sums in registers). */
ATTN_AVX512 ATTN_INLINE void heads_pass(attn_kernel k, const chunk_job *j, const token_block *tb,
                                        size_t g, size_t h0, int nh)
{
    if (k == ATTN_QK)
        qk_heads(j, tb, g, h0, nh);
    else
        pv_heads(j, tb, g, h0, nh);
}

/* QK (scores, in fp32 FMAs: q stays f32) or PV (part, which the task
 * zeroed) over the chunk, a block of ATTN_TB tokens at a time, every kv
 * head's groups of up to ATTN_MAXH heads on each block.  D not a multiple of
 * 16 takes the portable loops. */
ATTN_AVX512 static void attn_avx512(attn_kernel k, const chunk_job *j)
{
    size_t d = j->cb->d;
    if (d % 16 != 0) {
        if (k == ATTN_QK)
            qk_tokens(j);
        else
            pv_tokens(j);
        return;
    }
    __m512 buf[ATTN_MAXH * 16];
    const uint16_t *rows[ATTN_TB], *next_rows[ATTN_TB];
    for (size_t t0 = 0; t0 < j->tokens; t0 += ATTN_TB) {
        size_t nt = j->tokens - t0 < ATTN_TB ? j->tokens - t0 : ATTN_TB;
        size_t t1 = t0 + nt, next = j->tokens - t1 < ATTN_TB ? j->tokens - t1 : ATTN_TB;
        token_block tb = {rows, t0, nt, buf, next_rows};
        rows_at(j->cb, t0, nt, rows);
        rows_at(j->cb, t1, next, next_rows);
        for (size_t i = next; i < nt; i++)
            next_rows[i] = NULL;
        for (size_t g = 0; g < j->cb->kv_heads; g++) {
            for (size_t h0 = g * j->group; h0 < (g + 1) * j->group; h0 += ATTN_MAXH) {
                size_t left = (g + 1) * j->group - h0;
                switch (left < ATTN_MAXH ? left : ATTN_MAXH) {
                case 1:
                    heads_pass(k, j, &tb, g, h0, 1);
                    break;
                case 2:
                    heads_pass(k, j, &tb, g, h0, 2);
                    break;
                case 3:
                    heads_pass(k, j, &tb, g, h0, 3);
                    break;
                case 4:
                    heads_pass(k, j, &tb, g, h0, 4);
                    break;
                case 5:
                    heads_pass(k, j, &tb, g, h0, 5);
                    break;
                case 6:
                    heads_pass(k, j, &tb, g, h0, 6);
                    break;
                case 7:
                    heads_pass(k, j, &tb, g, h0, 7);
                    break;
                default:
                    heads_pass(k, j, &tb, g, h0, 8);
                    break;
                }
            }
        }
    }
}

/* kern_exp_nonpositive on 16 lanes, the same operations in the same order (so
 * the same bits: the build contracts no a * b + c in either). */
ATTN_AVX512 ATTN_INLINE __m512 exp16_nonpositive(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512i n = _mm512_cvttps_epi32(
        _mm512_sub_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _mm512_set1_ps(0.5f)));
    __m512 nf = _mm512_cvtepi32_ps(n);
    __m512 r = _mm512_add_ps(_mm512_sub_ps(x, _mm512_mul_ps(nf, _mm512_set1_ps(0.693359375f))),
                             _mm512_mul_ps(nf, _mm512_set1_ps(2.12194440e-4f)));
    __m512 p = _mm512_add_ps(_mm512_set1_ps(1.0f / 120), _mm512_div_ps(r, _mm512_set1_ps(720.0f)));
    p = _mm512_add_ps(_mm512_set1_ps(1.0f / 24), _mm512_mul_ps(r, p));
    p = _mm512_add_ps(_mm512_set1_ps(1.0f / 6), _mm512_mul_ps(r, p));
    p = _mm512_add_ps(_mm512_set1_ps(0.5f), _mm512_mul_ps(r, p));
    p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(r, p));
    p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(r, p));
    __m512i pow2 = _mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(pow2));
}

/* softmax_row in zmm registers, with its results bit for bit: the max is
 * exact in any order, exp16 is kern_exp_nonpositive lane by lane, and the sum
 * adds in softmax_row's order (16 lanes over whole vectors, the lanes in
 * turn, then the tail). */
ATTN_AVX512 static void softmax_avx512(float *row, size_t n, float *m, float *l)
{
    size_t full = n / 16 * 16;
    __mmask16 tail = (__mmask16)((1u << (n - full)) - 1);
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (size_t t = 0; t < full; t += 16)
        vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(row + t));
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(vmax, tail, row + full));
    float mx = _mm512_reduce_max_ps(vmax);
    __m512 vmx = _mm512_set1_ps(mx), lanes = _mm512_setzero_ps();
    for (size_t t = 0; t < full; t += 16) {
        __m512 e = exp16_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(row + t), vmx));
        _mm512_storeu_ps(row + t, e);
        lanes = _mm512_add_ps(lanes, e);
    }
    if (tail != 0)
        _mm512_mask_storeu_ps(
            row + full, tail,
            exp16_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, row + full), vmx)));
    float lane[16], sum = 0.0f;
    _mm512_storeu_ps(lane, lanes);
    for (int k = 0; k < 16; k++)
        sum += lane[k];
    for (size_t t = full; t < n; t++)
        sum += row[t];
    *m = mx;
    *l = sum;
}
#endif

static void run_qk(const chunk_job *j)
{
#if KERN_HAVE_X86
    kern_isa path = kern_isa_now();
    if (path == KERN_AVX512BF16) {
        attn_avx512(ATTN_QK, j);
        return;
    }
    if (path == KERN_AVX2 && kern_attn_qk_avx2(j))
        return;
#endif
    qk_portable(j);
}

static void run_pv(const chunk_job *j)
{
#if KERN_HAVE_X86
    kern_isa path = kern_isa_now();
    if (path == KERN_AVX512BF16) {
        attn_avx512(ATTN_PV, j);
        return;
    }
    if (path == KERN_AVX2 && kern_attn_pv_avx2(j))
        return;
#endif
    pv_portable(j);
}

static void run_softmax(float *row, size_t n, float *m, float *l)
{
#if KERN_HAVE_X86
    kern_isa path = kern_isa_now();
    if (path == KERN_AVX512BF16) {
        softmax_avx512(row, n, m, l);
        return;
    }
    if (path == KERN_AVX2) {
        kern_attn_softmax_avx2(row, n, m, l);
        return;
    }
#endif
    softmax_portable(row, n, m, l);
}

static int qk_task(const hg_kernel_ctx *ctx)
{
    kern_mat q;
    chunk_blocks cb;
    if (ctx->nargs < 3 || ctx->nscalars != 2 || !kern_mat_of(&ctx->args[0], &q) || q.rows != 1 ||
        !blocks_of(ctx, 1, ctx->nargs - 2, &cb))
        return 1;
    const hg_kview *sv = &ctx->args[ctx->nargs - 1];
    size_t hd = kern_mat_cols(&q), h_count = hd / cb.d, ctok = sv->ndims == 2 ? sv->shape[1] : 0;
    size_t tokens = (size_t)ctx->scalars[0];
    float scale = (float)hg_scalar_as_f64(ctx->scalars[1]);
    float *s = dense_f32(sv, h_count, ctok);
    if (s == NULL || hd % cb.d != 0 || h_count % cb.kv_heads != 0 || tokens > ctok ||
        tokens > cb.nb * cb.block_size)
        return 1;
    size_t group = h_count / cb.kv_heads;
    /* 64-byte aligned: the AVX-512 path loads q a vector at a time, and a
     * load split across two cache lines made QK twice as slow */
    size_t qbytes = ((hd + cb.d) * sizeof(float) + 63) / 64 * 64;
    float *qf = aligned_alloc(64, qbytes);
    if (qf == NULL)
        return 1;
    float *kf = qf + hd;
    kern_mat_get_row(&q, 0, qf);
    chunk_job job = {.cb = &cb,
                     .group = group,
                     .tokens = tokens,
                     .ctok = ctok,
                     .scores = s,
                     .q = qf,
                     .scale = scale,
                     .row = kf};
    run_qk(&job);
    for (size_t h = 0; h < h_count; h++) {
        for (size_t t = tokens; t < ctok; t++)
            s[h * ctok + t] = -INFINITY;
    }
    free(qf);
    return 0;
}

static int softmax_task(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 2 || ctx->nscalars != 1 || ctx->args[0].ndims != 2)
        return 1;
    size_t h_count = ctx->args[0].shape[0], ctok = ctx->args[0].shape[1];
    size_t tokens = (size_t)ctx->scalars[0];
    float *s = dense_f32(&ctx->args[0], h_count, ctok);
    float *stats = dense_f32(&ctx->args[1], h_count, 2);
    if (s == NULL || stats == NULL || tokens > ctok)
        return 1;
    for (size_t h = 0; h < h_count; h++) {
        float *row = s + h * ctok;
        run_softmax(row, tokens, &stats[2 * h], &stats[2 * h + 1]);
        for (size_t t = tokens; t < ctok; t++)
            row[t] = 0.0f;
    }
    return 0;
}

static int pv_task(const hg_kernel_ctx *ctx)
{
    chunk_blocks cb;
    if (ctx->nargs < 3 || ctx->nscalars != 1 || ctx->args[0].ndims != 2 ||
        !blocks_of(ctx, 1, ctx->nargs - 2, &cb))
        return 1;
    size_t h_count = ctx->args[0].shape[0], ctok = ctx->args[0].shape[1];
    size_t tokens = (size_t)ctx->scalars[0];
    const float *p = dense_f32(&ctx->args[0], h_count, ctok);
    float *part = dense_f32(&ctx->args[ctx->nargs - 1], h_count, cb.d);
    if (p == NULL || part == NULL || h_count % cb.kv_heads != 0 || tokens > ctok ||
        tokens > cb.nb * cb.block_size)
        return 1;
    size_t group = h_count / cb.kv_heads;
    float *vf = malloc(cb.d * sizeof(float));
    if (vf == NULL)
        return 1;
    for (size_t i = 0; i < h_count * cb.d; i++)
        part[i] = 0.0f;
    chunk_job job = {.cb = &cb,
                     .group = group,
                     .tokens = tokens,
                     .ctok = ctok,
                     .scores = (float *)p,
                     .part = part,
                     .row = vf};
    run_pv(&job);
    free(vf);
    return 0;
}

static int merge_task(const hg_kernel_ctx *ctx)
{
    kern_mat out;
    const hg_kview *st = &ctx->args[0], *pv = &ctx->args[1];
    if (ctx->nargs != 3 || st->ndims != 3 || pv->ndims != 3 || !kern_mat_of(&ctx->args[2], &out) ||
        out.rows != 1)
        return 1;
    size_t chunks = st->shape[0], h_count = st->shape[1], d = pv->shape[2];
    size_t hd = kern_mat_cols(&out);
    if (st->dtype != HG_F32 || pv->dtype != HG_F32 || st->shape[2] != 2 || st->strides[2] != 1 ||
        st->strides[1] != 2 || st->strides[0] != 2 * h_count || pv->shape[0] != chunks ||
        pv->shape[1] != h_count || pv->strides[2] != 1 || pv->strides[1] != d ||
        pv->strides[0] != h_count * d || hd != h_count * d)
        return 1;
    const float *stats = st->data, *parts = pv->data;
    float *o = malloc(hd * sizeof(float));
    if (o == NULL)
        return 1;
    for (size_t h = 0; h < h_count; h++) {
        float m = -INFINITY, l = 0.0f;
        for (size_t c = 0; c < chunks; c++)
            m = stats[(c * h_count + h) * 2] > m ? stats[(c * h_count + h) * 2] : m;
        float *oh = o + h * d;
        for (size_t i = 0; i < d; i++)
            oh[i] = 0.0f;
        for (size_t c = 0; c < chunks && m > -INFINITY; c++) {
            float wc = expf(stats[(c * h_count + h) * 2] - m);
            l += wc * stats[(c * h_count + h) * 2 + 1];
            const float *ph = parts + (c * h_count + h) * d;
            for (size_t i = 0; i < d; i++)
                oh[i] += wc * ph[i];
        }
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (size_t i = 0; i < d; i++)
            oh[i] *= inv;
    }
    kern_mat_put_row(&out, 0, o);
    free(o);
    return 0;
}

const hg_kernel kern_attn_qk = {"attn_qk", qk_task, HG_CORE_CUBE, NULL, NULL};
const hg_kernel kern_attn_softmax = {"attn_softmax", softmax_task, HG_CORE_VECTOR, kern_cl_source,
                                     "attn_softmax"};
const hg_kernel kern_attn_pv = {"attn_pv", pv_task, HG_CORE_CUBE, NULL, NULL};
const hg_kernel kern_attn_merge = {"attn_merge", merge_task, HG_CORE_VECTOR, kern_cl_source,
                                   "attn_merge"};

/* The records per block count (kernels.h): entries "<prefix>1".."<prefix>8". */
#define ATTN_CL(name, fn, core, entry)                                                             \
    {                                                                                              \
        name, fn, core, kern_cl_source, entry                                                      \
    }
#define ATTN_BY_BLOCKS(name, fn, core, prefix)                                                     \
    {                                                                                              \
        ATTN_CL(name, fn, core, prefix "1"), ATTN_CL(name, fn, core, prefix "2"),                  \
            ATTN_CL(name, fn, core, prefix "3"), ATTN_CL(name, fn, core, prefix "4"),              \
            ATTN_CL(name, fn, core, prefix "5"), ATTN_CL(name, fn, core, prefix "6"),              \
            ATTN_CL(name, fn, core, prefix "7"), ATTN_CL(name, fn, core, prefix "8")               \
    }
_Static_assert(KERN_ATTN_MAX_BLOCKS == 8, "opencl.c has an entry per block count up to 8");

static const hg_kernel qk_f32[] = ATTN_BY_BLOCKS("attn_qk", qk_task, HG_CORE_CUBE, "attn_qk_f32_");
static const hg_kernel qk_bf16[] =
    ATTN_BY_BLOCKS("attn_qk", qk_task, HG_CORE_CUBE, "attn_qk_bf16_");
static const hg_kernel pv_by_blocks[] =
    ATTN_BY_BLOCKS("attn_pv", pv_task, HG_CORE_CUBE, "attn_pv_");

const hg_kernel *kern_attn_qk_for(hg_dtype q, uint32_t nb)
{
    if (nb == 0 || nb > KERN_ATTN_MAX_BLOCKS || (q != HG_F32 && q != HG_BF16))
        return &kern_attn_qk;
    return q == HG_F32 ? &qk_f32[nb - 1] : &qk_bf16[nb - 1];
}

const hg_kernel *kern_attn_pv_for(uint32_t nb)
{
    return nb == 0 || nb > KERN_ATTN_MAX_BLOCKS ? &kern_attn_pv : &pv_by_blocks[nb - 1];
}
