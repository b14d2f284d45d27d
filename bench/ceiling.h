/*
 * ceiling.h: the compute ceilings decode_bandwidth.c measures, the
 * projection's instruction in 12 independent register chains per path.
 */
#ifndef HG_BENCH_CEILING_H
#define HG_BENCH_CEILING_H

#include <stdint.h>

#include "../scenes/kernels/kernels.h"
#include "base/clock.h"

/* The projection's instruction at its ceiling, per second on this thread:
 * 12 independent chains in registers, vdpbf16ps on the avx512bf16 path,
 * the 8-lane vfmadd231ps on avx2 (none on the portable path: 0).  On 2
 * threads it is twice the 1-thread rate when both cores are ours; less
 * means another tenant has a core (these machines are shared), and a
 * compute-bound kernel then loses more than the stream does. */
typedef struct peak_job {
    double per_s;
} peak_job;

#define PEAK_ITERS 4000000L /* x 12 instructions: ~10 ms */
#if defined(__x86_64__) && defined(__GNUC__)
#define DP(i) "vdpbf16ps %%zmm30, %%zmm31, %%zmm" #i "\n\t"
__attribute__((target("avx512f,avx512bf16"))) static void *peak_dp(void *arg)
{
    peak_job *j = arg;
    __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31" ::
                         : "xmm30", "xmm31");
    uint64_t start = clock_now_ns();
    for (long i = 0; i < PEAK_ITERS; i++)
        __asm__ volatile(DP(0) DP(1) DP(2) DP(3) DP(4) DP(5) DP(6) DP(7) DP(8) DP(9) DP(10) DP(11)::
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                               "xmm8", "xmm9", "xmm10", "xmm11");
    j->per_s = 12.0 * (double)PEAK_ITERS / ((double)(clock_now_ns() - start) / 1e9);
    return NULL;
}

#define FMA(i) "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #i "\n\t"
__attribute__((target("avx2,fma"))) static void *peak_fma(void *arg)
{
    peak_job *j = arg;
    __asm__ volatile("vxorps %%ymm14, %%ymm14, %%ymm14\n\tvxorps %%ymm15, %%ymm15, %%ymm15" ::
                         : "xmm14", "xmm15");
    uint64_t start = clock_now_ns();
    for (long i = 0; i < PEAK_ITERS; i++)
        __asm__ volatile(FMA(0) FMA(1) FMA(2) FMA(3) FMA(4) FMA(5) FMA(6) FMA(7) FMA(8) FMA(9)
                             FMA(10) FMA(11)::
                                 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                                   "xmm8", "xmm9", "xmm10", "xmm11");
    j->per_s = 12.0 * (double)PEAK_ITERS / ((double)(clock_now_ns() - start) / 1e9);
    return NULL;
}
#endif

/* Weight bytes one ceiling instruction covers at 16 rows: vdpbf16ps does
 * 32 multiply-adds, 2 weights x 16 rows, per 4 weight bytes; an 8-lane FMA
 * 8 multiply-adds, 1 byte's share (16 bytes x 16 rows / 256). */
static double bytes_per_peak_instr(kern_isa path)
{
    return path == KERN_AVX512BF16 ? 4.0 : path == KERN_AVX2 ? 1.0 : 0.0;
}

#endif
