/*
 * dispatch.c: which code path the workload kernels take.  The build sets no
 * -march, so the fast paths compile with target attributes and are chosen
 * here, at run time, from the CPU's features:
 *
 *   avx512bf16  AVX-512 F, BW, VL, DQ and BF16 (vdpbf16ps), and the avx2
 *               level's features, all or nothing, so every path of that
 *               level may use any of them;
 *   avx2        AVX2, FMA and F16C (a host with AVX-512 but no BF16, such as
 *               Skylake-SP or Ice Lake, takes it too);
 *   portable    plain C, any CPU.
 *
 * HG_KERNELS=portable|avx2|avx512bf16 forces one.  kern_env_check, which the
 * scene runner calls before it makes a case, refuses an unknown value or a
 * path the CPU lacks (naming the missing cpuid feature); kernels called
 * without that check (a library's own graph) take the portable path for such
 * a value rather than guess.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

static const char *const isa_names[KERN_ISA_COUNT] = {"portable", "avx2", "avx512bf16"};

/* -1: not decided yet, else the kern_isa the environment and CPU pick. */
static atomic_int env_choice = -1;
/* -1: none, else the path kern_force set: a test switch, not run state. */
static atomic_int forced = -1;

const char *kern_isa_name(kern_isa p)
{
    return p < KERN_ISA_COUNT ? isa_names[p] : "?";
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

/* F16C from cpuid leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
 * has no "f16c".  The OS's saving of the AVX state, which F16C's VEX forms
 * need too, is checked by the "avx2" test before it. */
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

/* The first of the features that is missing, by name (the builtin takes
 * only a literal). */
#define KERN_NEED(feature, name)                                                                   \
    if (!__builtin_cpu_supports(feature))                                                          \
    return name
#define KERN_NEED_F16C()                                                                           \
    if (!cpu_has_f16c())                                                                           \
    return "f16c"
#endif

const char *kern_isa_missing(kern_isa p)
{
    if (p == KERN_PORTABLE)
        return NULL;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (p == KERN_AVX2) {
        KERN_NEED("avx2", "avx2");
        KERN_NEED("fma", "fma");
        KERN_NEED_F16C();
        return NULL;
    }
    if (p == KERN_AVX512BF16) { /* the avx2 level too: its kernels without an AVX-512 path
                                   (bgemm's tiles) take the AVX2 one */
        KERN_NEED("avx2", "avx2");
        KERN_NEED_F16C();
        KERN_NEED("avx512f", "avx512f");
        KERN_NEED("avx512bw", "avx512bw");
        KERN_NEED("avx512vl", "avx512vl");
        KERN_NEED("avx512dq", "avx512dq");
        KERN_NEED("fma", "fma");
        /* /proc/cpuinfo's spelling of the flag */
        KERN_NEED("avx512bf16", "avx512_bf16");
        return NULL;
    }
    return "?";
#else
    return p == KERN_AVX2 ? "avx2" : p == KERN_AVX512BF16 ? "avx512_bf16" : "?";
#endif
}

/* The path HG_KERNELS names (set: false when unset), or -1 for a name that
 * is none of them. */
static int env_path(bool *set)
{
    const char *env = getenv("HG_KERNELS");
    *set = env != NULL && *env != '\0';
    if (!*set)
        return -1;
    for (int i = 0; i < KERN_ISA_COUNT; i++) {
        if (strcmp(env, isa_names[i]) == 0)
            return i;
    }
    return -1;
}

static kern_isa best_path(void)
{
    if (kern_isa_missing(KERN_AVX512BF16) == NULL)
        return KERN_AVX512BF16;
    return kern_isa_missing(KERN_AVX2) == NULL ? KERN_AVX2 : KERN_PORTABLE;
}

int kern_env_check(char *msg, size_t len)
{
    bool set;
    int p = env_path(&set);
    if (set && p < 0) {
        snprintf(msg, len, "HG_KERNELS='%s': want portable, avx2 or avx512bf16",
                 getenv("HG_KERNELS"));
        return 1;
    }
    const char *missing = set ? kern_isa_missing((kern_isa)p) : NULL;
    if (missing != NULL) {
        snprintf(msg, len, "HG_KERNELS=%s: this CPU lacks %s (cpuid), so it cannot take that path",
                 isa_names[p], missing);
        return 1;
    }
    /* decided again at each check, so a process that changes HG_KERNELS
     * between runs (Python's os.environ) runs and reports the new path */
    atomic_store_explicit(&env_choice, set ? p : (int)best_path(), memory_order_relaxed);
    return 0;
}

kern_isa kern_isa_now(void)
{
    int f = atomic_load_explicit(&forced, memory_order_relaxed);
    if (f >= 0)
        return (kern_isa)f;
    int choice = atomic_load_explicit(&env_choice, memory_order_relaxed);
    if (choice < 0) {
        bool set;
        int p = env_path(&set);
        if (!set)
            choice = (int)best_path();
        else /* a bad value: kern_env_check refuses it where a runner asks */
            choice = p >= 0 && kern_isa_missing((kern_isa)p) == NULL ? p : KERN_PORTABLE;
        atomic_store_explicit(&env_choice, choice, memory_order_relaxed);
    }
    return (kern_isa)choice;
}

bool kern_use_avx512bf16(void)
{
    return kern_isa_now() == KERN_AVX512BF16;
}

const char *kern_path(void)
{
    return isa_names[kern_isa_now()];
}

bool kern_force(kern_isa p)
{
    if (p >= KERN_ISA_COUNT || kern_isa_missing(p) != NULL)
        return false;
    atomic_store_explicit(&forced, (int)p, memory_order_relaxed);
    return true;
}

void kern_force_auto(void)
{
    atomic_store_explicit(&forced, -1, memory_order_relaxed);
}

void kern_force_portable(bool on)
{
    if (on)
        kern_force(KERN_PORTABLE);
    else
        kern_force_auto();
}
