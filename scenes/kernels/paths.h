/*
 * paths.h: the AVX2 (+ FMA, F16C) paths' entry points, which the kernels'
 * drivers call when kern_isa_now() is KERN_AVX2 (internal to scenes/kernels
 * and the scenes that call the tile kernels).  Each lives in its own file,
 * compiled with target attributes: the build sets no -march.
 */
#ifndef HG_KERNELS_PATHS_H
#define HG_KERNELS_PATHS_H

#include "kernels.h"
#include "simd.h"

#if KERN_HAVE_X86
#define KERN_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

/* proj_avx2.c: kern_proj's y rows [r0, r0 + nrows) (nrows <= 16) x
 * weight rows [0, n) (n <= 512), the whole K. */
void kern_proj_chunk_avx2(const kern_mat *x, size_t r0, size_t nrows, const uint16_t *w, size_t n,
                          size_t k, size_t ldw, float *y, size_t ldy);
#endif

#endif
