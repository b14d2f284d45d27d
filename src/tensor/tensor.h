/*
 * tensor.h: internal view arithmetic beyond the public hg_tensor_* calls.
 */
#ifndef HG_TENSOR_TENSOR_H
#define HG_TENSOR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "hostgraph.h"

/* Validates a view's own fields (dtype in range, ndims <= HG_MAX_DIMS, where
 * ndims 0 is a view of one element) and that its
 * extent is computable without overflow.  `what` names it in the message
 * ("arg 'a'"). */
int tensor_validate(const hg_tensor *t, const char *what, hg_err *e);

/* Calls fn(ctx, byte_offset, byte_len) for each maximal run of contiguous
 * bytes the view covers, in increasing address order, merging adjacent runs.
 * Offsets are buffer-relative.  Stops early and returns fn's non-zero result. */
typedef int (*tensor_run_fn)(void *ctx, size_t offset, size_t len);
int tensor_for_each_run(const hg_tensor *t, tensor_run_fn fn, void *ctx);
/* True when tensor_for_each_run visits the view without allocating: its
 * dims (broadcast ones aside) neither interleave nor overlap, so the runs
 * come in address order, each byte once.  False for an invalid view. */
bool tensor_runs_in_order(const hg_tensor *t);
/* True when a and b have the same layout: dtype, ndims, offset, and each
 * used dim's shape and stride (their buffers are the caller's to compare). */
bool tensor_same_layout(const hg_tensor *a, const hg_tensor *b);
/* True when b continues a along one dim: same dtype, ndims and strides,
 * equal shapes but in that dim, and b's offset where a's elements would go
 * on along it.  *out is then a grown along that dim, whose elements are
 * exactly a's and b's (side-by-side tiles of a row are one view of the
 * row).  O(ndims); false when out's extent would overflow. */
bool tensor_join(const hg_tensor *a, const hg_tensor *b, hg_tensor *out);

/* True if byte regions [alo, ahi) and [blo, bhi) intersect (empty never does). */
static inline bool region_overlap(size_t alo, size_t ahi, size_t blo, size_t bhi)
{
    return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

/* ------------------------------------------- watching a buffer's destroy */

/* A watch on a host buffer's destruction (a resident copy's link to its
 * buffer, stage/residency.c).  Every watch operation and the callback run
 * under one process-wide lock (hostbuf_watch_lock), since buffers are
 * destroyed on any thread while their watchers' runners run on others.
 * At hg_hostbuf_destroy each watch is taken off the buffer and `destroyed`
 * is called once for it, under the lock.  O(1) to add or remove; destroy is
 * O(watches of that buffer). */
typedef struct hostbuf_watch {
    struct hostbuf_watch *prev, *next;
    void (*destroyed)(struct hostbuf_watch *w);
} hostbuf_watch;

void hostbuf_watch_lock(void);
void hostbuf_watch_unlock(void);
/* Both with the lock held; remove only a watch that is on a buffer. */
void hostbuf_watch_add(hg_hostbuf *hb, hostbuf_watch *w);
void hostbuf_watch_remove(hg_hostbuf *hb, hostbuf_watch *w);

/* ------------------------------------------------ host buffer write log */

/* One write step of several ranges (a run's copy-back): one generation bump,
 * each range logged.  HG_ERANGE if a range leaves the buffer. */
int hostbuf_mark_ranges(hg_hostbuf *hb, const hg_range *ranges, size_t n);

/* The ranges written through the API after generation `since`, clipped to
 * [lo, hi), sorted and merged, into out[0..max).  Returns their count, or
 * SIZE_MAX when that is unknown (the log no longer reaches back to `since`)
 * or more than max: the caller takes the whole extent as written. */
size_t hostbuf_written_since(const hg_hostbuf *hb, uint64_t since, size_t lo, size_t hi,
                             hg_range *out, size_t max);

/* Sorts r[0..n) by lo and merges overlapping or touching ranges in place;
 * returns the new count.  The one range merge: the write log and copy-back
 * both use it. */
size_t ranges_merge(hg_range *r, size_t n);

/* Number of elements of the view (checked). */
int tensor_numel(const hg_tensor *t, size_t *out);

#endif
