/*
 * testlib.h: hostgraph's tiny test runner (in the manner of libuv's).
 *
 *     TEST(name) { ASSERT_EQ(1, 1); }
 *     int main(void) { return RUN_TESTS(); }
 *
 * TEST registers the function through a constructor; RUN_TESTS runs every
 * registered test (or only those named in HG_TEST_FILTER, a substring) and
 * prints "N passed, N failed".  An ASSERT that fails prints file:line and the
 * values, and returns from the test.  More tests than TEST_MAX fail the run
 * instead of being dropped.
 *
 * Random tests own their generator: `test_rng r = test_seed(42);` gives the
 * test its own stream, seeded with 42 unless HG_TEST_SEED overrides it, and
 * prints the seed, so a failure replays in isolation with
 * HG_TEST_FILTER=name HG_TEST_SEED=seed.
 */
#ifndef HG_TESTLIB_H
#define HG_TESTLIB_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* UNDER_TSAN: defined in a ThreadSanitizer build (gcc and clang), for the
 * tests that run fewer repeats there and say so. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

typedef void (*test_fn)(void);

struct test_entry {
    const char *name;
    test_fn fn;
};

#define TEST_MAX 512
static struct test_entry test_table[TEST_MAX];
static int test_count;
static int test_dropped; /* registrations past TEST_MAX: the run fails */
static int test_failed_now;
static const char *test_current;

static inline void test_register(const char *name, test_fn fn)
{
    if (test_count < TEST_MAX) {
        test_table[test_count].name = name;
        test_table[test_count].fn = fn;
        test_count++;
    } else {
        test_dropped++;
    }
}

/* A test's own random stream (splitmix64 over a seed). */
typedef struct test_rng {
    uint64_t state;
    uint64_t seed;
} test_rng;

/* The stream for the running test: `def`, or HG_TEST_SEED when set.  Prints
 * the seed so that any failure can be replayed alone. */
static inline test_rng test_seed(uint64_t def)
{
    const char *env = getenv("HG_TEST_SEED");
    test_rng r = {.seed = def};
    if (env != NULL && *env != '\0')
        r.seed = strtoull(env, NULL, 0);
    r.state = r.seed;
    printf("     %s: seed %" PRIu64 " (replay: HG_TEST_FILTER=%s HG_TEST_SEED=%" PRIu64 ")\n",
           test_current ? test_current : "?", r.seed, test_current ? test_current : "?", r.seed);
    return r;
}

static inline uint64_t test_rand64(test_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint32_t test_rand(test_rng *r)
{
    return (uint32_t)(test_rand64(r) >> 32);
}

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void test_reg_##name(void)                                 \
    {                                                                                              \
        test_register(#name, test_##name);                                                         \
    }                                                                                              \
    static void test_##name(void)

#define TEST_FAIL_(...)                                                                            \
    do {                                                                                           \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                                          \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        test_failed_now = 1;                                                                       \
        return;                                                                                    \
    } while (0)

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            TEST_FAIL_("ASSERT(%s) failed", #cond);                                                \
    } while (0)

#define ASSERT_INT_OP_(a, op, b)                                                                   \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        if (!(va_ op vb_))                                                                         \
            TEST_FAIL_("%s %s %s failed: %lld vs %lld", #a, #op, #b, va_, vb_);                    \
    } while (0)

#define ASSERT_UINT_OP_(a, op, b)                                                                  \
    do {                                                                                           \
        unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b);           \
        if (!(va_ op vb_))                                                                         \
            TEST_FAIL_("%s %s %s failed: %llu vs %llu", #a, #op, #b, va_, vb_);                    \
    } while (0)

#define ASSERT_EQ(a, b)  ASSERT_INT_OP_(a, ==, b)
#define ASSERT_NE(a, b)  ASSERT_INT_OP_(a, !=, b)
#define ASSERT_LT(a, b)  ASSERT_INT_OP_(a, <, b)
#define ASSERT_LE(a, b)  ASSERT_INT_OP_(a, <=, b)
#define ASSERT_GT(a, b)  ASSERT_INT_OP_(a, >, b)
#define ASSERT_GE(a, b)  ASSERT_INT_OP_(a, >=, b)
#define ASSERT_UEQ(a, b) ASSERT_UINT_OP_(a, ==, b)
#define ASSERT_ULE(a, b) ASSERT_UINT_OP_(a, <=, b)
#define ASSERT_UGE(a, b) ASSERT_UINT_OP_(a, >=, b)
#define ASSERT_UGT(a, b) ASSERT_UINT_OP_(a, >, b)
#define ASSERT_OK(expr)  ASSERT_EQ((expr), 0)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        if (sa_ == NULL || sb_ == NULL || strcmp(sa_, sb_) != 0)                                   \
            TEST_FAIL_("%s == %s failed: \"%s\" vs \"%s\"", #a, #b, sa_ ? sa_ : "(null)",          \
                       sb_ ? sb_ : "(null)");                                                      \
    } while (0)

#define ASSERT_STR_CONTAINS(hay, needle)                                                           \
    do {                                                                                           \
        const char *sh_ = (hay), *sn_ = (needle);                                                  \
        if (sh_ == NULL || strstr(sh_, sn_) == NULL)                                               \
            TEST_FAIL_("\"%s\" does not contain \"%s\"", sh_ ? sh_ : "(null)", sn_);               \
    } while (0)

static inline int test_run_all(void)
{
    const char *filter = getenv("HG_TEST_FILTER");
    int passed = 0, failed = 0;
    for (int i = 0; i < test_count; i++) {
        if (filter && *filter && strstr(test_table[i].name, filter) == NULL)
            continue;
        test_failed_now = 0;
        test_current = test_table[i].name;
        test_table[i].fn();
        if (test_failed_now) {
            printf("FAIL %s\n", test_table[i].name);
            failed++;
        } else {
            printf("ok   %s\n", test_table[i].name);
            passed++;
        }
        fflush(stdout);
    }
    if (test_dropped > 0) {
        printf("FAIL %d tests registered past TEST_MAX (%d): raise it\n", test_dropped, TEST_MAX);
        failed += test_dropped;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}

#define RUN_TESTS() test_run_all()

#endif
