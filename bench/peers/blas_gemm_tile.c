/*
 * blas_gemm_tile.c: bgemm's GEMM tile kernel (kern_gemm_tile, the path
 * HG_KERNELS picks) against a BLAS library's single-thread cblas_sgemm on
 * the same square tile, alternating in one process, for issue 27's goal
 * (>= 0.8x).  Prints GFLOP/s of both and their ratio per round, and the
 * largest difference of the two products (0 on these inputs: multiples of
 * 1/4 and 1/2, whose sums are exact in f32).
 *
 *     cc -O2 -Iinclude -Iscenes/kernels -o blas_gemm_tile bench/peers/blas_gemm_tile.c \
 *         build-rel/libhostgraph_scenes.a build-rel/libhostgraph.a -lopenblas -lm -lpthread -ldl
 *     HG_KERNELS=avx512bf16 ./blas_gemm_tile 5
 *     HG_KERNELS=avx2 OPENBLAS_CORETYPE=Haswell ./blas_gemm_tile 5   # OpenBLAS on AVX2 too
 *
 * usage: blas_gemm_tile [ROUNDS]      (tiles 32 and 128, bgemm's default and the reference case)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

void openblas_set_num_threads(int n); /* OpenBLAS's, not in cblas.h everywhere */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static hg_kview square(float *p, size_t n)
{
    hg_kview v;
    memset(&v, 0, sizeof v);
    v.data = p;
    v.dtype = HG_F32;
    v.ndims = 2;
    v.shape[0] = v.shape[1] = v.strides[0] = n;
    v.strides[1] = 1;
    return v;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1) {
        fprintf(stderr, "usage: %s [ROUNDS >= 1]\n", argv[0]);
        return 2;
    }
    char msg[256];
    if (kern_env_check(msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 2;
    }
    openblas_set_num_threads(1);
    printf("kernels: %s, 1 thread each\n", kern_isa_name(kern_isa_now()));
    static const size_t tiles[] = {32, 128};
    for (size_t ti = 0; ti < 2; ti++) {
        size_t t = tiles[ti];
        float *a = malloc(t * t * sizeof(float)), *b = malloc(t * t * sizeof(float));
        float *p = malloc(t * t * sizeof(float)), *q = malloc(t * t * sizeof(float));
        if (a == NULL || b == NULL || p == NULL || q == NULL)
            return 1;
        for (size_t i = 0; i < t * t; i++) {
            a[i] = (float)(i % 7) * 0.25f - 0.5f;
            b[i] = (float)(i % 5) * 0.5f - 1.0f;
        }
        hg_kview args[3] = {square(a, t), square(b, t), square(p, t)};
        hg_kernel_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.args = args;
        ctx.nargs = 3;
        long reps = (long)(400000000.0 / (2.0 * (double)(t * t * t))) + 1; /* ~0.4 GFLOP a side */
        double flop = 2.0 * (double)(t * t * t) * (double)reps;
        for (int r = 0; r < rounds; r++) {
            double s = now_s();
            for (long i = 0; i < reps; i++)
                kern_gemm_tile(&ctx);
            double th = now_s() - s;
            s = now_s();
            for (long i = 0; i < reps; i++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)t, (int)t, (int)t, 1.0f,
                            a, (int)t, b, (int)t, 0.0f, q, (int)t);
            double tb = now_s() - s;
            double diff = 0.0;
            for (size_t i = 0; i < t * t; i++) {
                double d = (double)p[i] - (double)q[i];
                diff = d > diff ? d : -d > diff ? -d : diff;
            }
            printf("tile %zu: hostgraph %.1f GFLOP/s, BLAS %.1f GFLOP/s, ratio %.2f (largest "
                   "difference %g)\n",
                   t, flop / th * 1e-9, flop / tb * 1e-9, tb / th, diff);
        }
        free(a);
        free(b);
        free(p);
        free(q);
    }
    return 0;
}
