/*
 * proj.c: the bf16-weight projection, y = bf16(x) . w^T with f32 sums.
 *
 * At decode batch sizes (16 rows) every weight byte is used 16 times, so
 * a good kernel is bound by reading the weights from memory.  Shape of the
 * fast path (AVX-512 BF16, chosen at run time: the build sets no -march):
 *
 *   - K is walked in blocks of PROJ_KBLOCK; a block of x (16 rows x 1024,
 *     rounded to bf16, zero padded) is 32 KiB on the stack and stays in L1
 *     while every weight row's 2 KiB segment of the block streams past;
 *   - weight rows go in groups of 3 and x rows in 2 passes of 8: 24 zmm
 *     accumulators, acc[i][r] = vdpbf16ps(acc[i][r], w[j+i][k..k+32),
 *     xb[r][k..k+32)), 11 loads per 24 vdpbf16ps (the second pass over a
 *     group's segments hits L1), a pass of only padding rows skipped;
 *   - every row of the group after next is prefetched, the passes sharing
 *     the rows: rows are read in 2 KiB pieces ldw apart, which the hardware
 *     prefetcher alone follows poorly (a row left out costs ~25%);
 *   - a group's 24 accumulators are reduced to 24 sums with a transpose-add
 *     tree kept in registers (~70 shuffles and adds per 768 vdpbf16ps; the
 *     first version, a loop over an array, spilled them all to the stack and
 *     cost a third of the throughput) and added into acc[row][16] on the
 *     stack (the rows of y are far apart; acc's are adjacent), which goes to
 *     y once per chunk of 512 weight rows (a projection task is one chunk).
 *
 * vdpbf16ps does 32 multiply-adds, so 16 rows cost 16 of them per 64 weight
 * bytes: on the 2-core Zen 5 dev machine the ceiling (6.5 G vdpbf16ps/s) is
 * ~26 GB/s of weights per core, near one core's streaming read, so the kernel
 * reaches half of the 2-core stream only while it keeps the multiply-add
 * pipes ~60% busy and the prefetch ahead of it (bench/decode_bandwidth.c
 * measures both).
 * The kernel allocates nothing: its scratch is on the stack (~70 KiB; the
 * portable path ~140 KiB), so a task costs no page faults however many run.
 *
 * The portable path computes the same thing with plain loops (16 partial
 * sums per dot so compilers vectorize it without reassociating).  Both
 * paths round x the same way, so they differ only in the order of f32
 * additions (and vdpbf16ps flushing denormals): tests compare them.
 */
#include <stdlib.h>
#include <string.h>

#include "paths.h"

#define PROJ_ROWS   16   /* x rows per pass: one zmm accumulator each */
#define PROJ_KBLOCK 1024 /* 16 rows x 1024 bf16 of x = 32 KiB, an L1's worth */
/* Weight rows per step: 3 rows x 8 x rows = 24 accumulators, 11 loads per
 * 24 vdpbf16ps (2 rows: 10 per 16). */
#define PROJ_WROWS   3
#define PROJ_PFAHEAD 2 /* groups of rows between the one computed and the one prefetched */
/* xb's row stride: one cache line more than the block, so that the 16 rows
 * at one k do not all fall into the same two L1 sets (a 2 KiB stride is
 * half an L1 way) and evict each other. */
#define PROJ_XSTRIDE (PROJ_KBLOCK + 32)

#define PROJ_CHUNK 512 /* weight rows per pass over K: acc is 32 KiB of stack */

/* One K block of a chunk of weight rows: x rows as bf16 in xb
 * ([PROJ_ROWS][PROJ_XSTRIDE], zero past kb and past nrows), the block's
 * weights at w (row stride ldw), and acc ([n][PROJ_ROWS], contiguous so that
 * adding a pair's sums touches two cache lines) that the sums add into. */
typedef struct proj_block {
    const uint16_t *xb;
    size_t nrows, kb;
    const uint16_t *w;
    size_t n, ldw;
    float *acc;
} proj_block;

/* ------------------------------------------------------- portable path */

/* Dot product of n floats (n a multiple of 16) in 16 partial sums. */
static float dot16(const float *a, const float *b, size_t n)
{
    float lane[16] = {0};
    for (size_t i = 0; i < n; i += 16) {
        for (int l = 0; l < 16; l++)
            lane[l] += a[i + (size_t)l] * b[i + (size_t)l];
    }
    for (int width = 8; width > 0; width /= 2) {
        for (int l = 0; l < width; l++)
            lane[l] += lane[l + width];
    }
    return lane[0];
}

static void proj_block_portable(const proj_block *b)
{
    float xf[PROJ_ROWS * PROJ_KBLOCK], wf[PROJ_KBLOCK];
    size_t kpad = (b->kb + 15) / 16 * 16;
    for (size_t r = 0; r < b->nrows; r++) {
        for (size_t i = 0; i < kpad; i++)
            xf[r * PROJ_KBLOCK + i] = kern_bf16_to_f32(b->xb[r * PROJ_XSTRIDE + i]);
    }
    for (size_t j = 0; j < b->n; j++) {
        const uint16_t *wr = b->w + j * b->ldw;
        for (size_t i = 0; i < kpad; i++)
            wf[i] = i < b->kb ? kern_bf16_to_f32(wr[i]) : 0.0f;
        for (size_t r = 0; r < b->nrows; r++)
            b->acc[j * PROJ_ROWS + r] += dot16(wf, xf + r * PROJ_KBLOCK, kpad);
    }
}

/* ----------------------------------------------------- AVX-512 BF16 path */

#if KERN_HAVE_X86
#define PROJ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define PROJ_INLINE __attribute__((always_inline)) static inline

/* 32 bf16 of a weight row at kk: all of them, or the first `len` (the
 * block's tail: w must not be read past it, and xb is zero there). */
PROJ_TARGET PROJ_INLINE __m512bh load_w(const uint16_t *wr, size_t kk, size_t len)
{
    if (len >= 32)
        return (__m512bh)_mm512_loadu_si512(wr + kk);
    return (__m512bh)_mm512_maskz_loadu_epi16((__mmask32)((1ull << len) - 1), wr + kk);
}

/* One 32-wide step of PROJ_WROWS weight rows against 8 x rows: each x
 * load feeds PROJ_WROWS vdpbf16ps. */
PROJ_TARGET PROJ_INLINE void group_step(__m512 *a, const __m512bh *wv, const uint16_t *x0,
                                        size_t kk)
{
#pragma GCC unroll 8
    for (int r = 0; r < 8; r++) {
        __m512bh xv = (__m512bh)_mm512_load_si512(x0 + (size_t)r * PROJ_XSTRIDE + kk);
#pragma GCC unroll 4
        for (int i = 0; i < PROJ_WROWS; i++)
            a[8 * i + r] = _mm512_dpbf16_ps(a[8 * i + r], wv[i], xv);
    }
}

/* Adds 8 sums into acc row j, pass p, if j < n. */
PROJ_TARGET PROJ_INLINE void add_sums(const proj_block *b, size_t j, int p, __m256 s)
{
    if (j >= b->n)
        return;
    float *r0 = b->acc + j * PROJ_ROWS + 8 * (size_t)p;
    _mm256_storeu_ps(r0, _mm256_add_ps(_mm256_loadu_ps(r0), s));
}

/* acc[j, j + PROJ_WROWS)[8p..8p+8) += pass p's x rows . weight rows j..
 * (rows past n repeat row j; their sums are dropped).  `ahead` is the first
 * row of a later group: pass p prefetches its rows p, p + passes, ... so
 * that the passes together fetch all of them (rows are read in 2 KiB
 * pieces ldw apart, which the hardware prefetcher alone follows poorly).
 * Inlined with constant p and passes, so the prefetches are straight code. */
PROJ_TARGET PROJ_INLINE void proj_group(const proj_block *b, size_t j, int p, int passes,
                                        const char *ahead)
{
    __m512 a[8 * PROJ_WROWS];
#pragma GCC unroll 24
    for (int i = 0; i < 8 * PROJ_WROWS; i++)
        a[i] = _mm512_setzero_ps();
    const uint16_t *x0 = b->xb + (size_t)(8 * p) * PROJ_XSTRIDE;
    const uint16_t *wr[PROJ_WROWS];
#pragma GCC unroll 4
    for (int i = 0; i < PROJ_WROWS; i++)
        wr[i] = b->w + (j + (size_t)i < b->n ? j + (size_t)i : j) * b->ldw;
    size_t full = b->kb / 32 * 32, kk = 0;
    __m512bh wv[PROJ_WROWS];
    for (; kk < full; kk += 32) {
#pragma GCC unroll 4
        for (int i = p; i < PROJ_WROWS; i += passes)
            _mm_prefetch(ahead + (size_t)i * b->ldw * 2 + 2 * kk, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int i = 0; i < PROJ_WROWS; i++)
            wv[i] = load_w(wr[i], kk, 32);
        group_step(a, wv, x0, kk);
    }
    if (kk < b->kb) {
#pragma GCC unroll 4
        for (int i = 0; i < PROJ_WROWS; i++)
            wv[i] = load_w(wr[i], kk, b->kb - kk);
        group_step(a, wv, x0, kk);
    }
    /* Lane 8i + r of s01: weight row j + i, x row 8p + r (written for 3 rows). */
    _Static_assert(PROJ_WROWS == 3, "the sum tree below reduces 3 weight rows");
    __m512 u0 = kern_fold8(a), u1 = kern_fold8(a + 8), u2 = kern_fold8(a + 16);
    __m512 s01 = kern_fold_quarters(u0, u1), s2 = kern_fold_quarters(u2, u2);
    add_sums(b, j, p, _mm512_castps512_ps256(s01));
    add_sums(b, j + 1, p, _mm512_extractf32x8_ps(s01, 1));
    add_sums(b, j + 2, p, _mm512_castps512_ps256(s2));
}

PROJ_TARGET static void proj_block_avx512bf16(const proj_block *b)
{
    for (size_t j = 0; j < b->n; j += PROJ_WROWS) {
        size_t next = j + PROJ_PFAHEAD * PROJ_WROWS;
        const char *ahead = (const char *)(next + PROJ_WROWS <= b->n ? b->w + next * b->ldw : b->w);
        if (b->nrows > 8) {
            proj_group(b, j, 0, 2, ahead);
            proj_group(b, j, 1, 2, ahead);
        } else { /* a pass of padding rows only is skipped */
            proj_group(b, j, 0, 1, ahead);
        }
    }
}
#endif

/* ------------------------------------------------------------- driver */

/* Rows [r0, r0 + nrows) of x, columns [k0, k0 + kb), into xb as bf16, zero
 * padded to PROJ_ROWS x PROJ_XSTRIDE. */
/* n floats to bf16, rounded to nearest even: vcvtne2ps2bf16 on the fast
 * path (32 at a time), the scalar rounding otherwise (and for the tail). */
static void to_bf16(const float *src, size_t n, uint16_t *dst, bool fast);

#if KERN_HAVE_X86
PROJ_TARGET static size_t to_bf16_avx512(const float *src, size_t n, uint16_t *dst)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
        _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    return i;
}
#endif

static void to_bf16(const float *src, size_t n, uint16_t *dst, bool fast)
{
    size_t i = 0;
#if KERN_HAVE_X86
    if (fast)
        i = to_bf16_avx512(src, n, dst);
#else
    (void)fast;
#endif
    for (; i < n; i++)
        dst[i] = kern_f32_to_bf16(src[i]);
}

/* Rows [r0, r0 + nrows) of x, columns [k0, k0 + kb), into xb as bf16, zero
 * padded to PROJ_ROWS x PROJ_XSTRIDE.  An f32 x with unit column stride
 * (every scene's) converts straight from its tiles: once per K block per
 * task, so it must cost little beside the block's weights. */
static void load_x(const kern_mat *x, size_t r0, size_t nrows, size_t k0, size_t kb, uint16_t *xb,
                   bool fast)
{
    float row[PROJ_KBLOCK];
    size_t kpad = (kb + 31) / 32 * 32; /* a masked tail step reads xb up to here */
    memset(xb + nrows * PROJ_XSTRIDE, 0, (PROJ_ROWS - nrows) * PROJ_XSTRIDE * sizeof(uint16_t));
    for (size_t r = 0; r < nrows; r++) {
        uint16_t *dst = xb + r * PROJ_XSTRIDE;
        memset(dst + kb, 0, (kpad - kb) * sizeof(uint16_t));
        if (x->dtype != HG_F32 || x->s_col != 1) {
            kern_mat_get_span(x, r0 + r, k0, kb, row);
            to_bf16(row, kb, dst, false);
            continue;
        }
        for (size_t i = 0; i < kb;) { /* one tile's piece of the row at a time */
            size_t c = k0 + i, off = c % x->tcols;
            size_t len = kb - i < x->tcols - off ? kb - i : x->tcols - off;
            const float *src =
                (const float *)x->data + (c / x->tcols) * x->s_tile + (r0 + r) * x->s_row + off;
            to_bf16(src, len, dst + i, fast);
            i += len;
        }
    }
}

/* y rows [r0, r0 + nrows) x columns [j0, j0 + n) from one chunk. */
static void proj_chunk(const kern_mat *x, size_t r0, size_t nrows, const uint16_t *w, size_t n,
                       size_t k, size_t ldw, float *y, size_t ldy, bool portable)
{
    uint16_t xb[PROJ_ROWS * PROJ_XSTRIDE] __attribute__((aligned(64)));
    float acc[PROJ_CHUNK * PROJ_ROWS] __attribute__((aligned(64)));
    memset(acc, 0, n * PROJ_ROWS * sizeof(float));
    for (size_t k0 = 0; k0 < k; k0 += PROJ_KBLOCK) {
        size_t kb = k - k0 < PROJ_KBLOCK ? k - k0 : PROJ_KBLOCK;
        load_x(x, r0, nrows, k0, kb, xb, !portable);
        proj_block b = {xb, nrows, kb, w + k0, n, ldw, acc};
#if KERN_HAVE_X86
        if (!portable)
            proj_block_avx512bf16(&b);
        else
#endif
            proj_block_portable(&b);
    }
    for (size_t r = 0; r < nrows; r++) {
        for (size_t j = 0; j < n; j++)
            y[r * ldy + j] = acc[j * PROJ_ROWS + r];
    }
}

int kern_proj(const kern_mat *x, const uint16_t *w, size_t n, size_t k, size_t ldw, float *y,
              size_t ldy)
{
    kern_isa path = kern_isa_now();
    for (size_t r0 = 0; r0 < x->rows; r0 += PROJ_ROWS) {
        size_t nrows = x->rows - r0 < PROJ_ROWS ? x->rows - r0 : PROJ_ROWS;
        for (size_t j0 = 0; j0 < n; j0 += PROJ_CHUNK) {
            size_t nj = n - j0 < PROJ_CHUNK ? n - j0 : PROJ_CHUNK;
#if KERN_HAVE_X86
            if (path == KERN_AVX2) {
                kern_proj_chunk_avx2(x, r0, nrows, w + j0 * ldw, nj, k, ldw, y + r0 * ldy + j0,
                                     ldy);
                continue;
            }
#endif
            proj_chunk(x, r0, nrows, w + j0 * ldw, nj, k, ldw, y + r0 * ldy + j0, ldy,
                       path != KERN_AVX512BF16);
        }
    }
    return 0;
}

/* The last two dims of a 2-D view, or of a 3-D view whose first dim is 1. */
static bool as_matrix(const hg_kview *v, size_t *rows, size_t *cols, size_t *ld)
{
    uint32_t d = v->ndims;
    if (d < 2 || d > 3 || (d == 3 && v->shape[0] != 1) || v->strides[d - 1] != 1)
        return false;
    *rows = v->shape[d - 2];
    *cols = v->shape[d - 1];
    *ld = v->strides[d - 2];
    return true;
}

static int proj_task(const hg_kernel_ctx *ctx)
{
    if (ctx->nargs != 3)
        return 1;
    kern_mat x;
    size_t n, k, ldw, rows, ny, ldy;
    const hg_kview *w = &ctx->args[1], *y = &ctx->args[2];
    if (!kern_mat_of(&ctx->args[0], &x) || w->dtype != HG_BF16 || y->dtype != HG_F32 ||
        !as_matrix(w, &n, &k, &ldw) || !as_matrix(y, &rows, &ny, &ldy) || kern_mat_cols(&x) != k ||
        x.rows != rows || ny != n)
        return 1;
    return kern_proj(&x, w->data, n, k, ldw, y->data, ldy);
}

const hg_kernel kern_proj_kernel = {"proj", proj_task, HG_CORE_CUBE, kern_cl_source, "proj_f32"};
static const hg_kernel proj_bf16x = {"proj", proj_task, HG_CORE_CUBE, kern_cl_source, "proj_bf16"};
static const hg_kernel proj_host = {"proj", proj_task, HG_CORE_CUBE, NULL, NULL};

const hg_kernel *kern_proj_for(hg_dtype x)
{
    return x == HG_F32 ? &kern_proj_kernel : x == HG_BF16 ? &proj_bf16x : &proj_host;
}
