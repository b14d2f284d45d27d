/*
 * gemm.c: bgemm's two tile kernels, P = A x B and C += P (f32), on every
 * path.  bgemm.c's kernel records call these; the bodies live here with
 * the other workload kernels so that scene files never carry kernel code.
 *
 * The AVX2 GEMM is a register-blocked micro-kernel: a 6 x 16 block of P in
 * 12 ymm accumulators, per step of K two loads of B's row, six broadcasts
 * of A's column and 12 FMAs (FMA bound: 2 per cycle).  Blocks walk P's
 * columns outermost, so B's 16-column panel (K x 64 bytes) stays in L1 while
 * the row blocks pass over it.  Row tails take a block of fewer rows,
 * column tails 8-wide blocks, then the portable loop for the last < 8.
 * On the AVX-512 level (kern_isa_now() KERN_AVX512BF16, which has
 * AVX-512F) a 12 x 32 block in 24 zmm accumulators takes the columns up to
 * a multiple of 16 first (the same loop at twice the width: on host X,
 * Intel, the AVX2 block reached 0.48-0.70x OpenBLAS's single-thread sgemm,
 * which uses AVX-512 there); the AVX2 blocks take what is left.
 * Sums go over K in order from 0, as the portable loop's do, with fused
 * multiply-adds: bit for bit the portable result wherever the products are
 * exact (bgemm's inputs: multiples of 1/8), else within f32 summation's
 * bound.  The ADD is the same arithmetic on every path: the same bits.
 */
#include "paths.h"

/* A dense-rowed f32 matrix: data, rows, cols, row stride. */
typedef struct gemm_mat {
    float *p;
    size_t rows, cols, ld;
} gemm_mat;

static bool mat_of(const hg_kview *v, gemm_mat *m)
{
    if (v->dtype != HG_F32 || v->ndims != 2 || v->strides[1] != 1)
        return false;
    *m = (gemm_mat){v->data, v->shape[0], v->shape[1], v->strides[0]};
    return true;
}

/* P[:, c0..n) = A x B[:, c0..n), the portable loops. */
static void gemm_portable(const gemm_mat *a, const gemm_mat *b, const gemm_mat *p, size_t c0)
{
    for (size_t r = 0; r < a->rows; r++) {
        const float *arow = a->p + r * a->ld;
        float *prow = p->p + r * p->ld;
        for (size_t c = c0; c < b->cols; c++)
            prow[c] = 0.0f;
        for (size_t kk = 0; kk < a->cols; kk++) {
            const float *brow = b->p + kk * b->ld;
            for (size_t c = c0; c < b->cols; c++)
                prow[c] += arow[kk] * brow[c];
        }
    }
}

#if KERN_HAVE_X86
#define G_INLINE __attribute__((always_inline)) static inline

/* A row tail of n rows (n < MR) in a panel's switch. */
#define G_TAIL(micro, mr, n)                                                                       \
    case n:                                                                                        \
        if ((n) < (mr))                                                                            \
            micro(a, b, p, r0, c0, (n) < (mr) ? (n) : 1, nv);                                      \
        break;

/* One level's blocks, at vector width W with MR rows (both levels run the
 * same loop; only the vector type differs):
 *   micro_SFX: P[r0.., c0..) for nr rows (<= MR) and W nv columns (nv 1 or
 *              2), sums over K in order from 0;
 *   panel_SFX: every row block of columns [c0, c0 + W nv);
 *   gemm_SFX:  columns [c0, the last multiple of W); returns where the rest
 *              begins. */
#define G_LEVEL(SFX, TARGET, VEC, W, MR, ZERO, LOADU, SET1, FMADD, STOREU)                         \
    TARGET G_INLINE void micro_##SFX(const gemm_mat *a, const gemm_mat *b, const gemm_mat *p,      \
                                     size_t r0, size_t c0, int nr, int nv)                         \
    {                                                                                              \
        VEC acc[MR][2];                                                                            \
        _Pragma("GCC unroll 12") for (int r = 0; r < nr; r++)                                      \
        {                                                                                          \
            acc[r][0] = ZERO();                                                                    \
            acc[r][1] = ZERO();                                                                    \
        }                                                                                          \
        const float *arow = a->p + r0 * a->ld, *bcol = b->p + c0;                                  \
        _Pragma("GCC unroll 4") for (size_t kk = 0; kk < a->cols; kk++)                            \
        {                                                                                          \
            VEC bv[2];                                                                             \
            _Pragma("GCC unroll 2") for (int v = 0; v < nv; v++) bv[v] =                           \
                LOADU(bcol + kk * b->ld + (W) * (size_t)v);                                        \
            _Pragma("GCC unroll 12") for (int r = 0; r < nr; r++)                                  \
            {                                                                                      \
                VEC av = SET1(arow[(size_t)r * a->ld + kk]);                                       \
                _Pragma("GCC unroll 2") for (int v = 0; v < nv; v++) acc[r][v] =                   \
                    FMADD(av, bv[v], acc[r][v]);                                                   \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 12") for (int r = 0; r < nr; r++)                                      \
        {                                                                                          \
            _Pragma("GCC unroll 2") for (int v = 0; v < nv; v++)                                   \
                STOREU(p->p + (r0 + (size_t)r) * p->ld + c0 + (W) * (size_t)v, acc[r][v]);         \
        }                                                                                          \
    }                                                                                              \
    TARGET G_INLINE void panel_##SFX(const gemm_mat *a, const gemm_mat *b, const gemm_mat *p,      \
                                     size_t c0, int nv)                                            \
    {                                                                                              \
        size_t r0 = 0;                                                                             \
        for (; r0 + (MR) <= a->rows; r0 += (MR))                                                   \
            micro_##SFX(a, b, p, r0, c0, MR, nv);                                                  \
        switch (a->rows - r0) {                                                                    \
            G_TAIL(micro_##SFX, MR, 1)                                                             \
            G_TAIL(micro_##SFX, MR, 2)                                                             \
            G_TAIL(micro_##SFX, MR, 3)                                                             \
            G_TAIL(micro_##SFX, MR, 4)                                                             \
            G_TAIL(micro_##SFX, MR, 5)                                                             \
            G_TAIL(micro_##SFX, MR, 6)                                                             \
            G_TAIL(micro_##SFX, MR, 7)                                                             \
            G_TAIL(micro_##SFX, MR, 8)                                                             \
            G_TAIL(micro_##SFX, MR, 9)                                                             \
            G_TAIL(micro_##SFX, MR, 10)                                                            \
            G_TAIL(micro_##SFX, MR, 11)                                                            \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    TARGET static size_t gemm_##SFX(const gemm_mat *a, const gemm_mat *b, const gemm_mat *p,       \
                                    size_t c0)                                                     \
    {                                                                                              \
        for (; c0 + 2 * (W) <= b->cols; c0 += 2 * (W))                                             \
            panel_##SFX(a, b, p, c0, 2);                                                           \
        if (c0 + (W) <= b->cols) {                                                                 \
            panel_##SFX(a, b, p, c0, 1);                                                           \
            c0 += (W);                                                                             \
        }                                                                                          \
        return c0;                                                                                 \
    }

/* AVX2: 6 x 16 in 12 ymm accumulators.  AVX-512: 12 x 32 in 24 zmm. */
G_LEVEL(avx2, KERN_AVX2_TARGET, __m256, 8, 6, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps,
        _mm256_fmadd_ps, _mm256_storeu_ps)
G_LEVEL(avx512, KERN_SIMD_TARGET, __m512, 16, 12, _mm512_setzero_ps, _mm512_loadu_ps,
        _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)

KERN_AVX2_TARGET static size_t add_avx2(const float *p, float *c, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(c + i, _mm256_add_ps(_mm256_loadu_ps(c + i), _mm256_loadu_ps(p + i)));
    return i;
}
#endif

int kern_gemm_tile(const hg_kernel_ctx *ctx)
{
    gemm_mat a, b, p;
    if (ctx->nargs != 3 || !mat_of(&ctx->args[0], &a) || !mat_of(&ctx->args[1], &b) ||
        !mat_of(&ctx->args[2], &p) || b.rows != a.cols || p.rows != a.rows || p.cols != b.cols)
        return 1;
    size_t c0 = 0;
#if KERN_HAVE_X86
    kern_isa isa = kern_isa_now();
    if (isa == KERN_AVX512BF16) /* that level has AVX-512F, and AVX2 and FMA */
        c0 = gemm_avx512(&a, &b, &p, 0);
    if (isa != KERN_PORTABLE)
        c0 = gemm_avx2(&a, &b, &p, c0);
#endif
    if (c0 < b.cols)
        gemm_portable(&a, &b, &p, c0);
    return 0;
}

int kern_add_tile(const hg_kernel_ctx *ctx)
{
    gemm_mat p, c;
    if (ctx->nargs != 2 || !mat_of(&ctx->args[0], &p) || !mat_of(&ctx->args[1], &c) ||
        p.rows != c.rows || p.cols != c.cols)
        return 1;
    bool fast = kern_isa_now() != KERN_PORTABLE;
    for (size_t r = 0; r < c.rows; r++) {
        const float *prow = p.p + r * p.ld;
        float *crow = c.p + r * c.ld;
        size_t col = 0;
#if KERN_HAVE_X86
        if (fast)
            col = add_avx2(prow, crow, c.cols);
#else
        (void)fast;
#endif
        for (; col < c.cols; col++)
            crow[col] += prow[col];
    }
    return 0;
}
