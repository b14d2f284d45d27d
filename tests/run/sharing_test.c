/*
 * sharing_test.c: one device, several runners, each in its own thread, for
 * hundreds of rounds.  Every run is correct, none hangs, and each run's stats
 * count that run's copies and allocations only, although the others copy and
 * allocate on the same device at the same time.  Runs under ThreadSanitizer
 * in tests/run_all.sh, once per backend (test_device.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "hostgraph.h"
#include "test_device.h"
#include "testlib.h"

enum { ROUNDS = 200, MAX_RUNNERS = 4 };

/* out[i] = in[i] + k, where k is the runner's index (scalar 0). */
static int k_add(const hg_kernel_ctx *ctx)
{
    const int32_t *in = ctx->args[0].data;
    int32_t *out = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        out[i] = in[i] + (int32_t)ctx->scalars[0];
    return 0;
}
static const hg_kernel K_ADD = {
    "add", k_add, HG_CORE_VECTOR,
    "__kernel void add(HG_STATUS_ARGS, HG_TENSOR(int, in), HG_TENSOR(int, out), ulong k)\n"
    "{ size_t i = get_global_id(0); HG_PTR(out)[i] = HG_PTR(in)[i] + (int)k; }",
    "add"};

/* Tiles the arg into four tasks, so the graphs of the runners interleave on
 * the cores' queues if they ever share them. */
static int orch_add(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *in, *out, *k;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    hg_orch_arg(o, 2, &k);
    size_t n = in->tensor.shape[0], tile = n / 4;
    for (size_t t = 0; t < 4; t++) {
        hg_task_arg ta[2] = {{0, HG_IN, {0}}, {1, HG_OUT, {0}}};
        int rc = hg_tensor_slice(&in->tensor, 0, t * tile, tile, &ta[0].view);
        if (rc == 0)
            rc = hg_tensor_slice(&out->tensor, 0, t * tile, tile, &ta[1].view);
        uint64_t scalar = k->scalar;
        hg_task_desc d = {&K_ADD, ta, 2, &scalar, 1, NULL, 0};
        if (rc == 0)
            rc = hg_task_submit(o, &d, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

typedef struct worker {
    hg_device *dev;
    uint32_t index;
    size_t n; /* elements; differs per runner, so byte counts tell runs apart */
    char why[256];
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    hg_runner *r = NULL;
    hg_hostbuf *in = NULL, *out = NULL;
    const size_t bytes = w->n * sizeof(int32_t);
    if (hg_runner_open(w->dev, &r) || hg_hostbuf_create(bytes, &in) ||
        hg_hostbuf_create(bytes, &out)) {
        snprintf(w->why, sizeof w->why, "setup failed");
        goto done;
    }
    hg_arg args[3] = {{"in", HG_IN, {0}, 0, HG_STAGED},
                      {"out", HG_OUT, {0}, 0, HG_STAGED},
                      {"k", HG_SCALAR, {0}, 0, HG_STAGED}};
    hg_tensor_host(&args[0].tensor, in, HG_I32, 1, &w->n);
    hg_tensor_host(&args[1].tensor, out, HG_I32, 1, &w->n);
    args[2].scalar = w->index;
    hg_callable c = {"add", orch_add, NULL};
    for (uint32_t round = 0; round < ROUNDS; round++) {
        int32_t *pin = hg_hostbuf_data(in);
        for (size_t i = 0; i < w->n; i++)
            pin[i] = (int32_t)(round * 1000 + i);
        hg_hostbuf_mark_written(in, 0, bytes);
        hg_run_stats st;
        int rc = hg_runner_run(r, &c, args, 3, &st);
        if (rc != 0) {
            snprintf(w->why, sizeof w->why, "round %u: %s", round, hg_runner_errmsg(r));
            goto done;
        }
        const int32_t *pout = hg_hostbuf_data(out);
        for (size_t i = 0; i < w->n; i++)
            if (pout[i] != (int32_t)(round * 1000 + i + w->index)) {
                snprintf(w->why, sizeof w->why, "round %u: out[%zu] = %d", round, i, pout[i]);
                goto done;
            }
        /* This run's own bytes: one upload of in, one copy back of out, and
         * the retained buffer allocated in round 0 only. */
        if (st.h2d_bytes != bytes || st.d2h_bytes != bytes || st.h2d_copies != 1 ||
            st.d2h_copies != 1 || st.device_allocs != (round == 0)) {
            snprintf(w->why, sizeof w->why,
                     "round %u: stats h2d %llu/%llu d2h %llu/%llu allocs %llu, want %zu bytes",
                     round, (unsigned long long)st.h2d_bytes, (unsigned long long)st.h2d_copies,
                     (unsigned long long)st.d2h_bytes, (unsigned long long)st.d2h_copies,
                     (unsigned long long)st.device_allocs, bytes);
            goto done;
        }
    }
done:
    hg_runner_close(r);
    hg_hostbuf_destroy(in);
    hg_hostbuf_destroy(out);
    return NULL;
}

static void share_device(const char *backend, uint32_t nrunners)
{
    hg_device *dev = test_device_on(backend, "cores=4");
    ASSERT(dev != NULL);
    worker w[MAX_RUNNERS];
    pthread_t th[MAX_RUNNERS];
    for (uint32_t i = 0; i < nrunners; i++) {
        w[i] = (worker){.dev = dev, .index = i, .n = 1024 * (i + 1), .why = ""};
        ASSERT_OK(pthread_create(&th[i], NULL, worker_main, &w[i]));
    }
    for (uint32_t i = 0; i < nrunners; i++)
        pthread_join(th[i], NULL);
    for (uint32_t i = 0; i < nrunners; i++)
        if (w[i].why[0] != '\0')
            TEST_FAIL_("runner %u: %s", i, w[i].why);
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    ASSERT_UEQ(c.live_bytes, 0); /* every runner gave its memory back */
    hg_device_close(dev);
}

TEST_EACH_BACKEND(two_runners_share_one_device)
{
    share_device(backend, 2);
}

TEST_EACH_BACKEND(four_runners_share_one_device)
{
    share_device(backend, 4);
}

int main(void)
{
    return RUN_TESTS();
}
