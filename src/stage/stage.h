/*
 * stage.h: staging, the bind and copy-back halves of a run.
 *
 * A bind plan classifies every arg (scalar | device view passed through |
 * zero-byte | slice of the retained buffer | resident copy | pooled
 * scratch), sizes the retained buffer with checked arithmetic before
 * anything is allocated, and records each piece of device memory with its
 * release kind, so that release returns run-owned memory to the pool and
 * never touches user-owned or resident memory.  Files: plan.c (classify,
 * layout), bind.c (resident args, publish), residency.c (the cache),
 * transfer.c (retained buffer, upload), copyplan.c and copyback.c (copy
 * back's plan, fetch and commit), scratch.c (pool, release).
 *
 * Address mapping: every tensor arg has a byte extent [lo, hi) in its buffer
 * and `dev_region`, the device address where byte `lo` lives during the run.
 * A task's view of the arg maps to dev_region + (view_lo - lo).
 */
#ifndef HG_STAGE_STAGE_H
#define HG_STAGE_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "device/device.h"
#include "graph/graph.h"
#include "hostgraph.h"
#include "stage/residency.h"

/* Slices start at the device's allocation alignment, so a kernel sees an
 * aligned pointer at the start of every slice of the retained buffer. */
#define STAGE_SLICE_ALIGN HG_DEVICE_ALIGN

/* The byte OUT slices are filled with at bind: bytes no task writes come
 * back as this, never as another arg's data left in the retained buffer. */
#define STAGE_POISON 0xA5

/* Copy-back's cost model for a strided view: one copy call costs as much as
 * moving this many bytes (a few microseconds of call and sync at the ~10
 * GB/s of a PCIe link).  A strided view is copied as its whole extent when
 * that moves fewer equivalent bytes than one copy per contiguous run. */
#define STAGE_COPY_COST_BYTES (64u << 10)

/* The one cost rule, for uploads and copy-back alike: given sorted,
 * disjoint ranges, merges neighbours whose gap is smaller than
 * STAGE_COPY_COST_BYTES (one copy fewer saves more than the gap's bytes
 * cost), in place; returns the new count.  Never fewer bytes than the
 * ranges, never more copies, never outside [first lo, last hi). */
size_t stage_ranges_cover(hg_range *r, size_t n);

typedef enum stage_kind {
    STAGE_SCALAR,      /* no memory */
    STAGE_ZERO,        /* zero-byte tensor: null address, no allocation */
    STAGE_DEVICE_VIEW, /* user-owned device memory, passed through */
    STAGE_SLICE,       /* host-backed: a slice of the retained buffer */
    STAGE_RESIDENT,    /* host-backed, HG_RESIDENT: a copy in the residency cache */
    STAGE_SCRATCH      /* run-owned device scratch from the orchestration */
} stage_kind;

typedef enum release_kind {
    RELEASE_NONE,           /* nothing to release */
    RELEASE_USER_OWNED,     /* never freed by the runtime */
    RELEASE_RETAINED_SLICE, /* kept: the retained buffer outlives the run */
    RELEASE_RESIDENT,       /* kept by the residency cache */
    RELEASE_POOLED          /* run-owned scratch: back to the runner's pool */
} release_kind;

typedef struct stage_arg {
    const char *name;
    hg_dir dir;
    stage_kind kind;
    release_kind release;
    hg_tensor tensor;      /* the arg's view, buffer-relative */
    size_t lo, hi;         /* byte extent in its buffer */
    size_t slice_offset;   /* STAGE_SLICE: offset in the retained buffer */
    hg_devaddr dev_region; /* device address of byte lo during the run */
    uint32_t resident;     /* STAGE_RESIDENT: its copy in the residency cache */
    uint64_t bind_gen;     /* STAGE_RESIDENT: the host buffer's generation at bind */
    bool upload;           /* IN/INOUT slices and stale/new resident copies: H2D at bind */
    bool copy_back;        /* OUT/INOUT slices: D2H after success */
    /* Uploads: the ranges of a resident copy that the host wrote since it
     * was published (p->spans[up_first..+up_n]); up_whole: the extent. */
    bool up_whole;
    uint32_t up_first, up_n;
    /* Copy-back: the merged ranges fetched from the device
     * (p->spans[back_first..+back_n]); span k lands in host staging at
     * p->span_staging[k].  The commit's items for the arg are
     * p->commits[commit_first..+commit_n]. */
    uint32_t back_first, back_n;
    uint32_t commit_first, commit_n;
    /* Copy-back: the generation this run's one write step gave the arg's
     * host buffer; 0 when the run wrote nothing back into that buffer. */
    uint64_t back_gen;
} stage_arg;

#define STAGE_NO_VIEW UINT32_MAX

/* A view a task wrote (OUT or INOUT) of run arg `arg`: what copy-back brings
 * back, and nothing else.  A dense view is its bytes [lo, hi) (24 bytes a
 * note: a run of 10^6 tasks first-touches 24 MB, not the 136 MB a copy of
 * each view took); a strided one keeps its view in p->strided[strided]. */
typedef struct stage_written {
    uint32_t arg;
    uint32_t strided; /* STAGE_NO_VIEW for a dense view */
    size_t lo, hi;    /* its byte extent in the arg's buffer */
} stage_written;

/* One item of the commit (copy-back's host half): an ordered written view
 * walked run by run (view != STAGE_NO_VIEW, an index into p->written), or
 * one byte range [lo, hi) of the merged runs of views that overlap.  The
 * items of an arg never overlap, so the commit copies each byte once. */
typedef struct stage_commit {
    uint32_t view;
    size_t lo, hi;
} stage_commit;

/* Run-owned scratch, pooled across runs by size. */
typedef struct stage_pool_block {
    hg_devaddr addr;
    size_t bytes;
    bool in_use;       /* taken by the current run */
    uint64_t last_run; /* the last run that took it */
} stage_pool_block;

typedef struct stage_pool {
    stage_pool_block *blocks;
    uint32_t n, cap;
} stage_pool;

/* What a run's residency did, for hg_run_stats. */
typedef struct stage_residency_stats {
    uint64_t hits, bytes_skipped, stale_uploads, staged, evictions;
    uint64_t verified_bytes;    /* verify mode's host bytes compared or shadowed: 0 when off */
    uint64_t h2d_bytes_skipped; /* resident bytes not uploaded: the host did not change them */
    uint64_t d2h_bytes_skipped; /* OUT/INOUT bytes not fetched: no task wrote them */
    uint64_t committed_bytes;   /* host bytes the commit wrote: each written byte once */
    uint64_t h2d_ns, d2h_ns;    /* time in the batched copies each way */
} stage_residency_stats;

/* A copy-back plan kept for replay (backplan.c): everything copy-back plans
 * from a run's written notes (the notes sorted and deduplicated, their
 * strided views, the commit items, the fetched ranges and their staging
 * offsets, the arg order, each arg's share).  It is a function of the
 * notes and of the args' extents, kinds and host buffers alone, all of which
 * a replayed run has exactly as recorded (replay_match), so a replayed run
 * borrows it instead of noting and planning every written view again.
 * Ranges are kept relative to the first copy-back range (bind's upload
 * ranges come first in p->spans, and their number varies run to run). */
typedef struct stage_backplan {
    bool valid;
    stage_written *written;
    uint32_t nwritten, cap_written;
    hg_tensor *strided;
    uint32_t nstrided, cap_strided;
    stage_commit *commits;
    uint32_t ncommits, cap_commits;
    hg_range *spans;
    size_t *span_staging;
    uint32_t nspans, cap_spans, cap_staging;
    uint32_t *order; /* back_order[0..norder) */
    uint32_t norder, cap_order;
    uint32_t *shares; /* per arg: back_first (relative), back_n, commit_first, commit_n */
    uint32_t nargs, cap_shares;
    size_t total;         /* host staging bytes */
    uint64_t d2h_skipped; /* rstats.d2h_bytes_skipped the planning added */
} stage_backplan;

/* One runner's staging state, reused run after run: the plan of the current
 * run, and what outlives runs (host staging, the scratch pool; the residency
 * cache is the runner's, pointed to).  Device operations made through it are
 * counted on *tally as well as on the device (device.h), so a run's stats
 * are its own even on a shared device. */
typedef struct stage_plan {
    stage_arg *args;
    uint32_t nargs; /* the run's args */
    uint32_t nall;  /* run args + scratch */
    uint32_t cap;
    size_t required;           /* retained bytes the slices need */
    size_t piece;              /* device_alloc_piece: no slice that fits in one crosses one */
    hg_device_counters *tally; /* the runner's counters; may be NULL */
    unsigned char *staging;    /* host staging for copy-back, grow-only */
    size_t staging_cap;
    residency_cache *cache; /* the runner's; NULL: every arg is staged */
    stage_pool pool;
    uint64_t run;        /* the current run's number: the LRU clock */
    bool verify;         /* hash resident args' host bytes (HG_ESTALE) */
    bool poison_scratch; /* fill reused scratch with STAGE_POISON */
    stage_residency_stats rstats;
    hg_range *spans;      /* upload and copy-back ranges of this run */
    size_t *span_staging; /* copy-back spans: their offset in host staging */
    uint32_t nspans, cap_spans;
    stage_written *written; /* views tasks wrote (grouped by arg at copy-back) */
    uint32_t nwritten, cap_written;
    hg_tensor *strided; /* the strided ones among them */
    uint32_t nstrided, cap_strided;
    stage_commit *commits; /* the commit's items, planned before the fetch */
    uint32_t ncommits, cap_commits;
    uint32_t *back_order; /* copy-back's arg order: grouped by host buffer */
    uint32_t cap_order;
    /* Test hook: the k-th next host allocation of copy-back's planning
     * fails (0: off), as device faults do for device memory. */
    uint64_t host_fault;
    device_copy *batch; /* the one batched copy of a stage */
    uint32_t cap_batch;
    uint64_t direct_fetches; /* copy-backs fetched straight into the host (for tests) */
    /* What the last planning of copy-back found (plan_fetch), for
     * stage_backplan_keep: its first range in p->spans, the arg order's
     * length, the staging bytes and the d2h bytes it skipped. */
    uint32_t back_base, back_norder;
    size_t back_total;
    uint64_t back_skipped;
    /* A replayed run's borrowed copy-back plan (stage_backplan_lend): its
     * arrays are swapped into this plan until stage_backplan_return; NULL
     * when copy-back plans for itself. */
    stage_backplan *lent;
    /* Per-task work of copy-back, counted for tests (never timed): written
     * notes taken (a task's view, or a recorded one replayed) and notes
     * planned (sorted, deduplicated, planned), over the plan's life. */
    uint64_t note_work;
    /* Contiguous runs of written views that copy-back's planning walked,
     * over the plan's life (for tests: tiles that join into one view are
     * planned without walking any). */
    uint64_t plan_runs;
    uint64_t plan_sorted; /* notes that planning had to sort (not in order) */
} stage_plan;

/* The runner's grow-only retained device buffer. */
typedef struct stage_retained {
    hg_devaddr addr;
    size_t capacity;
} stage_retained;

void stage_plan_init(stage_plan *p, hg_device_counters *tally);
void stage_plan_free(stage_plan *p);

/* Validates and classifies the args (HG_RESIDENT IN/INOUT host args become
 * STAGE_RESIDENT).  Allocates nothing on the device. */
int stage_plan_build(stage_plan *p, hg_device *dev, const hg_arg *args, uint32_t nargs, hg_err *e);

/* Binds the resident args to copies in the cache (bind.c): a current copy
 * at the generation sampled now is a hit (no upload); otherwise the copy is
 * uploaded (stale or new).  A copy that does not fit the budget or the
 * device makes its arg a slice for this run.  Every copy this run will write
 * (an upload, or INOUT) is invalidated here, before anything writes it.
 * HG_ESTALE in verify mode when a hit's host bytes changed behind the API. */
int stage_bind_resident(stage_plan *p, hg_device *dev, hg_err *e);

/* Verify mode (verify.c).  verify_check: a current copy's bytes outside the
 * n declared ranges (sorted, merged, within its extent) equal what the copy
 * was published with, else HG_ESTALE naming the arg, the buffer and the
 * byte.  verify_take: the bytes uploaded now (the arg's upload ranges) go
 * into the copy's shadow; HG_ENOMEM.  verify_copied_back: an INOUT's
 * fetched bytes (from staging) go into its shadow. */
int verify_check(stage_plan *p, const stage_arg *sa, const resident_copy *r,
                 const hg_range *declared, size_t n, hg_err *e);
int verify_take(stage_plan *p, const stage_arg *sa, resident_copy *r, hg_err *e);
void verify_copied_back(stage_plan *p, const stage_arg *sa, resident_copy *r);

/* Lays out the slices in the retained buffer: offsets and `required`. */
int stage_plan_layout(stage_plan *p, hg_err *e);

/* After a fully successful run: records every resident copy of the run as
 * current (with its hash in verify mode): an IN's at the generation sampled
 * at bind, an INOUT's at its host buffer's generation after copy-back. */
void stage_publish(stage_plan *p);

/* Grows the retained buffer to hold `required` bytes (free old, allocate new;
 * never shrinks).  Growth is geometric, at least doubling the capacity
 * (capped by the device's free memory; exactly `required` when the double
 * does not fit), so an arg that grows a little every run makes O(log n)
 * allocations over n runs.  On failure the buffer is empty and the runner
 * usable.  Operations are counted on *tally too (may be NULL). */
int stage_retained_reserve(stage_retained *r, hg_device *dev, hg_device_counters *tally,
                           size_t required, hg_err *e);
void stage_retained_free(stage_retained *r, hg_device *dev, hg_device_counters *tally);

/* Places the slices in the retained buffer, copies IN/INOUT host -> device
 * (for a stale resident copy, only the ranges written since it was
 * published) in one batched copy, and fills pure OUT slices with
 * STAGE_POISON on the device. */
int stage_upload(stage_plan *p, hg_device *dev, const stage_retained *r, hg_err *e);

/* Adds a run-owned scratch arg (dense, on the device). */
int stage_add_scratch(stage_plan *p, hg_device *dev, const char *name, hg_dtype dtype,
                      uint32_t ndims, const size_t *shape, uint32_t *index, hg_tensor *view,
                      hg_err *e);

/* Maps a task arg to its device view, checking it lies in the arg's extent and
 * that its access agrees with the arg's direction. */
int stage_resolve(const stage_plan *p, const hg_task_arg *ta, graph_targ *out, hg_err *e);

/* Records that a task writes `view` of run arg `arg` (orchestration time):
 * only what tasks wrote comes back.  HG_ENOMEM. */
int stage_note_written(stage_plan *p, uint32_t arg, const hg_tensor *view, hg_err *e);
/* Written note k's strided view, or NULL when it is dense (its bytes are
 * p->written[k].lo..hi of arg p->written[k].arg). */
const hg_tensor *stage_written_view(const stage_plan *p, uint32_t k);

/* The view of written note w: its strided view, or NULL for a dense one. */
static inline const hg_tensor *stage_note_view(const stage_plan *p, const stage_written *w)
{
    return w->strided == STAGE_NO_VIEW ? NULL : &p->strided[w->strided];
}

/* OUT and INOUT args with device memory of their own come back. */
static inline bool stage_backs(const stage_arg *sa)
{
    return (sa->kind == STAGE_SLICE || sa->kind == STAGE_RESIDENT) && sa->copy_back;
}

/* Copy-back's plan (copyplan.c), before anything moves: the order of the
 * args that come back (p->back_order, *norder of them, grouped by host
 * buffer), each arg's merged fetch ranges (laid out back to back in host
 * staging, *total bytes) and its commit items.  Allocates what it needs;
 * HG_ENOMEM names the arg, and then nothing moved. */
int stage_copy_back_plan(stage_plan *p, uint32_t *norder, size_t *total, hg_err *e);

/* Copies back what the tasks wrote of each OUT/INOUT arg (copyback.c), all
 * or nothing: the written ranges land in host staging in one batched D2H,
 * and only when it all succeeded are the bytes the written views cover
 * (never their gaps, never bytes no task wrote) written to the host buffers,
 * each buffer's generation moving on once with those ranges logged.  On
 * failure no host byte and no generation changed.  A strided written view
 * is fetched as its extent or per contiguous run, whichever
 * STAGE_COPY_COST_BYTES says is cheaper. */
int stage_copy_back(stage_plan *p, hg_device *dev, hg_err *e);
/* stage_copy_back in its two steps, for a runner whose decide hook
 * (hg_runner_set_decide) rules between them: the fetch (plan, host staging,
 * the batched D2H; may fail, changes no host byte) and the commit (the host
 * writes; cannot fail).  *norder is the fetch's, for the commit. */
int stage_copy_back_fetch(stage_plan *p, hg_device *dev, uint32_t *norder, hg_err *e);
void stage_copy_back_commit(stage_plan *p, uint32_t norder);

/* The copy-back plan for replay (backplan.c).  stage_backplan_keep: after
 * a successful copy-back that planned for itself, its plan moves into *bp
 * (the notes, views and commit items by an O(1) exchange of arrays, the
 * ranges and the args' shares copied: O(ranges + args)), replacing what *bp
 * held.  HG_ENOMEM leaves *bp invalid.  stage_backplan_lend: a replayed
 * run's bound plan takes *bp's plan instead of noting written views (O(1)
 * for the arrays, O(ranges + args) for the rest); copy-back then fetches
 * and commits without planning.  stage_backplan_return gives the arrays
 * back (a no-op when none were lent): call it once copy-back is over or
 * skipped, before *bp may be freed. */
int stage_backplan_keep(stage_plan *p, stage_backplan *bp);
int stage_backplan_lend(stage_plan *p, stage_backplan *bp, hg_err *e);
void stage_backplan_return(stage_plan *p);
void stage_backplan_free(stage_backplan *bp);
uint64_t stage_backplan_bytes(const stage_backplan *bp);

/* For a batch built arg by arg, ranges_of(arg) entries each: the name of
 * the arg that entry `index` (the one a batched copy failed at) belongs to. */
const char *stage_batch_arg(const stage_plan *p, size_t index,
                            size_t (*ranges_of)(const stage_arg *));

/* Grows the plan's batch list (p->batch) to n entries.  HG_ENOMEM. */
int stage_batch_reserve(stage_plan *p, size_t n);

/* Appends n spans to p->spans; the index of the first goes to *first. */
int stage_spans_reserve(stage_plan *p, size_t n, uint32_t *first);

/* Grows *arr (elements of `size` bytes, capacity *cap) to hold `need`, at
 * least doubling; the plan's injected host fault applies.  HG_ENOMEM,
 * leaving *arr as it was. */
int stage_grow(stage_plan *p, void **arr, uint32_t *cap, size_t need, size_t size);

/* Returns run-owned scratch to the pool (freeing pooled blocks this run did
 * not use), leaves retained, resident and user-owned memory alone, and
 * empties the plan. */
void stage_release(stage_plan *p, hg_device *dev);

/* Frees every pooled scratch block not taken by the current run; true if it
 * freed any.  For when the device runs short. */
bool stage_pool_trim(stage_plan *p, hg_device *dev);
/* Frees the whole pool (runner close). */
void stage_pool_free(stage_plan *p, hg_device *dev);

/* Makes device room for the current run: frees unused pooled scratch, else
 * evicts, in one pass, least recently used resident copies the run does
 * not use until `bytes` are freed.  False when nothing is left to give
 * back. */
bool stage_make_room(stage_plan *p, hg_device *dev, uint64_t bytes);

#endif
