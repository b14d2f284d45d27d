/*
 * bgemm_staging.c: where a bgemm round's time goes, staging against kernels.
 *
 * For a few (grid, tile) points it runs R rounds of bgemm on one runner (the
 * OUT/INOUT restore between rounds is the scene runner's job; here C simply
 * accumulates, which costs the same) and prints per point the median of each
 * stage, the staging / execute ratio, and the exact bytes per round.  All
 * points run in one process, side by side, so the ratios compare.
 *
 *     bgemm_staging [rounds=5] [device=sim:cube=1,vector=2]
 *
 * Run it twice, without and with a link model (e.g. sim:cores=4,link_gbps=1),
 * to see how the split moves when copies cost what a bus costs.
 *
 *     bgemm_staging [rounds=3] [device] copyback
 *
 * runs bgemm with a 2048 x 2048 C (grid 16, tile 128; K = 128 grid_k: the
 * "2048^3" of docs/PERFORMANCE) at grid_k 1 and 8 instead, and after
 * every round times a plain device -> host copy of 16 MiB (C's bytes, from
 * a device buffer into a host buffer, once, right after the run, as
 * copy-back's copy comes after the kernels): copy-back's
 * median beside that copy's, and d2h / copy back, of the medians and of
 * the least of each (on a loaded host the least is the undisturbed figure;
 * 1.0: copy-back at the speed of a bare D2H;
 * the goal is >= 0.9 at both grid_k, where eight ADD tasks write each C
 * tile at grid_k 8 and one at grid_k 1).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "bench.h"
#include "scene/scene.h"

/* A plain D2H of `bytes` timed after each round (copyback mode). */
typedef struct plain_d2h {
    hg_devaddr src;
    void *dst;
    size_t bytes;
} plain_d2h;

typedef struct point {
    int64_t grid, tile, grid_k;
} point;

static int set_param(const scene *s, int64_t *params, const char *key, int64_t value)
{
    char kv[64];
    hg_err e;
    snprintf(kv, sizeof kv, "%s=%lld", key, (long long)value);
    if (scene_param_set(s, params, kv, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    return 0;
}

static int bench_point(hg_device *dev, const scene *s, point pt, int rounds, const plain_d2h *d2h)
{
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(s, params);
    if (set_param(s, params, "grid", pt.grid) || set_param(s, params, "tile", pt.tile) ||
        set_param(s, params, "grid_k", pt.grid_k))
        return 1;
    scene_case *c;
    hg_err e;
    hg_runner *r;
    if (scene_case_make(s, params, &c, &e) != 0 || hg_runner_open(dev, &r) != 0) {
        fprintf(stderr, "bgemm grid=%lld tile=%lld: %s\n", (long long)pt.grid, (long long)pt.tile,
                e.msg);
        return 1;
    }
    uint64_t bind[64], exec[64], back[64], wall[64], plain[64], d2hs[64];
    hg_run_stats st;
    for (int i = 0; i < rounds; i++) {
        if (hg_runner_run(r, &c->callable, c->args, c->nargs, &st) != 0) {
            fprintf(stderr, "run failed: %s\n", hg_runner_errmsg(r));
            return 1;
        }
        bind[i] = st.bind_ns;
        exec[i] = st.exec_ns;
        back[i] = st.copyback_ns;
        d2hs[i] = st.d2h_ns;
        wall[i] = st.wall_ns;
        uint64_t t0 = clock_now_ns(); /* once: a second copy would find the bytes in cache */
        if (d2h != NULL && hg_devbuf_copy_from(dev, d2h->dst, d2h->src, d2h->bytes) != 0)
            return 1;
        plain[i] = clock_now_ns() - t0;
    }
    double b = bench_median_ms(bind, rounds), x = bench_median_ms(exec, rounds);
    double k = bench_median_ms(back, rounds), w = bench_median_ms(wall, rounds);
    printf("%5lld %5lld %6lld %7u %9.3f %9.3f %9.3f %9.3f %8.2f %12llu %12llu\n",
           (long long)pt.grid, (long long)pt.tile, (long long)pt.grid_k, st.tasks, w, b, x, k,
           (b + k) / x, (unsigned long long)st.h2d_bytes, (unsigned long long)st.d2h_bytes);
    if (d2h != NULL) { /* bench_median_ms sorted both: [0] is the least */
        double pm = bench_median_ms(plain, rounds), dm = bench_median_ms(d2hs, rounds);
        printf("      grid_k %lld: copy back %.3f ms (least %.3f; of it in the D2H copy %.3f), "
               "plain D2H of %zu MiB %.3f ms (least %.3f), d2h / copy back %.2f (least: %.2f)\n",
               (long long)pt.grid_k, k, (double)back[0] / 1e6, dm, d2h->bytes >> 20, pm,
               (double)plain[0] / 1e6, pm / k, (double)plain[0] / (double)back[0]);
    }
    hg_runner_close(r);
    scene_case_destroy(c);
    return 0;
}

/* bgemm 2048^3's copy-back at grid_k 1 and 8, each beside a plain D2H. */
static int copyback_points(hg_device *dev, const scene *s, int rounds)
{
    plain_d2h d2h = {0, malloc(16u << 20), 16u << 20};
    if (d2h.dst == NULL || hg_devbuf_malloc(dev, d2h.bytes, &d2h.src) != 0)
        return 1;
    memset(d2h.dst, 1, d2h.bytes); /* warm, as the C host buffer is after round 1 */
    /* Real device pages, as C's are (never written, they would all read the
     * zero page, and the copy would read nothing from memory). */
    if (hg_devbuf_copy_to(dev, d2h.src, d2h.dst, d2h.bytes) != 0)
        return 1;
    const point pts[] = {{16, 128, 1}, {16, 128, 8}};
    int rc = 0;
    for (size_t i = 0; i < 2 && rc == 0; i++)
        rc = bench_point(dev, s, pts[i], rounds, &d2h);
    hg_devbuf_free(dev, d2h.src);
    free(d2h.dst);
    return rc;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    const bool copyback = argc > 3 && strcmp(argv[3], "copyback") == 0;
    const char *spec = argc > 2 ? argv[2] : "sim:cube=1,vector=2";
    if (rounds < 1 || rounds > 64) {
        fprintf(stderr, "rounds: want 1..64, got '%s'\n", argv[1]);
        return 2;
    }
    hg_device *dev;
    char msg[256];
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 2;
    }
    const scene *s = scene_find("bgemm");
    const point pts[] = {{4, 32, 0}, {8, 32, 1}, {16, 64, 1}, {8, 128, 1}, {4, 256, 1}};
    printf("device %s, %d rounds, medians in ms; staging/exec = (bind + copy back) / execute\n",
           hg_device_spec(dev), rounds);
    printf(
        " grid  tile grid_k   tasks   wall_ms   bind_ms   exec_ms   back_ms  stg/exec    h2d_bytes"
        "    d2h_bytes\n");
    int rc = copyback ? copyback_points(dev, s, rounds) : 0;
    for (size_t i = 0; i < sizeof pts / sizeof pts[0] && rc == 0 && !copyback; i++)
        rc = bench_point(dev, s, pts[i], rounds, NULL);
    hg_device_close(dev);
    return rc;
}
