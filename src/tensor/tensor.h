/*
 * tensor.h: internal view arithmetic beyond the public hg_tensor_* calls.
 */
#ifndef HG_TENSOR_TENSOR_H
#define HG_TENSOR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>

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

/* True if byte regions [alo, ahi) and [blo, bhi) intersect (empty never does). */
static inline bool region_overlap(size_t alo, size_t ahi, size_t blo, size_t bhi)
{
    return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

/* Number of elements of the view (checked). */
int tensor_numel(const hg_tensor *t, size_t *out);

#endif
