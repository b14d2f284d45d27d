/*
 * fuzz_graph.c: dependency inference (graph_add_task and the tensor map)
 * against the rule applied byte by byte.
 *
 * The input is a list of up to MAX_T tasks, each with up to MAX_ARGS args
 * over NBUF buffers of BUF bytes (12 granules of 1 KiB, so an arg may lie
 * inside one granule, cross a few, or span more than GRAPH_GRAN_SPAN, and
 * the map's granule lists, read tree and write tree all meet), with an
 * access each; offsets and lengths are drawn from classes that favour
 * granule and piece boundaries.  Promises checked: every task is accepted;
 * the edges into each task are exactly the rule's (a reader after the
 * byte's last writer; a writer after the byte's readers since, or after
 * that writer when there are none); and graph_reset then the same tasks
 * again give the same edges in the same order, as a replayed recording
 * relies on.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "graph/graph.h"

#define MAX_T    64
#define MAX_ARGS 4
#define NBUF     3
#define BUF      (12u << 10)
#define BASE     0x40000000ull /* buffer b starts at BASE + b * STRIDE: 1 KiB aligned */
#define STRIDE   0x100000ull

static int kernel_fn(const hg_kernel_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static const hg_kernel kern = {"k", kernel_fn, HG_CORE_VECTOR, NULL, NULL};

typedef struct ftask {
    graph_targ args[MAX_ARGS];
    uint32_t nargs;
} ftask;

/* An offset in a buffer: a granule or piece boundary (+-1), or anywhere. */
static uint32_t draw_offset(fz_in *in)
{
    const uint32_t kind = fz_below(in, 4);
    if (kind == 0)
        return fz_below(in, BUF);
    const uint32_t unit = kind == 1 ? 1024 : kind == 2 ? 64 : 8;
    const int32_t nudge = (int32_t)fz_below(in, 3) - 1;
    const int64_t at = (int64_t)fz_below(in, BUF / unit) * unit + nudge;
    return at < 0 ? 0 : (uint32_t)at;
}

/* A length: inside a piece, a granule, a few granules, or most of the buffer. */
static uint32_t draw_length(fz_in *in)
{
    static const uint32_t most[4] = {64, 1024, 4096, BUF};
    return fz_below(in, most[fz_below(in, 4)] + 1);
}

static uint32_t draw_tasks(fz_in *in, ftask *ts)
{
    static const hg_dir access[3] = {HG_IN, HG_OUT, HG_INOUT};
    uint32_t n = 0;
    while (n < MAX_T && !fz_done(in)) {
        ftask *t = &ts[n++];
        t->nargs = fz_below(in, MAX_ARGS + 1);
        for (uint32_t i = 0; i < t->nargs; i++) {
            const hg_devaddr base = BASE + STRIDE * fz_below(in, NBUF);
            uint32_t lo = draw_offset(in), len = draw_length(in);
            if (lo > BUF)
                lo = BUF;
            if (len > BUF - lo)
                len = BUF - lo;
            const hg_dir dir = access[fz_below(in, 3)];
            t->args[i] = graph_targ_bytes(base + lo, base + lo + len, dir != HG_OUT, dir != HG_IN);
        }
    }
    return n;
}

/* ------------------------------------------------------- the rule, by byte */

typedef struct ref_byte {
    uint32_t writer;  /* task + 1; 0: none */
    uint64_t readers; /* since that write, one bit a task */
} ref_byte;

static ref_byte bytes[NBUF][BUF];

static ref_byte *ref_at(hg_devaddr addr)
{
    return &bytes[(addr - BASE) / STRIDE][(addr - BASE) % STRIDE];
}

static uint64_t ref_deps(const ftask *t)
{
    uint64_t want = 0;
    for (uint32_t i = 0; i < t->nargs; i++) {
        const graph_targ *a = &t->args[i];
        for (hg_devaddr b = a->lo; b < a->hi; b++) {
            const ref_byte *r = ref_at(b);
            if (a->write && r->readers != 0)
                want |= r->readers;
            else if (r->writer != 0)
                want |= 1ull << (r->writer - 1);
        }
    }
    return want;
}

static void ref_update(const ftask *t, uint32_t id)
{
    for (int pass = 0; pass < 2; pass++) /* reads first: the task's own writes win */
        for (uint32_t i = 0; i < t->nargs; i++) {
            const graph_targ *a = &t->args[i];
            if (a->write != (pass == 1))
                continue;
            for (hg_devaddr b = a->lo; b < a->hi; b++) {
                ref_byte *r = ref_at(b);
                if (a->write)
                    *r = (ref_byte){id + 1, 0};
                else
                    r->readers |= 1ull << id;
            }
        }
}

/* ------------------------------------------------------------- the target */

static void build(graph *g, const ftask *ts, uint32_t n)
{
    for (uint32_t t = 0; t < n; t++) {
        hg_task_id id;
        hg_err err = {0};
        if (graph_add_task(g, &kern, ts[t].args, ts[t].nargs, NULL, 0, NULL, 0, &id, &err) != 0)
            fz_fail("task %u refused: %s", t, err.msg);
        if (id != t)
            fz_fail("task %u got id %u", t, id);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ftask ts[MAX_T];
    static uint32_t from[MAX_T * MAX_T], to[MAX_T * MAX_T];
    fz_in in = {data, size, 0};
    const uint32_t n = draw_tasks(&in, ts);
    graph g;
    graph_init(&g);
    build(&g, ts, n);
    uint64_t preds[MAX_T] = {0};
    for (uint32_t i = 0; i < g.nedges; i++) {
        if (g.edge_from[i] >= g.edge_to[i] || g.edge_to[i] >= n)
            fz_fail("edge %u: %u -> %u does not go forward", i, g.edge_from[i], g.edge_to[i]);
        if (preds[g.edge_to[i]] >> g.edge_from[i] & 1)
            fz_fail("edge %u -> %u twice", g.edge_from[i], g.edge_to[i]);
        preds[g.edge_to[i]] |= 1ull << g.edge_from[i];
    }
    memset(bytes, 0, sizeof bytes);
    for (uint32_t t = 0; t < n; t++) {
        const uint64_t want = ref_deps(&ts[t]);
        if (want != preds[t])
            fz_fail("task %u: predecessors %#llx, the rule says %#llx", t,
                    (unsigned long long)preds[t], (unsigned long long)want);
        ref_update(&ts[t], t);
    }
    const uint32_t nedges = g.nedges;
    for (uint32_t i = 0; i < nedges; i++)
        from[i] = g.edge_from[i], to[i] = g.edge_to[i];
    graph_reset(&g);
    build(&g, ts, n);
    bool same = g.nedges == nedges;
    for (uint32_t i = 0; same && i < nedges; i++)
        same = from[i] == g.edge_from[i] && to[i] == g.edge_to[i];
    if (!same)
        fz_fail("the same tasks after graph_reset gave other edges (%u, then %u)", nedges,
                g.nedges);
    graph_free(&g);
    return 0;
}
