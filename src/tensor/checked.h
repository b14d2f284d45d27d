/*
 * checked.h: size arithmetic that cannot overflow silently.
 *
 * The reference design's review found overflowing align_up, sums and slice
 * bounds.  Every size hostgraph computes goes through these: each returns
 * false (and leaves *out untouched) when the exact result does not fit.
 */
#ifndef HG_TENSOR_CHECKED_H
#define HG_TENSOR_CHECKED_H

#include <stdbool.h>
#include <stddef.h>

static inline bool ck_add(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_add_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

static inline bool ck_mul(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return false;
    *out = r;
    return true;
}

/* Rounds v up to a multiple of align (a power of two). */
static inline bool ck_align_up(size_t v, size_t align, size_t *out)
{
    size_t r;
    if (align == 0 || (align & (align - 1)) != 0)
        return false;
    if (!ck_add(v, align - 1, &r))
        return false;
    *out = r & ~(align - 1);
    return true;
}

#endif
