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

/* ------------------------------------------------------------ attention */

/* A chunk's cache blocks: args[first .. first + nb), each bf16
 * [block_size, kv_heads, D] with dense rows. */
typedef struct chunk_blocks {
    const hg_kview *blocks;
    size_t nb, block_size, kv_heads, d;
} chunk_blocks;

/* What the token loops of QK and PV need: the chunk's blocks, the heads
 * per kv head, the tokens, and the scores or probabilities [heads][ctok]. */
typedef struct chunk_job {
    const chunk_blocks *cb;
    size_t group, tokens, ctok;
    float *scores;  /* QK: written; PV: read only */
    const float *q; /* QK: heads x d */
    float scale;
    float *part; /* PV: heads x d, accumulated */
    float *row;  /* d floats of scratch */
} chunk_job;

#if KERN_HAVE_X86
/* proj_avx2.c: kern_proj's y rows [r0, r0 + nrows) (nrows <= 16) x
 * weight rows [0, n) (n <= 512), the whole K. */
void kern_proj_chunk_avx2(const kern_mat *x, size_t r0, size_t nrows, const uint16_t *w, size_t n,
                          size_t k, size_t ldw, float *y, size_t ldy);

/* attention_avx2.c: QK and PV over a chunk (scores, or part, which the task
 * zeroed; false, doing nothing, when D is not a multiple of 8), and softmax
 * over one row with the portable path's bits. */
bool kern_attn_qk_avx2(const chunk_job *j);
bool kern_attn_pv_avx2(const chunk_job *j);
void kern_attn_softmax_avx2(float *row, size_t n, float *m, float *l);
#endif

#endif
