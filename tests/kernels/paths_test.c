/*
 * paths_test.c: every code path of the workload kernels (portable, avx2,
 * avx512bf16: dispatch.c) against the portable one and a double reference,
 * as a user of HG_KERNELS relies on them:
 *
 *   - the projection and attention's QK and PV within the stated bound of
 *     f32 summation (their orders differ between paths), softmax and the
 *     bgemm ADD tile bit for bit (the same arithmetic), the bgemm GEMM tile
 *     bit for bit on exactly representable sums and within the bound on
 *     random ones;
 *   - every scene's golden check on every path;
 *   - HG_KERNELS: an unknown value or a path the CPU lacks is refused with
 *     the value and the missing cpuid feature named, before a case is made.
 *
 * A path this CPU lacks is not run: each test says "skipped: CPU lacks
 * <path>" for it by name, so a host without AVX-512 never passes its tests
 * silently (they run where the CPU has it).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../scenes/kernels/kernels.h"
#include "../../scenes/qwen3/qwen3.h"
#include "hostgraph_scenes.h"
#include "scene/scene.h"
#include "testlib.h"

/* Prints, once per test, which paths run here and which are skipped. */
static void report_paths(void)
{
    for (int p = 0; p < KERN_ISA_COUNT; p++) {
        const char *missing = kern_isa_missing((kern_isa)p);
        if (missing != NULL)
            printf("     skipped: CPU lacks %s (cpuid %s)\n", kern_isa_name((kern_isa)p), missing);
        else
            printf("     path %s: runs\n", kern_isa_name((kern_isa)p));
    }
}

/* The worse of w and e, a NaN error counting as infinite (fmax drops it). */
static double worse(double w, double e)
{
    return isnan(e) ? INFINITY : fmax(w, e);
}

/* ------------------------------------------------------------ projection */

/* y = bf16(x) . w^T in double, and the sum of |x||w| per output (the
 * scale of f32 rounding error). */
static void proj_reference(const float *x, const uint16_t *w, size_t rows, size_t n, size_t k,
                           double *ref, double *mag)
{
    for (size_t r = 0; r < rows; r++) {
        for (size_t j = 0; j < n; j++) {
            double s = 0.0, m = 0.0;
            for (size_t i = 0; i < k; i++) {
                double xv = hg_bf16_to_f32(hg_f32_to_bf16(x[r * k + i]));
                double wv = hg_bf16_to_f32(w[j * k + i]);
                s += xv * wv;
                m += fabs(xv * wv);
            }
            ref[r * n + j] = s;
            mag[r * n + j] = m;
        }
    }
}

/* Runs kern_proj on x (dense rows x k, or as `tiles` column tiles) and
 * returns the worst error as a fraction of the worst-case bound of f32
 * summation, k 2^-24 sum |x w|. */
static double proj_error(const float *x, const uint16_t *w, size_t rows, size_t n, size_t k,
                         size_t tiles, const double *ref, const double *mag)
{
    size_t tw = k / tiles;
    float *tiled = malloc(rows * k * sizeof(float) + 4), *y = malloc(rows * n * sizeof(float) + 4);
    for (size_t t = 0; t < tiles; t++)
        for (size_t r = 0; r < rows; r++)
            memcpy(tiled + (t * rows + r) * tw, x + r * k + t * tw, tw * sizeof(float));
    kern_mat m = {(char *)tiled, HG_F32, tiles, rows, tw, rows * tw, tw, 1};
    double worst = kern_proj(&m, w, n, k, k, y, n) == 0 ? 0.0 : INFINITY;
    for (size_t i = 0; i < rows * n; i++)
        worst = worse(worst, fabs(y[i] - ref[i]) / ((double)k * 0x1p-24 * mag[i] + 1e-30));
    free(tiled);
    free(y);
    return worst;
}

TEST(projection_paths_agree_with_a_double_reference)
{
    test_rng r = test_seed(2024);
    /* rows, n, k, column tiles of x: odd n, K tails, K blocks, more rows than
     * a pass (16) and more weight rows than a chunk (512); for the AVX2
     * path's structure, K of one 16-column step, of 32 + 8 and of 32 + 16,
     * K blocks of 1024 with a 32-column remainder, and sub-blocks of 24
     * weight rows with 1 or 2 left over (145 x 2080: a 1-row sub-block whose
     * next, the next K block's first, is full: its prefetch share clamped) */
    static const size_t shapes[][4] = {{16, 48, 64, 1},    {5, 33, 100, 2},   {20, 17, 2100, 3},
                                       {1, 1, 31, 1},      {16, 64, 1056, 4}, {3, 8, 1024, 1},
                                       {9, 1030, 96, 2},   {13, 50, 16, 1},   {4, 97, 40, 1},
                                       {16, 145, 2080, 2}, {7, 513, 48, 1}};
    report_paths();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], n = shapes[s][1], k = shapes[s][2], tiles = shapes[s][3];
        float *x = malloc(rows * k * sizeof(float));
        uint16_t *w = malloc(n * k * sizeof(uint16_t));
        double *ref = malloc(rows * n * sizeof(double)), *mag = malloc(rows * n * sizeof(double));
        for (size_t i = 0; i < rows * k; i++)
            x[i] = (float)((double)test_rand(&r) / 4294967296.0 * 4.0 - 2.0);
        for (size_t i = 0; i < n * k; i++)
            w[i] = hg_f32_to_bf16((float)((double)test_rand(&r) / 4294967296.0 * 2.0 - 1.0));
        proj_reference(x, w, rows, n, k, ref, mag);
        double err[KERN_ISA_COUNT];
        for (int p = 0; p < KERN_ISA_COUNT; p++) {
            if (!kern_force((kern_isa)p))
                continue;
            err[p] = proj_error(x, w, rows, n, k, tiles, ref, mag);
            kern_force_auto();
            printf("     rows %zu n %zu k %zu: worst error %.3f of the bound (%s)\n", rows, n, k,
                   err[p], kern_isa_name((kern_isa)p));
            ASSERT(err[p] <= 1.0);
        }
        free(x);
        free(w);
        free(ref);
        free(mag);
    }
}

/* ------------------------------------------------------------- attention */

/* One chunk of the attention kernels, called directly: kv heads, heads per
 * kv head, D, block size, tokens, and the scores' row length. */
typedef struct attn_shape {
    size_t kv_heads, group, d, block, tokens, ctok;
} attn_shape;

typedef struct attn_out {
    float *scores, *stats, *part; /* scores after softmax: the probabilities */
    float *raw;                   /* scores before softmax */
} attn_out;

/* QK, softmax and PV over one chunk (blocks kb and vb, nb of them). */
static void attn_run(const attn_shape *sh, const float *q, uint16_t **kb, uint16_t **vb, size_t nb,
                     attn_out *o)
{
    size_t h = sh->kv_heads * sh->group, qs[2] = {1, h * sh->d}, ss[2] = {h, sh->ctok};
    size_t sts[2] = {h, 2}, ps[2] = {h, sh->d}, bs[3] = {sh->block, sh->kv_heads, sh->d};
    hg_kview args[KERN_ATTN_MAX_BLOCKS + 2];
    uint64_t sc[2] = {sh->tokens, hg_scalar_f64(1.0 / sqrt((double)sh->d))};
    args[0] = kern_dense_view((void *)q, HG_F32, 2, qs);
    for (size_t i = 0; i < nb; i++)
        args[1 + i] = kern_dense_view(kb[i], HG_BF16, 3, bs);
    args[1 + nb] = kern_dense_view(o->scores, HG_F32, 2, ss);
    ASSERT_EQ(kern_call(&kern_attn_qk, args, (uint32_t)nb + 2, sc, 2), 0);
    memcpy(o->raw, o->scores, h * sh->ctok * sizeof(float));
    hg_kview sm[2] = {kern_dense_view(o->scores, HG_F32, 2, ss),
                      kern_dense_view(o->stats, HG_F32, 2, sts)};
    ASSERT_EQ(kern_call(&kern_attn_softmax, sm, 2, sc, 1), 0);
    for (size_t i = 0; i < nb; i++)
        args[1 + i] = kern_dense_view(vb[i], HG_BF16, 3, bs);
    args[0] = kern_dense_view(o->scores, HG_F32, 2, ss);
    args[1 + nb] = kern_dense_view(o->part, HG_F32, 2, ps);
    ASSERT_EQ(kern_call(&kern_attn_pv, args, (uint32_t)nb + 2, sc, 1), 0);
}

/* Worst errors of one path as fractions of f32 summation's bound, n 2^-24
 * sum |terms| (for p = e^x, the polynomial's 2^-22 relative plus x's
 * rounding); infinite when
 * the max is not exact or a probability past the tokens is not 0. */
static double attn_error(const attn_shape *sh, const float *q, uint16_t **kb, uint16_t **vb,
                         const attn_out *o)
{
    size_t hc = sh->kv_heads * sh->group, d = sh->d, T = sh->tokens;
    double scale = (double)(float)(1.0 / sqrt((double)d)), worst = 0.0;
    for (size_t h = 0; h < hc; h++) {
        size_t g = h / sh->group;
        double mx = -INFINITY, l = 0.0;
        for (size_t t = 0; t < T; t++) {
            const uint16_t *k = kb[t / sh->block] + ((t % sh->block) * sh->kv_heads + g) * d;
            double s = 0.0, m = 0.0;
            for (size_t i = 0; i < d; i++) {
                s += (double)q[h * d + i] * hg_bf16_to_f32(k[i]);
                m += fabs((double)q[h * d + i] * hg_bf16_to_f32(k[i]));
            }
            double got = o->raw[h * sh->ctok + t];
            worst = worse(worst,
                          fabs(got - scale * s) / ((double)(d + 1) * 0x1p-24 * scale * m + 1e-30));
            mx = fmax(mx, got);
        }
        if (o->stats[2 * h] != (float)mx) /* the max of the scores, exactly */
            return INFINITY;
        for (size_t t = 0; t < T; t++) {
            double x = o->raw[h * sh->ctok + t] - mx, p = o->scores[h * sh->ctok + t];
            double want = exp(x); /* x's f32 rounding: |x| 2^-24 relative in p */
            worst = worse(worst, fabs(p - want) / ((0x1p-22 + fabs(x) * 0x1p-24) * want + 1e-30));
            l += p;
        }
        for (size_t t = T; t < sh->ctok; t++) {
            if (o->scores[h * sh->ctok + t] != 0.0f) /* past the tokens: no weight */
                return INFINITY;
        }
        worst = worse(worst, fabs(o->stats[2 * h + 1] - l) / ((double)T * 0x1p-24 * l + 1e-30));
        for (size_t i = 0; i < d; i++) {
            double s = 0.0, m = 0.0;
            for (size_t t = 0; t < T; t++) {
                const uint16_t *v = vb[t / sh->block] + ((t % sh->block) * sh->kv_heads + g) * d;
                double pv = (double)o->scores[h * sh->ctok + t] * hg_bf16_to_f32(v[i]);
                s += pv;
                m += fabs(pv);
            }
            worst = worse(worst, fabs(o->part[h * d + i] - s) / ((double)T * 0x1p-24 * m + 1e-30));
        }
    }
    return worst;
}

TEST(attention_paths_agree_with_a_double_reference)
{
    test_rng r = test_seed(77);
    report_paths();
    /* Qwen3's chunk (8 kv heads, 5:1, D 128, 4 blocks of 128, a partial
     * last block); more heads per kv head than a pass takes (9) with D 48
     * (AVX-512: a 32 and a 16 slab; AVX2: three 16-dim steps, 5 + 4 heads
     * in QK and PV); one head per kv head; D not a multiple of 8 (the
     * portable loops on every path); D 24 (AVX2: a 16-dim step and a tail
     * of 8); 80 heads of D 128, more q than AVX2's QK lays out on its stack
     * (it leaves them to the portable loop); 5 heads of D 40 (AVX2's QK: a
     * 5-head pass whose D is not a multiple of 16 takes the 8-dim C loop,
     * not the asm one); 5 heads of D 16 and of D 32 (AVX2's QK asm loop
     * of one 16-dim step, and of two); paged_attention preset=real's group
     * of 8 (AVX2: a 5-head pass in the asm loop, then 3 in it too), and
     * groups of 7, 6, 4 and 3 (5 + 2, 5 + 1, then one pass of 4 and of 3,
     * with D 16 to 48: a group of 3 in the asm loop at D 32, in the 8-dim
     * one at D 24) */
    static const attn_shape shapes[] = {
        {8, 5, 128, 128, 437, 512}, {1, 9, 48, 8, 37, 40},     {3, 1, 16, 16, 16, 16},
        {2, 2, 20, 4, 7, 8},        {2, 3, 24, 8, 13, 16},     {16, 5, 128, 16, 21, 32},
        {2, 5, 128, 16, 1, 16},     {8, 5, 128, 128, 24, 128}, {2, 5, 40, 8, 19, 24},
        {2, 5, 16, 8, 19, 24},      {1, 5, 32, 8, 11, 16},     {2, 8, 128, 128, 300, 512},
        {1, 7, 32, 8, 21, 24},      {1, 6, 48, 8, 13, 16},     {2, 4, 16, 8, 9, 16},
        {2, 3, 32, 8, 17, 24}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const attn_shape *sh = &shapes[si];
        size_t hc = sh->kv_heads * sh->group, nb = (sh->tokens + sh->block - 1) / sh->block;
        size_t belems = sh->block * sh->kv_heads * sh->d;
        float *q = malloc(hc * sh->d * sizeof(float));
        for (size_t i = 0; i < hc * sh->d; i++)
            q[i] = (float)((double)test_rand(&r) / 4294967296.0 * 6.0 - 3.0);
        uint16_t *kb[KERN_ATTN_MAX_BLOCKS], *vb[KERN_ATTN_MAX_BLOCKS];
        for (size_t b = 0; b < nb; b++) {
            kb[b] = malloc(belems * sizeof(uint16_t));
            vb[b] = malloc(belems * sizeof(uint16_t));
            for (size_t i = 0; i < belems; i++) {
                /* rows past the chunk's tokens are NaN: read, they would show */
                bool past = b * sh->block + i / (sh->kv_heads * sh->d) >= sh->tokens;
                kb[b][i] =
                    past
                        ? 0x7fc0
                        : hg_f32_to_bf16((float)((double)test_rand(&r) / 4294967296.0 * 2.0 - 1.0));
                vb[b][i] =
                    past
                        ? 0x7fc0
                        : hg_f32_to_bf16((float)((double)test_rand(&r) / 4294967296.0 * 2.0 - 1.0));
            }
        }
        attn_out out[KERN_ISA_COUNT];
        for (int p = 0; p < KERN_ISA_COUNT; p++) {
            attn_out *o = &out[p];
            o->scores = malloc(hc * sh->ctok * sizeof(float));
            o->raw = malloc(hc * sh->ctok * sizeof(float));
            o->stats = malloc(hc * 2 * sizeof(float));
            o->part = malloc(hc * sh->d * sizeof(float));
        }
        for (int p = 0; p < KERN_ISA_COUNT; p++) {
            if (!kern_force((kern_isa)p))
                continue;
            attn_run(sh, q, kb, vb, nb, &out[p]);
            double worst = attn_error(sh, q, kb, vb, &out[p]);
            printf("     kv_heads %zu group %zu D %zu tokens %zu: worst error %.3f of the bound "
                   "(%s)\n",
                   sh->kv_heads, sh->group, sh->d, sh->tokens, worst, kern_isa_name((kern_isa)p));
            ASSERT(worst <= 1.0);
            /* softmax is the same arithmetic on every path: fed the portable
             * path's scores, the same bits */
            memcpy(out[p].scores, out[0].raw, hc * sh->ctok * sizeof(float));
            size_t ss[2] = {hc, sh->ctok}, sts[2] = {hc, 2};
            uint64_t tok = sh->tokens;
            hg_kview sm[2] = {kern_dense_view(out[p].scores, HG_F32, 2, ss),
                              kern_dense_view(out[p].stats, HG_F32, 2, sts)};
            ASSERT_EQ(kern_call(&kern_attn_softmax, sm, 2, &tok, 1), 0);
            kern_force_auto();
            ASSERT(memcmp(out[p].scores, out[0].scores, hc * sh->ctok * sizeof(float)) == 0);
            ASSERT(memcmp(out[p].stats, out[0].stats, hc * 2 * sizeof(float)) == 0);
        }
        for (int p = 0; p < KERN_ISA_COUNT; p++) {
            free(out[p].scores);
            free(out[p].raw);
            free(out[p].stats);
            free(out[p].part);
        }
        for (size_t b = 0; b < nb; b++) {
            free(kb[b]);
            free(vb[b]);
        }
        free(q);
    }
}

/* --------------------------------------------------------- qwen3's SiLU */

/* qwen3_silu_mul (one arithmetic on every path: kern_exp_clamped, plain C)
 * against g / (1 + e^-g) u in double, over g from -120 to 120 (past the
 * exp's clamp at -87 on both sides of 0), in rows of 37: two blocks of 16
 * the compiler vectorizes and a tail of 5.  The bound: the exp's ~2e-7
 * and four roundings, relative; below g = -87 the result is g e^-87 (under
 * 1e-35) where the true value is smaller still. */
TEST(silu_mul_agrees_with_a_double_reference)
{
    enum { ROWS = 40, COLS = 37, N = ROWS * COLS };
    test_rng r = test_seed(5);
    static float g[N], u[N], a[N];
    for (size_t i = 0; i < N; i++) {
        g[i] = (float)(-120.0 + 240.0 * (double)i / (N - 1));
        u[i] = (float)((double)test_rand(&r) / 4294967296.0 * 4.0 - 2.0);
    }
    g[7] = 0.0f, g[8] = -0.0f, g[9] = 1e-30f, g[10] = -1e-30f, g[11] = NAN;
    size_t shape[2] = {ROWS, COLS};
    hg_kview v[3] = {kern_dense_view(g, HG_F32, 2, shape), kern_dense_view(u, HG_F32, 2, shape),
                     kern_dense_view(a, HG_F32, 2, shape)};
    ASSERT_EQ(kern_call(&qwen3_silu_mul, v, 3, NULL, 0), 0);
    double worst = 0.0;
    for (size_t i = 0; i < N; i++) {
        if (isnan(g[i])) {
            ASSERT(isnan(a[i]));
            continue;
        }
        double want = (double)g[i] / (1.0 + exp(-(double)g[i])) * (double)u[i];
        double err = fabs((double)a[i] - want) - 1e-35;
        worst = worse(worst, err > 0 ? err / fabs(want) : 0.0);
    }
    printf("     worst relative error %.3g (bound 5e-7)\n", worst);
    ASSERT(worst <= 5e-7);
}

/* ------------------------------------------------------- bgemm's tiles */

/* P = A x B by kern_gemm_tile on the path forced, then C += P by
 * kern_add_tile; A is m x k, B k x n, dense. */
static void gemm_run(const float *a, const float *b, size_t m, size_t n, size_t k, float *p,
                     float *c)
{
    size_t sa[2] = {m, k}, sb[2] = {k, n}, sp[2] = {m, n};
    hg_kview g[3] = {kern_dense_view((void *)a, HG_F32, 2, sa),
                     kern_dense_view((void *)b, HG_F32, 2, sb), kern_dense_view(p, HG_F32, 2, sp)};
    ASSERT_EQ(
        kern_call(&(hg_kernel){"gemm", kern_gemm_tile, HG_CORE_CUBE, NULL, NULL}, g, 3, NULL, 0),
        0);
    hg_kview ad[2] = {kern_dense_view(p, HG_F32, 2, sp), kern_dense_view(c, HG_F32, 2, sp)};
    ASSERT_EQ(
        kern_call(&(hg_kernel){"add", kern_add_tile, HG_CORE_VECTOR, NULL, NULL}, ad, 2, NULL, 0),
        0);
}

TEST(gemm_and_add_tiles_agree_on_every_path)
{
    test_rng r = test_seed(31);
    report_paths();
    /* m, n, k: bgemm's tiles (32, 128), row tails of the 6-row (AVX2) and
     * 12-row (AVX-512) blocks, column tails of 16 and 8 and under 8 after
     * 32-wide panels, a single element */
    static const size_t shapes[][3] = {{32, 32, 32}, {128, 128, 128}, {7, 29, 5},   {13, 24, 40},
                                       {1, 1, 1},    {5, 17, 64},     {23, 48, 16}, {15, 40, 9},
                                       {12, 33, 7},  {35, 61, 3}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        size_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        float *a = malloc(m * k * sizeof(float)), *b = malloc(k * n * sizeof(float));
        float *p[KERN_ISA_COUNT], *c[KERN_ISA_COUNT];
        for (int exact = 1; exact >= 0; exact--) {
            /* exact: multiples of 1/8 of at most 4 (bgemm's inputs), so every
             * order of sums gives the same bits; else random in [-1, 1) */
            for (size_t i = 0; i < m * k; i++)
                a[i] = exact ? (float)(test_rand(&r) % 64) / 8.0f - 4.0f
                             : (float)((double)test_rand(&r) / 2147483648.0 - 1.0);
            for (size_t i = 0; i < k * n; i++)
                b[i] = exact ? (float)(test_rand(&r) % 64) / 8.0f - 4.0f
                             : (float)((double)test_rand(&r) / 2147483648.0 - 1.0);
            for (int q = 0; q < KERN_ISA_COUNT; q++) {
                p[q] = malloc(m * n * sizeof(float));
                c[q] = malloc(m * n * sizeof(float));
                for (size_t i = 0; i < m * n; i++)
                    c[q][i] = (float)i * 0.25f; /* the ADD's C starts non-zero */
                if (!kern_force((kern_isa)q))
                    continue;
                gemm_run(a, b, m, n, k, p[q], c[q]);
                kern_force_auto();
                double worst = 0.0;
                for (size_t i = 0; i < m; i++) {
                    for (size_t j = 0; j < n; j++) {
                        double s = 0.0, mag = 0.0;
                        for (size_t kk = 0; kk < k; kk++) {
                            s += (double)a[i * k + kk] * b[kk * n + j];
                            mag += fabs((double)a[i * k + kk] * b[kk * n + j]);
                        }
                        worst = fmax(worst, fabs(p[q][i * n + j] - s) /
                                                ((double)k * 0x1p-24 * mag + 1e-30));
                    }
                }
                printf("     %zu x %zu x %zu %s: worst error %.3f of the bound (%s)\n", m, n, k,
                       exact ? "exact" : "random", worst, kern_isa_name((kern_isa)q));
                ASSERT(worst <= 1.0);
                if (exact) /* every path: the portable bits */
                    ASSERT(memcmp(p[q], p[0], m * n * sizeof(float)) == 0);
                /* the same P gives the same C on every path */
                memcpy(p[q], p[0], m * n * sizeof(float));
                for (size_t i = 0; i < m * n; i++)
                    c[q][i] = (float)i * 0.25f;
                kern_force((kern_isa)q);
                hg_kview ad[2] = {kern_dense_view(p[q], HG_F32, 2, (size_t[]){m, n}),
                                  kern_dense_view(c[q], HG_F32, 2, (size_t[]){m, n})};
                ASSERT_EQ(kern_call(&(hg_kernel){"add", kern_add_tile, HG_CORE_VECTOR, NULL, NULL},
                                    ad, 2, NULL, 0),
                          0);
                kern_force_auto();
                ASSERT(memcmp(c[q], c[0], m * n * sizeof(float)) == 0);
            }
            for (int q = 0; q < KERN_ISA_COUNT; q++) {
                free(p[q]);
                free(c[q]);
            }
        }
        free(a);
        free(b);
    }
}

/* ------------------------------------------------------- scenes, HG_KERNELS */

/* A scene's default case for two rounds through the scene runner. */
static int run_scene(const char *name, char *errbuf, size_t errlen)
{
    hg_scene_opts o = {.scene = name, .rounds = 2};
    return hg_scene_run(&o, errbuf, errlen);
}

TEST(every_scene_passes_golden_on_every_path)
{
    report_paths();
    for (int p = 0; p < KERN_ISA_COUNT; p++) {
        if (!kern_force((kern_isa)p))
            continue;
        for (uint32_t i = 0; i < hg_scene_count(); i++) {
            char errbuf[512];
            int rc = run_scene(hg_scene_name(i), errbuf, sizeof errbuf);
            printf("     %s on %s: %d %s\n", hg_scene_name(i), kern_path(), rc, errbuf);
            ASSERT_EQ(rc, HG_SCENE_OK);
        }
        kern_force_auto();
    }
}

/* HG_KERNELS as the test found it (NULL: unset), and back to that. */
static char *env_save(void)
{
    const char *old = getenv("HG_KERNELS");
    return old != NULL ? strdup(old) : NULL;
}

static void env_restore(char *saved)
{
    if (saved != NULL)
        setenv("HG_KERNELS", saved, 1);
    else
        unsetenv("HG_KERNELS");
    free(saved);
}

/* What a user sees: HG_KERNELS picks the path the run takes and reports, or
 * the run is a usage error naming the value and the missing feature, before
 * any case is made (the case-opening call refuses it too). */
TEST(hg_kernels_forces_a_path_or_is_a_usage_error)
{
    char msg[256], errbuf[512];
    char *saved = env_save();
    kern_force_auto();
    setenv("HG_KERNELS", "avx9000", 1);
    ASSERT_EQ(kern_env_check(msg, sizeof msg), 1);
    ASSERT_STR_CONTAINS(msg, "HG_KERNELS='avx9000'");
    ASSERT_STR_CONTAINS(msg, "portable, avx2 or avx512bf16");
    ASSERT_EQ(run_scene("vector_add", errbuf, sizeof errbuf), HG_SCENE_USAGE);
    ASSERT_STR_CONTAINS(errbuf, "avx9000");
    hg_scene_case *hc = NULL;
    ASSERT_NE(hg_scene_case_open("vector_add", NULL, 0, &hc, errbuf, sizeof errbuf), 0);
    ASSERT(hc == NULL);
    ASSERT_STR_CONTAINS(errbuf, "avx9000");
    for (int p = 0; p < KERN_ISA_COUNT; p++) {
        const char *name = kern_isa_name((kern_isa)p), *missing = kern_isa_missing((kern_isa)p);
        setenv("HG_KERNELS", name, 1);
        if (missing != NULL) {
            printf("     skipped: CPU lacks %s: checking that it is refused\n", name);
            ASSERT_EQ(kern_env_check(msg, sizeof msg), 1);
            ASSERT_STR_CONTAINS(msg, name);
            ASSERT_STR_CONTAINS(msg, missing);
            ASSERT_EQ(run_scene("vector_add", errbuf, sizeof errbuf), HG_SCENE_USAGE);
            ASSERT_STR_CONTAINS(errbuf, missing);
            continue;
        }
        ASSERT_EQ(kern_env_check(msg, sizeof msg), 0);
        ASSERT_STR_EQ(kern_path(), name);
        ASSERT_EQ(run_scene("vector_add", errbuf, sizeof errbuf), HG_SCENE_OK);
        ASSERT_STR_EQ(kern_path(), name);
    }
    env_restore(saved);
    ASSERT_EQ(kern_env_check(msg, sizeof msg), 0);
}

/* README: HG_KERNELS unset or empty takes the best path; a name is matched
 * exactly (lower case, no spaces), anything else is the usage error. */
TEST(hg_kernels_empty_is_unset_and_names_match_exactly)
{
    char msg[256], errbuf[512];
    char *saved = env_save();
    kern_force_auto();
    unsetenv("HG_KERNELS");
    ASSERT_EQ(kern_env_check(msg, sizeof msg), 0);
    const char *best = kern_path();
    setenv("HG_KERNELS", "", 1);
    ASSERT_EQ(kern_env_check(msg, sizeof msg), 0);
    ASSERT_STR_EQ(kern_path(), best);
    ASSERT_EQ(run_scene("vector_add", errbuf, sizeof errbuf), HG_SCENE_OK);
    ASSERT_STR_EQ(kern_path(), best);
    const char *bad[] = {"AVX2", " avx2", "avx2 ", "Portable", "avx512_bf16"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "HG_KERNELS='%s'", bad[i]);
        setenv("HG_KERNELS", bad[i], 1);
        ASSERT_EQ(kern_env_check(msg, sizeof msg), 1);
        ASSERT_STR_CONTAINS(msg, want);
        ASSERT_EQ(run_scene("vector_add", errbuf, sizeof errbuf), HG_SCENE_USAGE);
        ASSERT_STR_CONTAINS(errbuf, want);
    }
    env_restore(saved);
    ASSERT_EQ(kern_env_check(msg, sizeof msg), 0);
}

int main(void)
{
    return RUN_TESTS();
}
