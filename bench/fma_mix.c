/*
 * fma_mix.c: what one instruction beside the FMAs costs on this CPU.
 *
 *     fma_mix [REPS (default 9)]
 *
 * The AVX2 kernels are bound by the FMA pipes (decode_bandwidth's ceiling:
 * 12 independent vfmadd231ps ymm chains in registers).  Whatever else a
 * kernel's loop does (widening bf16, loads, stores, sum trees) costs only as
 * far as it takes the FMAs' issue slots, and which instructions do that
 * differs between CPUs (on AMD Zen 3 a 256-bit store, vhaddps and vpmovzxwd
 * do, vpunpcklwd, vpslld and vpand do not).  So: the 12-FMA loop alone and
 * with N of one instruction added, alternating rep by rep in one process,
 * each rep's rate divided by the FMA-only loop's beside it; the median ratio,
 * and the FMA slots each added instruction took (12 (1 / ratio - 1) / N:
 * 0 when it hid beside the FMAs, 2 when it cost a cycle of both pipes).
 * The last rows are AVX2 projection loop steps, 24 or 48 FMAs each: the
 * kernel before 2b2b440 (a first pass widening 3 weight rows with unpacks
 * and storing them, three passes reading them back) against a pass of
 * scenes/kernels/proj_avx2.c's (unpacks in every pass, nothing stored), at
 * fixed addresses, then that pass walking a 1024-column block with x's 4
 * rows side by side, as proj_avx2.c lays them out, against x's rows 4 KiB
 * apart.  All data is in L1: this is the CPU's core, not its memory.  A
 * benchmark, not a test.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ITERS 1000000L

static float buf[4096] __attribute__((aligned(64)));

#define F12                                                                                        \
    "vfmadd231ps %%ymm14, %%ymm15, %%ymm0\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm1\n\t"             \
    "vfmadd231ps %%ymm14, %%ymm15, %%ymm2\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm3\n\t"             \
    "vfmadd231ps %%ymm14, %%ymm15, %%ymm4\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm5\n\t"             \
    "vfmadd231ps %%ymm14, %%ymm15, %%ymm6\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm7\n\t"             \
    "vfmadd231ps %%ymm14, %%ymm15, %%ymm8\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm9\n\t"             \
    "vfmadd231ps %%ymm14, %%ymm15, %%ymm10\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm11\n\t"
#define X4(ins) ins ins ins ins
/* the projection's steps: 3 weight rows in ymm12-14, x rows 1088 bytes apart into ymm15 */
#define P_F3(xo, a, b, c)                                                                          \
    "vmovaps " #xo "(%0), %%ymm15\n\tvfmadd231ps %%ymm12, %%ymm15, %%ymm" #a "\n\t"                \
    "vfmadd231ps %%ymm13, %%ymm15, %%ymm" #b "\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm" #c "\n\t"
#define P_STEP(xo)                                                                                 \
    P_F3(xo, 0, 1, 2) P_F3(1088 + xo, 3, 4, 5) P_F3(2176 + xo, 6, 7, 8) P_F3(3264 + xo, 9, 10, 11)
#define P_WLD(o)                                                                                   \
    "vmovaps 8192+" #o "(%0), %%ymm12\n\tvmovaps 9216+" #o "(%0), %%ymm13\n\t"                     \
    "vmovaps 10240+" #o "(%0), %%ymm14\n\t"
#define P_UNP(u)                                                                                   \
    "vpxor %%xmm15, %%xmm15, %%xmm15\n\t" u " 12288(%0), %%ymm15, %%ymm12\n\t" u                   \
    " 12800(%0), %%ymm15, %%ymm13\n\t" u " 13312(%0), %%ymm15, %%ymm14\n\t"
#define P_ST(o)                                                                                    \
    "vmovaps %%ymm12, 8192+" #o "(%0)\n\tvmovaps %%ymm13, 9216+" #o "(%0)\n\t"                     \
    "vmovaps %%ymm14, 10240+" #o "(%0)\n\t"

/* The pass walking a block: x at %0, its 4 rows 4160 bytes apart (S_ROWS)
 * or side by side per 8 columns (S_QUAD); 3 weight rows at %1, 10 KiB apart
 * (a 5120-column matrix's). */
#define S_UNP(u, wo)                                                                               \
    "vpxor %%xmm15, %%xmm15, %%xmm15\n\t" u " " #wo "(%1), %%ymm15, %%ymm12\n\t" u " 10240+" #wo   \
    "(%1), %%ymm15, %%ymm13\n\t" u " 20480+" #wo "(%1), %%ymm15, %%ymm14\n\t"
#define S_ROWS(xo)                                                                                 \
    P_F3(xo, 0, 1, 2) P_F3(4160 + xo, 3, 4, 5) P_F3(8320 + xo, 6, 7, 8) P_F3(12480 + xo, 9, 10, 11)
#define S_QUAD(xb)                                                                                 \
    P_F3(xb, 0, 1, 2) P_F3(32 + xb, 3, 4, 5) P_F3(64 + xb, 6, 7, 8) P_F3(96 + xb, 9, 10, 11)
#define S_BODY(X, b0, b1, b2, b3)                                                                  \
    S_UNP("vpunpcklwd", 0)                                                                         \
    X(b0) S_UNP("vpunpckhwd", 0) X(b1) S_UNP("vpunpcklwd", 32) X(b2) S_UNP("vpunpckhwd", 32) X(b3)

#define CLOBBERS                                                                                   \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",       \
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory"

/* One loop per row: its FMAs per second. */
#define MIX_LOOP(fn, body, fmas)                                                                   \
    __attribute__((target("avx2,fma"), noinline)) static double fn(void)                           \
    {                                                                                              \
        __asm__ volatile("vxorps %%ymm14, %%ymm14, %%ymm14\n\tvxorps %%ymm15, %%ymm15, %%ymm15" :: \
                             : "xmm14", "xmm15");                                                  \
        uint64_t t0 = clock_now_ns();                                                              \
        for (long i = 0; i < ITERS; i++)                                                           \
            __asm__ volatile(body::"r"(buf) : CLOBBERS);                                           \
        return (double)(fmas)*ITERS / ((double)(clock_now_ns() - t0) / 1e9);                       \
    }

MIX_LOOP(m_base, F12, 12)
MIX_LOOP(m_slld, F12 X4("vpslld $16, %%ymm14, %%ymm12\n\t"), 12)
MIX_LOOP(m_and, F12 X4("vpand %%ymm14, %%ymm15, %%ymm12\n\t"), 12)
MIX_LOOP(m_unp, F12 X4("vpunpcklwd %%ymm14, %%ymm15, %%ymm12\n\t"), 12)
MIX_LOOP(m_zx, F12 X4("vpmovzxwd %%xmm14, %%ymm12\n\t"), 12)
MIX_LOOP(m_perm, F12 X4("vperm2f128 $0x20, %%ymm14, %%ymm15, %%ymm12\n\t"), 12)
MIX_LOOP(m_hadd, F12 "vhaddps %%ymm14, %%ymm15, %%ymm12\n\tvhaddps %%ymm14, %%ymm15, %%ymm13\n\t",
         12)
MIX_LOOP(m_add, F12 X4("vaddps %%ymm14, %%ymm15, %%ymm12\n\t"), 12)
MIX_LOOP(m_load, F12 X4("vmovaps (%0), %%ymm12\n\tvmovaps 64(%0), %%ymm13\n\t"), 12)
MIX_LOOP(m_store,
         F12 "vmovaps %%ymm14, (%0)\n\tvmovaps %%ymm14, 64(%0)\n\tvmovaps %%ymm14, 128(%0)\n\t"
             "vmovaps %%ymm14, 192(%0)\n\t",
         12)
MIX_LOOP(m_bcast, F12 X4("vbroadcastss 4(%0), %%ymm12\n\t"), 12)
MIX_LOOP(m_pass, P_WLD(0) P_STEP(0) P_WLD(32) P_STEP(32), 24)
MIX_LOOP(m_first, P_UNP("vpunpcklwd") P_ST(0) P_STEP(0) P_UNP("vpunpckhwd") P_ST(32) P_STEP(32), 24)
MIX_LOOP(m_rewiden, P_UNP("vpunpcklwd") P_STEP(0) P_UNP("vpunpckhwd") P_STEP(32), 24)

static float xs[4 * 1040] __attribute__((aligned(64)));
static uint16_t ws[3 * 5120] __attribute__((aligned(64)));

/* 32 columns an asm statement, 32 of them over the block; xstep: x's bytes
 * a statement. */
#define STREAM_LOOP(fn, body, xstep)                                                               \
    __attribute__((target("avx2,fma"), noinline)) static double fn(void)                           \
    {                                                                                              \
        uint64_t t0 = clock_now_ns();                                                              \
        for (long i = 0; i < ITERS / 32; i++) {                                                    \
            for (int k = 0; k < 32; k++)                                                           \
                __asm__ volatile(body::"r"((const char *)xs + k * (xstep)), "r"(ws + k * 32)       \
                                 : CLOBBERS);                                                      \
        }                                                                                          \
        return 48.0 * (double)(ITERS / 32 * 32) / ((double)(clock_now_ns() - t0) / 1e9);           \
    }

STREAM_LOOP(m_rows, S_BODY(S_ROWS, 0, 32, 64, 96), 128)
STREAM_LOOP(m_quad, S_BODY(S_QUAD, 0, 128, 256, 384), 512)

typedef struct mix_row {
    const char *name;
    double (*fn)(void);
    int added; /* instructions added to 12 FMAs; 0: a loop step of its own */
} mix_row;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    if (reps < 1 || reps > 99) {
        fprintf(stderr, "fma_mix: REPS must be 1..99, not '%s'\n", argv[1]);
        return 2;
    }
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "fma_mix: this CPU lacks avx2 or fma (cpuid)\n");
        return 2;
    }
    static const mix_row rows[] = {
        {"vpslld ymm (shift)", m_slld, 4},
        {"vpand ymm", m_and, 4},
        {"vpunpcklwd ymm", m_unp, 4},
        {"vpmovzxwd xmm -> ymm", m_zx, 4},
        {"vperm2f128", m_perm, 4},
        {"vhaddps ymm", m_hadd, 2},
        {"vaddps ymm", m_add, 4},
        {"vmovaps load (L1)", m_load, 8},
        {"vmovaps store (L1)", m_store, 4},
        {"vbroadcastss from memory", m_bcast, 4},
        {"old projection, passes 2-4: 7 loads / 12 FMAs", m_pass, 0},
        {"old projection, pass 1: + 3 unpacks, 3 stores", m_first, 0},
        {"projection pass: unpacks, no stores", m_rewiden, 0},
        {"its block, x's rows 4 KiB apart", m_rows, 0},
        {"its block, x's 4 rows side by side", m_quad, 0},
    };
    size_t n = sizeof rows / sizeof rows[0];
    double ratio[sizeof rows / sizeof rows[0]][99], base[99];
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++) {
            double b = m_base(); /* beside each row: the machine is shared */
            ratio[i][r] = rows[i].fn() / b;
            if (i == 0)
                base[r] = b;
        }
    }
    qsort(base, (size_t)reps, sizeof(double), cmp_double);
    printf("12 vfmadd231ps ymm alone: %.2f G/s on this thread (median of %d)\n",
           base[reps / 2] / 1e9, reps);
    printf("%-46s %6s %7s %s\n", "added to the 12 FMAs", "count", "ratio", "FMA slots each");
    for (size_t i = 0; i < n; i++) {
        qsort(ratio[i], (size_t)reps, sizeof(double), cmp_double);
        double med = ratio[i][reps / 2];
        if (rows[i].added > 0)
            printf("%-46s %6d %7.2f %.2f\n", rows[i].name, rows[i].added, med,
                   12.0 * (1.0 / med - 1.0) / rows[i].added);
        else
            printf("%-46s %6s %7.2f (of the FMA-only rate)\n", rows[i].name, "", med);
    }
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "fma_mix: needs x86-64 and GCC or clang\n");
    return 2;
}
#endif
