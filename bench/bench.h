/*
 * bench.h: what the benchmarks share: the median of a set of durations.
 * Benchmarks print medians (and ratios measured side by side in one run):
 * these machines are shared, and one sample says little.
 */
#ifndef HG_BENCH_BENCH_H
#define HG_BENCH_BENCH_H

#include <stdint.h>
#include <stdlib.h>

static inline int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) nanoseconds, in ms (sorts v). */
static inline double bench_median_ms(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_u64);
    return (double)v[n / 2] / 1e6;
}

#endif
