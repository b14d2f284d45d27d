/*
 * dispatch.c: which code path the workload kernels take.  The build sets no
 * -march, so kernels with AVX-512 paths (the bf16 projection, attention's
 * inner loops) compile them with target attributes and ask here, at run
 * time, whether the CPU has them: AVX-512 F, BW, VL, DQ and BF16 (vdpbf16ps),
 * all or nothing, so every fast path may use any of them.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* 0: not decided yet, 1: AVX-512 BF16, 2: portable. */
static atomic_int path_choice;
/* Set by kern_force_portable: a test switch, not run state. */
static atomic_bool forced_portable;

static bool cpu_has_avx512bf16(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

bool kern_use_avx512bf16(void)
{
    if (atomic_load_explicit(&forced_portable, memory_order_relaxed))
        return false;
    int choice = atomic_load_explicit(&path_choice, memory_order_relaxed);
    if (choice == 0) {
        const char *env = getenv("HG_KERNELS");
        bool portable = env != NULL && strcmp(env, "portable") == 0;
        choice = !portable && cpu_has_avx512bf16() ? 1 : 2;
        atomic_store_explicit(&path_choice, choice, memory_order_relaxed);
    }
    return choice == 1;
}

const char *kern_path(void)
{
    return kern_use_avx512bf16() ? "avx512bf16" : "portable";
}

void kern_force_portable(bool on)
{
    atomic_store_explicit(&forced_portable, on, memory_order_relaxed);
}
