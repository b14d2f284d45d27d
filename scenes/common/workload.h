/*
 * workload.h: what the real-workload scenes (paged_attention, qwen3_decode)
 * share on the host side: a seeded generator fast enough for gigabytes of
 * weights and caches, a content hash for compact golden checks, hand-made
 * views into stacked args, and the host's memory for sizing checks.
 *
 * Generated values depend only on (seed, element index), so a check can
 * recompute what any element held when the case was made without keeping a
 * copy of it.
 */
#ifndef HG_SCENES_COMMON_WORKLOAD_H
#define HG_SCENES_COMMON_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scene/scene.h"

/* The value element i of stream `seed` gets before scaling: a multiple of
 * 2^-15 in (-1, 1), symmetric, from 16 bits of a 64-bit hash (four elements
 * share one hash, which keeps a fill of 10^9 elements near a second). */
double wl_uniform(uint64_t seed, size_t i);

/* Fills tensor arg `arg` (f32 or bf16, dense from element 0) with
 * offset + scale * wl_uniform(seed, i), rounded to nearest even; marks the
 * buffer written.  HG_EINVAL for another dtype. */
int wl_fill(scene_case *c, uint32_t arg, uint64_t seed, double offset, double scale);

/* The bf16 bits wl_fill stores for element i of a bf16 arg filled with the
 * same seed, offset and scale. */
uint16_t wl_fill_bf16_at(uint64_t seed, double offset, double scale, size_t i);

/* A 64-bit content hash of bytes [lo, hi) of data, chained through `h`
 * (start with WL_HASH_SEED).  Hashing a buffer in pieces gives the same value
 * as hashing the concatenation only when the pieces are cut at the same
 * offsets: callers hash the same ranges at make time and at check time. */
#define WL_HASH_SEED 0x6a09e667f3bcc909ull
uint64_t wl_hash(uint64_t h, const void *data, size_t lo, size_t hi);

/* A view over the same buffer as `base`, starting `offset` elements in, of
 * the given dense-within-rows shape: ndims dims, shape[], strides[]. */
hg_tensor wl_view(const hg_tensor *base, size_t offset, uint32_t ndims, const size_t *shape,
                  const size_t *strides);

/* A block table for a pool of num_blocks cache blocks: sequence b gets
 * blocks[b] of them, taken in a seeded shuffled order so a sequence's blocks
 * are scattered as in a real pool; table is [batch][max_blocks], unused
 * entries -1.  False if the pool is too small or memory runs out. */
bool wl_block_table(size_t batch, const size_t *blocks, size_t max_blocks, size_t num_blocks,
                    uint64_t seed, int32_t *table);

/* Physical memory of this host in bytes (0 if unknown). */
uint64_t wl_host_memory(void);

/* Bytes as GiB, for messages. */
static inline double wl_gib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* True if `host` bytes on the host and `device` bytes on the sim device
 * (both in this host's RAM) fit: device within the sim's default capacity,
 * half of RAM, and both together within RAM less 1/16 for everything else. */
bool wl_memory_fits(uint64_t host, uint64_t device);

/* Checks a case's memory against this host before anything large is
 * allocated: `host` bytes held on the host (args, the scene runner's snapshot
 * and copy-back staging, goldens) and `device` bytes on the sim device (which
 * defaults to half of physical memory and is backed by host memory too).
 * Returns 0, or (unless wl_memory_fits) HG_ERANGE with a message naming
 * `param`, `what` and the numbers. */
int wl_check_memory(const char *param, const char *what, uint64_t host, uint64_t device,
                    hg_err *err);

/* ------------------------------------------------ attention task helper */

/* Run-owned scratch for attention chunks: per chunk slot, scores [heads,
 * ctok], stats [heads, 2] (max, sum) and a partial output [heads, d]. */
typedef struct wl_attn_scratch {
    uint32_t scores, stats, parts;
    hg_tensor scores_v, stats_v, parts_v;
    size_t heads, d, ctok;
} wl_attn_scratch;

int wl_attn_scratch_take(hg_orch *o, size_t slots, size_t heads, size_t d, size_t ctok,
                         wl_attn_scratch *s);

/* One sequence's attention over a paged cache. */
typedef struct wl_attn_seq {
    hg_task_arg q, out; /* IN and OUT views of one row of heads * d */
    uint32_t k_arg, v_arg;
    const hg_tensor *k_cache, *v_cache; /* the caches' arg views */
    size_t cache_offset;                /* element offset of block 0 (a layer) */
    const int32_t *blocks;              /* the sequence's block table row */
    size_t tokens, block, kv_heads, chunk;
    uint64_t scale_bits; /* f64 */
} wl_attn_seq;

/* Chunks of `chunk` blocks that `tokens` tokens need. */
size_t wl_attn_chunks(size_t tokens, size_t block, size_t chunk);

/* Submits a QK, softmax and PV task per chunk (slots first, first + 1, ...)
 * and the merge into s->out (kernels.h describes them). */
int wl_attn_submit(hg_orch *o, const wl_attn_seq *s, const wl_attn_scratch *scr, size_t first);

#endif
