/*
 * backplan.c: the copy-back plan a recording keeps for replay (stage.h,
 * stage_backplan).
 *
 * Copy-back plans from the written notes (sort, dedupe, per-arg ranges,
 * staging offsets, commit items): O(W log W) per run in written views W, the
 * largest per-task term of a replayed run once orchestration is skipped.
 * The plan depends only on the notes and on each arg's extent, kind (slice or
 * resident: both come back alike), direction and host buffer, and a replayed
 * run has all of them exactly as recorded (its notes are the recording's,
 * its args passed replay_match).  So the plan of the recorded run is kept
 * and lent to each replayed run.
 *
 * Ownership: the notes, strided views and commit items move between the
 * plan and the backplan by exchanging arrays, never by copying W items: keep
 * hands the run's arrays to the backplan (the plan gets the backplan's old
 * ones, emptied); lend swaps the backplan's into the plan, and return swaps
 * them back.  While lent (p->lent != NULL) the backplan holds the plan's own
 * arrays and must not be freed; the runner returns them right after
 * copy-back.  The ranges (few: merged) and the args' shares are copied, as
 * p->spans also holds bind's upload ranges and outlives the run
 * (hg_runner_copied_back).
 */
#include <stdlib.h>
#include <string.h>

#include "stage/stage.h"

#define SWAP(T, a, b)                                                                              \
    do {                                                                                           \
        T swap_tmp_ = (a);                                                                         \
        (a) = (b);                                                                                 \
        (b) = swap_tmp_;                                                                           \
    } while (0)

/* Exchanges the note, view and commit arrays (with their capacities) of p
 * and bp; counts are set by the caller. */
static void swap_arrays(stage_plan *p, stage_backplan *bp)
{
    SWAP(stage_written *, p->written, bp->written);
    SWAP(uint32_t, p->cap_written, bp->cap_written);
    SWAP(hg_tensor *, p->strided, bp->strided);
    SWAP(uint32_t, p->cap_strided, bp->cap_strided);
    SWAP(stage_commit *, p->commits, bp->commits);
    SWAP(uint32_t, p->cap_commits, bp->cap_commits);
}

/* memcpy of n bytes; none (and no pointer passed) when n is 0, as an empty
 * array may be NULL. */
static void copy(void *dst, const void *src, size_t n)
{
    if (n != 0)
        memcpy(dst, src, n);
}

/* Grows *arr (capacity *cap items of `size`) to `need`.  HG_ENOMEM. */
static int reserve(void **arr, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap && *arr != NULL)
        return 0;
    void *grown = realloc(*arr, (size_t)(need ? need : 1) * size);
    if (grown == NULL)
        return HG_ENOMEM;
    *arr = grown;
    *cap = need;
    return 0;
}

int stage_backplan_keep(stage_plan *p, stage_backplan *bp)
{
    bp->valid = false;
    const uint32_t nspans = p->nspans - p->back_base;
    if (reserve((void **)&bp->spans, &bp->cap_spans, nspans, sizeof *bp->spans) != 0 ||
        reserve((void **)&bp->span_staging, &bp->cap_staging, nspans, sizeof *bp->span_staging) !=
            0 ||
        reserve((void **)&bp->order, &bp->cap_order, p->back_norder, sizeof *bp->order) != 0 ||
        reserve((void **)&bp->shares, &bp->cap_shares, 4 * p->nargs, sizeof *bp->shares) != 0)
        return HG_ENOMEM;
    if (nspans > 0) {
        memcpy(bp->spans, p->spans + p->back_base, (size_t)nspans * sizeof *bp->spans);
        memcpy(bp->span_staging, p->span_staging + p->back_base,
               (size_t)nspans * sizeof *bp->span_staging);
    }
    copy(bp->order, p->back_order, (size_t)p->back_norder * sizeof *bp->order);
    for (uint32_t i = 0; i < p->nargs; i++) {
        const stage_arg *sa = &p->args[i];
        uint32_t *s = bp->shares + 4 * (size_t)i;
        s[0] = sa->back_n ? sa->back_first - p->back_base : 0;
        s[1] = sa->back_n;
        s[2] = sa->commit_first;
        s[3] = sa->commit_n;
    }
    bp->nspans = nspans;
    bp->norder = p->back_norder;
    bp->nargs = p->nargs;
    bp->total = p->back_total;
    bp->d2h_skipped = p->back_skipped;
    bp->nwritten = p->nwritten;
    bp->nstrided = p->nstrided;
    bp->ncommits = p->ncommits;
    swap_arrays(p, bp);
    p->nwritten = p->nstrided = p->ncommits = 0;
    bp->valid = true;
    return 0;
}

int stage_backplan_lend(stage_plan *p, stage_backplan *bp, hg_err *e)
{
    if (p->lent != NULL || !bp->valid || bp->nargs != p->nargs)
        return err_set(e, HG_EINVAL, "replay: no copy-back plan to lend for %u args", p->nargs);
    uint32_t base = p->nspans;
    if (stage_spans_reserve(p, bp->nspans, &base) != 0 ||
        reserve((void **)&p->back_order, &p->cap_order, bp->norder, sizeof *p->back_order) != 0) {
        p->nspans = base;
        return err_set(e, HG_ENOMEM, "replay: cannot restore the copy-back plan of %u args",
                       p->nargs);
    }
    if (bp->nspans > 0) {
        memcpy(p->spans + base, bp->spans, (size_t)bp->nspans * sizeof *bp->spans);
        memcpy(p->span_staging + base, bp->span_staging,
               (size_t)bp->nspans * sizeof *bp->span_staging);
    }
    copy(p->back_order, bp->order, (size_t)bp->norder * sizeof *bp->order);
    for (uint32_t i = 0; i < p->nargs; i++) {
        stage_arg *sa = &p->args[i];
        const uint32_t *s = bp->shares + 4 * (size_t)i;
        sa->back_first = base + s[0];
        sa->back_n = s[1];
        sa->commit_first = s[2];
        sa->commit_n = s[3];
    }
    p->back_base = base;
    p->back_norder = bp->norder;
    p->back_total = bp->total;
    p->back_skipped = bp->d2h_skipped;
    swap_arrays(p, bp);
    p->nwritten = bp->nwritten;
    p->nstrided = bp->nstrided;
    p->ncommits = bp->ncommits;
    p->lent = bp;
    return 0;
}

void stage_backplan_return(stage_plan *p)
{
    stage_backplan *bp = p->lent;
    if (bp == NULL)
        return;
    swap_arrays(p, bp);
    p->nwritten = p->nstrided = p->ncommits = 0;
    p->lent = NULL;
}

void stage_backplan_free(stage_backplan *bp)
{
    free(bp->written);
    free(bp->strided);
    free(bp->commits);
    free(bp->spans);
    free(bp->span_staging);
    free(bp->order);
    free(bp->shares);
    memset(bp, 0, sizeof *bp);
}

uint64_t stage_backplan_bytes(const stage_backplan *bp)
{
    return (uint64_t)bp->cap_written * sizeof *bp->written +
           (uint64_t)bp->cap_strided * sizeof *bp->strided +
           (uint64_t)bp->cap_commits * sizeof *bp->commits +
           (uint64_t)bp->cap_spans * sizeof *bp->spans +
           (uint64_t)bp->cap_staging * sizeof *bp->span_staging +
           (uint64_t)bp->cap_order * sizeof *bp->order +
           (uint64_t)bp->cap_shares * sizeof *bp->shares;
}
