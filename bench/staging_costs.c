/*
 * staging_costs.c: what the staging guarantees cost, measured side by side.
 *
 *   1. All-or-nothing copy-back: a run whose graph leaves an INOUT arg of S
 *      bytes as it is (so copy-back is all the run moves) against a plain
 *      device -> host copy of the same S bytes straight into the host buffer
 *      (what copy-back did before it staged).  S = 4 MiB is bgemm's
 *      staging-heavy C (1024 x 1024 f32), 16 MiB its 2048^3 C.
 *   2. Poisoning OUT slices at bind: bind of an S-byte OUT arg (a device
 *      fill) against bind of an S-byte IN arg (a host -> device copy).
 *   3. A growing arg: bind of an arg that grows by 4 KiB a run against one
 *      of constant size, and the allocations each makes over the runs.
 *   0. First, memory speed: bind's upload of an S-byte IN and the copy-back
 *      of an S-byte INOUT, each against a memcpy of S bytes between two warm
 *      host buffers timed beside it (S = 4, 16, 128 MiB).
 *
 *     staging_costs [rounds=15] [device=sim:cores=2]
 *
 * Medians of `rounds` runs, ms.  The two sides of each row alternate run by
 * run in one process, so they see the same machine load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "base/clock.h"
#include "hostgraph.h"

static int k_touch(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}
static const hg_kernel K_TOUCH = {"touch", k_touch, HG_CORE_VECTOR, NULL, NULL};

/* One task that accesses arg 0 as declared and writes nothing. */
static int orch_one(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *a;
    hg_orch_arg(o, 0, &a);
    hg_task_arg ta[1] = {{0, a->dir, a->tensor}};
    hg_task_desc d = {&K_TOUCH, ta, 1, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}
static const hg_callable ONE = {"one", orch_one, NULL};

static hg_arg byte_arg(const char *name, hg_dir dir, hg_hostbuf *hb, size_t n)
{
    hg_arg a = {name, dir, {0}, 0, HG_STAGED};
    hg_tensor_host(&a.tensor, hb, HG_U8, 1, &n);
    return a;
}

#define MAX_ROUNDS 101

static int copy_back_row(hg_device *dev, size_t bytes, int rounds)
{
    hg_runner *r;
    hg_hostbuf *hb;
    hg_devaddr d;
    if (hg_runner_open(dev, &r) || hg_hostbuf_create(bytes, &hb) ||
        hg_devbuf_malloc(dev, bytes, &d))
        return 1;
    hg_arg a = byte_arg("c", HG_INOUT, hb, bytes);
    uint64_t staged[MAX_ROUNDS], direct[MAX_ROUNDS];
    for (int i = 0; i < rounds + 1; i++) { /* round 0 warms both */
        hg_run_stats st;
        if (hg_runner_run(r, &ONE, &a, 1, &st) != 0)
            return 1;
        uint64_t t0 = clock_now_ns();
        if (hg_devbuf_copy_from(dev, hg_hostbuf_data(hb), d, bytes) != 0)
            return 1;
        uint64_t t1 = clock_now_ns();
        if (i > 0) {
            staged[i - 1] = st.copyback_ns;
            direct[i - 1] = t1 - t0;
        }
    }
    double s = bench_median_ms(staged, rounds), p = bench_median_ms(direct, rounds);
    printf("| copy back, %zu MiB | %.3f | %.3f | %.2f |\n", bytes >> 20, s, p, s / p);
    hg_devbuf_free(dev, d);
    hg_hostbuf_destroy(hb);
    hg_runner_close(r);
    return 0;
}

/* A memcpy of `bytes` between two host buffers both already touched: the
 * speed staging is measured against. */
static uint64_t time_memcpy(unsigned char *dst, const unsigned char *src, size_t bytes)
{
    uint64_t t0 = clock_now_ns();
    memcpy(dst, src, bytes);
    uint64_t t1 = clock_now_ns();
    __asm__ volatile("" : : "r"(dst) : "memory"); /* the copy is used */
    return t1 - t0;
}

/* Bind's upload of an IN and the copy-back of an INOUT of `bytes`, each
 * against a memcpy of the same bytes timed beside it, run by run: ratios
 * are memcpy time / ours, so 1.0 is memory speed and 0.9 the goal.  Each
 * memcpy has buffers of its own, so like the run it stands beside it finds
 * them as a round's other copies left the cache (one pair for both made
 * the baseline's buffers the most recently touched, favouring it at sizes
 * the cache nearly holds). */
static int speed_rows(hg_device *dev, size_t bytes, int rounds)
{
    hg_runner *r;
    hg_hostbuf *hin, *hout;
    unsigned char *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), *d = malloc(bytes);
    if (a == NULL || b == NULL || c == NULL || d == NULL || hg_runner_open(dev, &r) ||
        hg_hostbuf_create(bytes, &hin) || hg_hostbuf_create(bytes, &hout))
        return 1;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    memset(c, 3, bytes);
    memset(d, 4, bytes);
    hg_arg in = byte_arg("in", HG_IN, hin, bytes), out = byte_arg("out", HG_INOUT, hout, bytes);
    uint64_t up[MAX_ROUNDS], back[MAX_ROUNDS], mc_up[MAX_ROUNDS], mc_back[MAX_ROUNDS];
    uint64_t h2d[MAX_ROUNDS], d2h[MAX_ROUNDS];
    for (int i = 0; i < rounds + 1; i++) { /* round 0 warms every buffer */
        hg_run_stats si, so;
        uint64_t m1 = time_memcpy(b, a, bytes);
        if (hg_runner_run(r, &ONE, &in, 1, &si) != 0)
            return 1;
        uint64_t m2 = time_memcpy(d, c, bytes);
        if (hg_runner_run(r, &ONE, &out, 1, &so) != 0)
            return 1;
        if (i > 0) {
            up[i - 1] = si.bind_ns, back[i - 1] = so.copyback_ns;
            mc_up[i - 1] = m1, mc_back[i - 1] = m2;
            h2d[i - 1] = si.h2d_ns, d2h[i - 1] = so.d2h_ns;
        }
    }
    double u = bench_median_ms(up, rounds), mu = bench_median_ms(mc_up, rounds);
    double k = bench_median_ms(back, rounds), mk = bench_median_ms(mc_back, rounds);
    double hu = bench_median_ms(h2d, rounds), hk = bench_median_ms(d2h, rounds);
    printf("| bind (upload) of %zu MiB vs memcpy | %.3f (copy %.3f) | %.3f | %.2f |\n", bytes >> 20,
           u, hu, mu, mu / u);
    printf("| copy back of %zu MiB vs memcpy | %.3f (copy %.3f) | %.3f | %.2f |\n", bytes >> 20, k,
           hk, mk, mk / k);
    hg_hostbuf_destroy(hin);
    hg_hostbuf_destroy(hout);
    hg_runner_close(r);
    free(a);
    free(b);
    free(c);
    free(d);
    return 0;
}

static int poison_row(hg_device *dev, size_t bytes, int rounds)
{
    hg_runner *r;
    hg_hostbuf *hb;
    if (hg_runner_open(dev, &r) || hg_hostbuf_create(bytes, &hb))
        return 1;
    hg_arg out = byte_arg("out", HG_OUT, hb, bytes), in = byte_arg("in", HG_IN, hb, bytes);
    uint64_t fill[MAX_ROUNDS], copy[MAX_ROUNDS];
    for (int i = 0; i < rounds + 1; i++) {
        hg_run_stats so, si;
        if (hg_runner_run(r, &ONE, &out, 1, &so) || hg_runner_run(r, &ONE, &in, 1, &si))
            return 1;
        if (i > 0) {
            fill[i - 1] = so.bind_ns;
            copy[i - 1] = si.bind_ns;
        }
    }
    double f = bench_median_ms(fill, rounds), c = bench_median_ms(copy, rounds);
    printf("| bind of OUT (poison) vs IN (copy), %zu MiB | %.3f | %.3f | %.2f |\n", bytes >> 20, f,
           c, f / c);
    hg_hostbuf_destroy(hb);
    hg_runner_close(r);
    return 0;
}

static int growing_row(hg_device *dev, int runs)
{
    enum { BASE = 16 << 20, STEP = 4096 };
    hg_runner *grow, *fixed;
    hg_hostbuf *hb;
    if (hg_runner_open(dev, &grow) || hg_runner_open(dev, &fixed) ||
        hg_hostbuf_create(BASE + (size_t)runs * STEP, &hb))
        return 1;
    uint64_t g[MAX_ROUNDS], f[MAX_ROUNDS], g_allocs = 0, f_allocs = 0;
    for (int i = 0; i < runs; i++) {
        hg_arg ga = byte_arg("kv", HG_IN, hb, BASE + (size_t)(i + 1) * STEP);
        hg_arg fa = byte_arg("kv", HG_IN, hb, BASE);
        hg_run_stats sg, sf;
        if (hg_runner_run(grow, &ONE, &ga, 1, &sg) || hg_runner_run(fixed, &ONE, &fa, 1, &sf))
            return 1;
        g[i] = sg.bind_ns;
        f[i] = sf.bind_ns;
        g_allocs += sg.device_allocs;
        f_allocs += sf.device_allocs;
    }
    double gm = bench_median_ms(g, runs), fm = bench_median_ms(f, runs);
    printf("| bind of a 16 MiB arg growing 4 KiB/run vs constant | %.3f | %.3f | %.2f |\n", gm, fm,
           gm / fm);
    printf("\nallocations over %d runs: growing %llu, constant %llu\n", runs,
           (unsigned long long)g_allocs, (unsigned long long)f_allocs);
    hg_hostbuf_destroy(hb);
    hg_runner_close(grow);
    hg_runner_close(fixed);
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    const char *spec = argc > 2 ? argv[2] : "sim:cores=2";
    if (rounds < 1 || rounds > MAX_ROUNDS - 1) {
        fprintf(stderr, "staging_costs: rounds must be 1..%d\n", MAX_ROUNDS - 1);
        return 2;
    }
    hg_device *dev;
    char msg[256];
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "staging_costs: %s\n", msg);
        return 2;
    }
    printf("device %s, medians of %d runs, ms\n\n", hg_device_spec(dev), rounds);
    printf("| what | ours | baseline | ratio |\n|---|---|---|---|\n");
    int rc = speed_rows(dev, 4u << 20, rounds) || speed_rows(dev, 16u << 20, rounds) ||
             speed_rows(dev, 128u << 20, rounds);
    printf("\n(above: ratio = memcpy / ours, 1.0 is memory speed; below: ours / baseline)\n\n");
    printf("| what | ours | baseline | ratio |\n|---|---|---|---|\n");
    rc = rc || copy_back_row(dev, 4u << 20, rounds) || copy_back_row(dev, 16u << 20, rounds) ||
         poison_row(dev, 4u << 20, rounds) || poison_row(dev, 16u << 20, rounds) ||
         growing_row(dev, rounds);
    hg_device_close(dev);
    if (rc != 0)
        fprintf(stderr, "staging_costs: a run failed\n");
    return rc;
}
