/*
 * hostreg_test.c: two live host buffers never overlap.  Freshness lives on
 * the registration, so the same memory registered twice would let a write
 * declared through one leave the other's resident copy "fresh"; registering
 * overlapping memory fails with HG_EINVAL and hg_last_errmsg names the
 * buffer that already holds it.  The registry's cost is counted: node visits
 * per insert and removal stay within c * log2(n) at 10^5 live buffers.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hostgraph.h"
#include "tensor/hostreg.h"
#include "testlib.h"

#define CHUNK 64
static char arena[16 * CHUNK];

TEST(wrapping_memory_twice_fails_naming_the_existing_buffer)
{
    hg_hostbuf *whole = NULL, *half = NULL;
    ASSERT_OK(hg_hostbuf_wrap(arena, 8 * CHUNK, &whole));
    ASSERT_STR_EQ(hg_last_errmsg(), "");
    ASSERT_EQ(hg_hostbuf_wrap(arena, 4 * CHUNK, &half), HG_EINVAL);
    ASSERT(half == NULL);
    char want[64];
    snprintf(want, sizeof want, "host buffer %llu", (unsigned long long)hg_hostbuf_id(whole));
    ASSERT_STR_CONTAINS(hg_last_errmsg(), want);
    snprintf(want, sizeof want, "[%p, %p)", (void *)arena, (void *)(arena + 8 * CHUNK));
    ASSERT_STR_CONTAINS(hg_last_errmsg(), want); /* the existing one's range */
    snprintf(want, sizeof want, "[%p, %p)", (void *)arena, (void *)(arena + 4 * CHUNK));
    ASSERT_STR_CONTAINS(hg_last_errmsg(), want); /* and the new one's */
    /* Any overlap, at either end or inside, is refused. */
    ASSERT_EQ(hg_hostbuf_wrap(arena + 7 * CHUNK, 2 * CHUNK, &half), HG_EINVAL);
    ASSERT_EQ(hg_hostbuf_wrap(arena + CHUNK, 1, &half), HG_EINVAL);
    /* Touching is not overlapping; zero bytes overlap nothing. */
    ASSERT_OK(hg_hostbuf_wrap(arena + 8 * CHUNK, CHUNK, &half));
    hg_hostbuf *empty = NULL;
    ASSERT_OK(hg_hostbuf_wrap(arena + CHUNK, 0, &empty));
    hg_hostbuf_destroy(empty);
    hg_hostbuf_destroy(half);
    /* Once the first is destroyed, its memory may be registered again. */
    hg_hostbuf_destroy(whole);
    ASSERT_OK(hg_hostbuf_wrap(arena, 4 * CHUNK, &half));
    hg_hostbuf_destroy(half);
}

TEST(created_memory_is_registered_too)
{
    hg_hostbuf *created = NULL, *again = NULL;
    ASSERT_OK(hg_hostbuf_create(256, &created));
    ASSERT_EQ(hg_hostbuf_wrap(hg_hostbuf_data(created), 16, &again), HG_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "host buffer %llu", (unsigned long long)hg_hostbuf_id(created));
    ASSERT_STR_CONTAINS(hg_last_errmsg(), want);
    hg_hostbuf_destroy(created);
}

TEST(last_errmsg_names_the_argument)
{
    hg_hostbuf *hb = NULL;
    ASSERT_EQ(hg_hostbuf_wrap(NULL, 4, &hb), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_last_errmsg(), "data");
    ASSERT_EQ(hg_hostbuf_wrap(arena, 4, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_last_errmsg(), "out");
    ASSERT_EQ(hg_hostbuf_create(4, NULL), HG_EINVAL);
    ASSERT_STR_CONTAINS(hg_last_errmsg(), "out");
    ASSERT_OK(hg_hostbuf_create(4, &hb)); /* a success clears it */
    ASSERT_STR_EQ(hg_last_errmsg(), "");
    hg_hostbuf_destroy(hb);
}

static void *fail_once(void *arg)
{
    hg_hostbuf *hb;
    (void)arg;
    return hg_hostbuf_wrap(NULL, 1, &hb) == HG_EINVAL && *hg_last_errmsg() ? (void *)1 : NULL;
}

TEST(last_errmsg_is_per_thread)
{
    hg_hostbuf *hb = NULL;
    ASSERT_OK(hg_hostbuf_create(1, &hb));
    pthread_t t;
    void *failed = NULL;
    ASSERT_OK(pthread_create(&t, NULL, fail_once, NULL));
    ASSERT_OK(pthread_join(t, &failed));
    ASSERT(failed != NULL);
    ASSERT_STR_EQ(hg_last_errmsg(), ""); /* that thread's failure is its own */
    hg_hostbuf_destroy(hb);
}

#define THREADS 4
static char shared_bytes[THREADS][256];

/* Each thread registers and releases its own chunks while the others do. */
static void *churn(void *arg)
{
    char *mine = arg;
    for (int i = 0; i < 2000; i++) {
        hg_hostbuf *a = NULL, *b = NULL, *c = NULL;
        if (hg_hostbuf_wrap(mine, 128, &a) != 0 || hg_hostbuf_wrap(mine + 128, 128, &b) != 0 ||
            hg_hostbuf_wrap(mine + 64, 128, &c) != HG_EINVAL)
            return NULL;
        hg_hostbuf_destroy(a);
        hg_hostbuf_destroy(b);
    }
    return mine;
}

TEST(threads_register_and_release_concurrently)
{
    size_t base = hostreg_live();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ASSERT_OK(pthread_create(&t[i], NULL, churn, shared_bytes[i]));
    for (int i = 0; i < THREADS; i++) {
        void *ok = NULL;
        ASSERT_OK(pthread_join(t[i], &ok));
        ASSERT(ok == shared_bytes[i]);
    }
    ASSERT_UEQ(hostreg_live(), base);
}

/* ceil(log2(n + 2)): the AVL height bound is 1.44 of it per descent. */
static uint64_t log2_up(size_t n)
{
    uint64_t bits = 0;
    for (size_t v = n + 1; v != 0; v >>= 1)
        bits++;
    return bits;
}

#define MANY  100000
#define SMALL 16
static char many_bytes[MANY * SMALL];
static hg_hostbuf *many[MANY];

/* Visits of one registry operation (an add's overlap check and insertion, or
 * a removal): within 3 log2(n + 2) + 2, two AVL descents, at n = 10^5 live
 * buffers, where a list would visit up to n. */
#define ASSERT_LOGARITHMIC(before, n) ASSERT_ULE(hostreg_visits() - (before), 3 * log2_up(n) + 2)

TEST(registry_cost_is_logarithmic_in_live_buffers)
{
    test_rng rng = test_seed(20261201);
    size_t base = hostreg_live();
    /* Ascending addresses: the worst order for an unbalanced tree. */
    for (size_t i = 0; i < MANY; i++) {
        uint64_t v = hostreg_visits();
        ASSERT_OK(hg_hostbuf_wrap(many_bytes + i * SMALL, SMALL, &many[i]));
        ASSERT_LOGARITHMIC(v, base + i);
    }
    ASSERT_UEQ(hostreg_live(), base + MANY);
    /* Overlapping probes anywhere are refused, each in one descent. */
    for (int k = 0; k < 1000; k++) {
        size_t at = test_rand64(&rng) % (MANY * SMALL - SMALL);
        hg_hostbuf *probe = NULL;
        uint64_t v = hostreg_visits();
        ASSERT_EQ(hg_hostbuf_wrap(many_bytes + at, SMALL, &probe), HG_EINVAL);
        ASSERT_LOGARITHMIC(v, base + MANY);
    }
    /* Destroyed in a random order. */
    for (size_t i = MANY - 1; i > 0; i--) {
        size_t j = (size_t)(test_rand64(&rng) % (i + 1));
        hg_hostbuf *t = many[i];
        many[i] = many[j];
        many[j] = t;
    }
    for (size_t i = 0; i < MANY; i++) {
        uint64_t v = hostreg_visits();
        hg_hostbuf_destroy(many[i]);
        ASSERT_LOGARITHMIC(v, base + MANY - i);
    }
    ASSERT_UEQ(hostreg_live(), base);
    hg_hostbuf *again = NULL; /* all of it is free again */
    ASSERT_OK(hg_hostbuf_wrap(many_bytes, sizeof many_bytes, &again));
    hg_hostbuf_destroy(again);
}

int main(void)
{
    return RUN_TESTS();
}
