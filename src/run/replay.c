/*
 * replay.c: the recording and its first two checks (replay.h): what an
 * orchestration logs while it runs, how a successful run becomes the
 * recording, and whether a later run has the same callable, the same args
 * and unchanged host reads.  replay_place.c puts a recording in place on a
 * bound plan and compares it with a fresh orchestration.
 *
 * Invariants: `valid` only after every array of the recording was filled;
 * the recording's arg names live in its own blob (a caller's names need
 * live only for one run); the log in flight (`cur`) is emptied before each
 * orchestration, so a failed run's log never becomes a recording.
 */
#include <stdlib.h>
#include <string.h>

#include "run/replay.h"
#include "stage/residency.h"
#include "tensor/tensor.h"

/* Grows *pp (elem-sized items, capacity *cap) to hold `need`, doubling. */
static int grow(void *pp, uint32_t *cap, uint64_t need, size_t elem)
{
    void *p;
    memcpy(&p, pp, sizeof p);
    if (need <= *cap && p != NULL)
        return 0;
    if (need >= UINT32_MAX / 2)
        return HG_ELIMIT;
    uint64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(p, (size_t)c * elem);
    if (q == NULL)
        return HG_ENOMEM;
    memcpy(pp, &q, sizeof q);
    *cap = (uint32_t)c;
    return 0;
}

static void log_free(replay_log *l)
{
    free(l->targ_arg);
    free(l->reads);
    free(l->written);
    free(l->scratch);
    free(l->scratch_names);
    memset(l, 0, sizeof *l);
}

static uint64_t log_bytes(const replay_log *l)
{
    return (uint64_t)l->cap_targ * sizeof *l->targ_arg + (uint64_t)l->cap_reads * sizeof *l->reads +
           (uint64_t)l->cap_written * sizeof *l->written +
           (uint64_t)l->cap_scratch * sizeof *l->scratch + l->names_cap;
}

void replay_init(replay_state *rs)
{
    memset(rs, 0, sizeof *rs);
    graph_init(&rs->graph);
}

void replay_drop(replay_state *rs)
{
    rs->valid = false;
    graph_free(&rs->graph);
    log_free(&rs->rec);
    free(rs->args);
    free(rs->names);
    free(rs->name);
    free(rs->regions);
    free(rs->lens);
    stage_backplan_free(&rs->back);
    rs->args = NULL;
    rs->names = rs->name = NULL;
    rs->regions = rs->lens = NULL;
    rs->nargs = rs->cap_args = rs->nregions = rs->cap_regions = 0;
    rs->names_len = rs->names_cap = 0;
}

void replay_free(replay_state *rs)
{
    replay_drop(rs);
    log_free(&rs->cur);
    free(rs->read_stamp);
    free(rs->spans);
    memset(rs, 0, sizeof *rs);
}

/* What the recording's arrays hold, whether or not it is valid. */
static uint64_t recording_bytes(const replay_state *rs)
{
    const graph *g = &rs->graph;
    uint64_t b =
        (uint64_t)g->cap_tasks * sizeof(graph_task) + (uint64_t)g->cap_args * sizeof(graph_arg) +
        (uint64_t)g->cap_shapes * sizeof(graph_shape) +
        (uint64_t)g->cap_kernels * sizeof(graph_kernel) +
        (uint64_t)g->cap_kernel_slots * sizeof(uint32_t) +
        (uint64_t)g->cap_scalars * sizeof(uint64_t) + (uint64_t)g->cap_edges * 3 * sizeof(uint32_t);
    b += intern_bytes(&g->names); /* its kernels' names */
    b += log_bytes(&rs->rec);
    b += (uint64_t)rs->cap_args * sizeof *rs->args + rs->names_cap;
    b += (uint64_t)rs->cap_regions * 2 * sizeof(hg_devaddr);
    b += stage_backplan_bytes(&rs->back);
    return b + (rs->name ? strlen(rs->name) + 1 : 0);
}

uint64_t replay_bytes(const replay_state *rs)
{
    return rs->valid ? recording_bytes(rs) : 0;
}

uint64_t replay_state_bytes(const replay_state *rs)
{
    return recording_bytes(rs) + log_bytes(&rs->cur) +
           (uint64_t)rs->cap_stamp * sizeof *rs->read_stamp +
           (uint64_t)rs->cap_spans * sizeof *rs->spans;
}

/* ------------------------------------------------------------ the log */

void replay_begin(replay_state *rs)
{
    rs->cur.ntarg = rs->cur.nreads = rs->cur.nwritten = rs->cur.nscratch = 0;
}

int replay_note_task(replay_state *rs, const hg_task_desc *d, hg_err *e)
{
    replay_log *l = &rs->cur;
    if (grow(&l->targ_arg, &l->cap_targ, (uint64_t)l->ntarg + d->nargs, sizeof *l->targ_arg) != 0)
        return err_set(e, HG_ENOMEM, "replay: cannot record task %u's args", l->ntarg);
    for (uint32_t i = 0; i < d->nargs; i++)
        l->targ_arg[l->ntarg++] = d->args[i].arg;
    return 0;
}

int replay_note_read(replay_state *rs, const stage_plan *p, uint32_t arg, uint64_t run, bool hash,
                     hg_err *e)
{
    const uint32_t old = rs->cap_stamp;
    if (grow(&rs->read_stamp, &rs->cap_stamp, (uint64_t)p->nargs, sizeof *rs->read_stamp) != 0)
        return err_set(e, HG_ENOMEM, "replay: cannot record a host read");
    if (rs->cap_stamp > old) /* new slots: no run read them */
        memset(rs->read_stamp + old, 0, (rs->cap_stamp - old) * sizeof *rs->read_stamp);
    if (rs->read_stamp[arg] == run)
        return 0; /* logged already this run */
    replay_log *l = &rs->cur;
    if (grow(&l->reads, &l->cap_reads, (uint64_t)l->nreads + 1, sizeof *l->reads) != 0)
        return err_set(e, HG_ENOMEM, "replay: cannot record a host read");
    rs->read_stamp[arg] = run;
    const stage_arg *sa = &p->args[arg];
    replay_read *rd = &l->reads[l->nreads++];
    *rd = (replay_read){
        .arg = arg, .lo = sa->lo, .hi = sa->hi, .gen = hg_hostbuf_generation(sa->tensor.host)};
    if (hash) {
        rd->hash = residency_hash((const char *)hg_hostbuf_data(sa->tensor.host) + sa->lo,
                                  sa->hi - sa->lo);
        rd->hashed = true;
    }
    return 0;
}

/* The plan's scratch into the log, each name copied into the log's own
 * names (grown once, before any is copied, so no pointer into them
 * moves). */
static int capture_scratch(replay_log *l, const stage_plan *p, uint32_t nscratch, hg_err *e)
{
    size_t need = 0;
    for (uint32_t k = 0; k < nscratch; k++)
        need += strlen(p->args[p->nargs + k].name) + 1;
    if (need > l->names_cap) {
        char *names = realloc(l->scratch_names, need);
        if (names == NULL)
            return err_set(e, HG_ENOMEM, "replay: cannot record %zu bytes of scratch names", need);
        l->scratch_names = names;
        l->names_cap = need;
    }
    char *at = l->scratch_names;
    for (uint32_t k = 0; k < nscratch; k++) {
        const stage_arg *sa = &p->args[p->nargs + k];
        const size_t len = strlen(sa->name) + 1;
        memcpy(at, sa->name, len);
        l->scratch[k] = (replay_scratch){.name = at, .view = sa->tensor};
        at += len;
    }
    l->nscratch = nscratch;
    return 0;
}

int replay_capture(replay_state *rs, const stage_plan *p, hg_err *e)
{
    replay_log *l = &rs->cur;
    const uint32_t nscratch = p->nall - p->nargs;
    if (grow(&l->written, &l->cap_written, p->nwritten, sizeof *l->written) != 0 ||
        grow(&l->scratch, &l->cap_scratch, nscratch, sizeof *l->scratch) != 0)
        return err_set(e, HG_ENOMEM, "replay: cannot record the run's written views");
    for (uint32_t k = 0; k < p->nwritten; k++) {
        const hg_tensor *v = stage_written_view(p, k);
        const stage_written *w = &p->written[k];
        l->written[k] =
            (replay_written){.arg = w->arg, .strided = v != NULL, .lo = w->lo, .hi = w->hi};
        if (v != NULL)
            l->written[k].view = *v;
    }
    l->nwritten = p->nwritten;
    return capture_scratch(l, p, nscratch, e);
}

/* ------------------------------------------------------- the recording */

/* Copies the args (names into the blob) and the callable's name. */
static int keep_args(replay_state *rs, const hg_callable *c, const hg_arg *args, uint32_t nargs)
{
    size_t need = 0;
    for (uint32_t i = 0; i < nargs; i++)
        need += strlen(args[i].name) + 1;
    if (need > rs->names_cap) {
        char *n = realloc(rs->names, need);
        if (n == NULL)
            return HG_ENOMEM;
        rs->names = n;
        rs->names_cap = need;
    }
    if (grow(&rs->args, &rs->cap_args, nargs, sizeof *rs->args) != 0)
        return HG_ENOMEM;
    if (rs->name == NULL || c->name == NULL || strcmp(rs->name, c->name) != 0) {
        free(rs->name);
        rs->name = c->name ? strdup(c->name) : NULL;
        if (c->name && rs->name == NULL)
            return HG_ENOMEM;
    }
    rs->names_len = 0;
    for (uint32_t i = 0; i < nargs; i++) {
        const size_t len = strlen(args[i].name) + 1;
        replay_arg *ra = &rs->args[i];
        ra->arg = args[i];
        ra->arg.name = NULL; /* the caller's: see name_at */
        ra->name_at = rs->names_len;
        ra->host_id = args[i].tensor.host ? hg_hostbuf_id(args[i].tensor.host) : 0;
        memcpy(rs->names + rs->names_len, args[i].name, len);
        rs->names_len += len;
    }
    rs->nargs = nargs;
    return 0;
}

/* Each arg's device region now (0 and length 0 when it has none). */
static void region_of(const stage_arg *sa, hg_devaddr *at, hg_devaddr *len)
{
    const bool memory = sa->kind == STAGE_SLICE || sa->kind == STAGE_RESIDENT ||
                        sa->kind == STAGE_DEVICE_VIEW || sa->kind == STAGE_SCRATCH;
    *at = memory && sa->hi > sa->lo ? sa->dev_region : 0;
    *len = memory ? sa->hi - sa->lo : 0;
}

int replay_record(replay_state *rs, graph *g, stage_plan *p, const hg_callable *c,
                  const hg_arg *args, uint32_t nargs)
{
    rs->valid = false;
    uint32_t c1 = rs->cap_regions, c2 = rs->cap_regions;
    if (grow(&rs->regions, &c1, p->nall, sizeof *rs->regions) != 0 ||
        grow(&rs->lens, &c2, p->nall, sizeof *rs->lens) != 0)
        return HG_ENOMEM;
    rs->cap_regions = c1 < c2 ? c1 : c2;
    if (keep_args(rs, c, args, nargs) != 0 || stage_backplan_keep(p, &rs->back) != 0)
        return HG_ENOMEM;
    for (uint32_t i = 0; i < p->nall; i++)
        region_of(&p->args[i], &rs->regions[i], &rs->lens[i]);
    rs->nregions = p->nall;
    rs->fn = c->orchestrate;
    rs->user = c->user;
    graph_swap_records(&rs->graph, g);
    replay_log t = rs->rec;
    rs->rec = rs->cur;
    rs->cur = t;
    rs->valid = true;
    return 0;
}

/* --------------------------------------------------------- the checks */

static bool tensor_same(const hg_tensor *a, const hg_tensor *b, uint64_t host_id)
{
    return a->device == b->device && (b->host ? hg_hostbuf_id(b->host) : 0) == host_id &&
           tensor_same_layout(a, b);
}

static bool arg_same(const replay_state *rs, const replay_arg *ra, const hg_arg *a)
{
    if (a->dir != ra->arg.dir || a->residency != ra->arg.residency ||
        strcmp(a->name, rs->names + ra->name_at) != 0)
        return false;
    if (a->dir == HG_SCALAR)
        return a->scalar == ra->arg.scalar;
    return tensor_same(&ra->arg.tensor, &a->tensor, ra->host_id);
}

static bool callable_same(const replay_state *rs, const hg_callable *c)
{
    if (c->orchestrate != rs->fn || c->user != rs->user)
        return false;
    if (c->name == NULL || rs->name == NULL)
        return c->name == rs->name;
    return strcmp(c->name, rs->name) == 0;
}

/* 1 when every host read holds; HG_ESTALE when verify finds changed bytes. */
static int reads_hold(replay_state *rs, const hg_arg *args, bool verify, hg_err *e)
{
    for (uint32_t k = 0; k < rs->rec.nreads; k++) {
        const replay_read *rd = &rs->rec.reads[k];
        const hg_hostbuf *hb = args[rd->arg].tensor.host;
        if (hg_hostbuf_generation(hb) != rd->gen)
            return 0;
        if (!verify || !rd->hashed)
            continue;
        const char *bytes = (const char *)hg_hostbuf_data(hb) + rd->lo;
        if (residency_hash(bytes, rd->hi - rd->lo) != rd->hash) {
            const replay_read bad = *rd; /* the drop frees it */
            replay_drop(rs);
            return err_set(e, HG_ESTALE,
                           "replay: host view of '%s' (buffer %llu, bytes [%zu, %zu)) changed "
                           "without a write through the API since the orchestration read it at "
                           "generation %llu",
                           args[bad.arg].name, (unsigned long long)hg_hostbuf_id(hb), bad.lo,
                           bad.hi, (unsigned long long)bad.gen);
        }
    }
    return 1;
}

int replay_match(replay_state *rs, const hg_callable *c, const hg_arg *args, uint32_t nargs,
                 bool verify, hg_err *e)
{
    if (!rs->valid || nargs != rs->nargs || !callable_same(rs, c))
        return 0;
    for (uint32_t i = 0; i < nargs; i++)
        if (!arg_same(rs, &rs->args[i], &args[i]))
            return 0;
    return reads_hold(rs, args, verify, e);
}
