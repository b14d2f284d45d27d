/*
 * qwen3.h: one decode step of Qwen3 (14B at preset=real) for a batch of
 * sequences, split over the files of this folder:
 *
 *   ../qwen3_decode.c  the scene: params, presets, args and their contents
 *   orch.c             the orchestration: tasks per layer per tile row
 *   kernels.c          the step's vector kernels (norms, RoPE, KV write, MLP)
 *   kernels_cl.c       their OpenCL slots
 *   golden.c           the plain double reference of the whole step
 *   check.c            the compact golden check of the KV caches
 *   split.c            one rank's share of a tensor-parallel step (--tp)
 *
 * Per layer, for each sequence: RMSNorm -> q, k, v projections -> q-norm and
 * k-norm (RMSNorm over each head) -> RoPE (rotate-half) at the sequence's
 * position -> this step's K and V rows into the paged cache at the
 * sequence's slot -> grouped-query attention over the context -> output
 * projection -> residual add -> RMSNorm -> gate and up projections ->
 * SiLU(gate) x up -> down projection -> residual add.
 *
 * Numbers: weights bf16 [layer, out, in] (nn.Linear's layout: the dot runs
 * over contiguous `in`); RMSNorm weights f32; activations bf16 between
 * layers and f32 inside one, except that every projection rounds its input
 * to bf16 (a bf16 model's linear layers see bf16); sums in f32.  The golden
 * rounds at exactly those points and computes everything else in double.
 *
 * Sequences: seq_lens[b] counts the tokens of sequence b including this
 * step's, which sits at position seq_lens[b] - 1, in cache slot
 * slot_mapping[b] (= block_table[b][pos / block] * block + pos % block).
 */
#ifndef HG_SCENES_QWEN3_QWEN3_H
#define HG_SCENES_QWEN3_QWEN3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scene/scene.h"

#define QWEN3_TILE_ROWS 16 /* batch rows a projection task takes (one weight pass) */
/* A phase's last projection tiles that go as two tasks of half the rows (orch.c) */
#define QWEN3_TAIL_TILES 2

typedef struct qwen3_dims {
    size_t layers, batch, hidden, heads, kv_heads, head_dim, inter;
    size_t context;    /* the longest sequence's cached tokens before the step */
    size_t block;      /* tokens per cache block */
    size_t max_blocks; /* block table columns */
    size_t num_blocks; /* cache blocks per layer */
    size_t rope_len;   /* rows of the rope tables */
    size_t chunk;      /* cache blocks per attention chunk task */
    size_t tile_bytes; /* weight bytes a projection task aims to read */
    double eps, theta;
} qwen3_dims;

/* The run's args, in order (scalars last). */
enum {
    QA_HIDDEN,
    QA_W_IN,
    QA_W_POST,
    QA_WQ,
    QA_WK,
    QA_WV,
    QA_Q_NORM,
    QA_K_NORM,
    QA_WO,
    QA_W_GATE,
    QA_W_UP,
    QA_W_DOWN,
    QA_COS,
    QA_SIN,
    QA_SEQ_LENS,
    QA_TABLE,
    QA_SLOTS,
    QA_K_CACHE,
    QA_V_CACHE,
    QA_OUT,
    QA_EPS,        /* SCALAR f64: RMSNorm epsilon */
    QA_TILE_BYTES, /* SCALAR: weight bytes per projection task */
    QA_CHUNK,      /* SCALAR: cache blocks per attention chunk */
    QA_COUNT
};

extern const char *const qwen3_arg_names[QA_COUNT];

/* Cached tokens of sequence b before the step: up to 22% fewer than the
 * longest, so sequences need different numbers of blocks and chunks. */
size_t qwen3_cached_len(size_t context, size_t b);

/* Column tile width of a projection with n outputs and k inputs: the
 * largest unit * 2^i dividing n whose weights (w * k bf16) fit tile_bytes,
 * at least unit.  unit is head_dim for q, k and v (a tile holds whole
 * heads), 1 otherwise. */
size_t qwen3_tile_width(size_t n, size_t k, size_t unit, size_t tile_bytes);

/* The orchestration (orch.c). */
int qwen3_orchestrate(hg_orch *o, void *user);

/* Vector kernels (kernels.c); orch.c documents their args. */
extern const hg_kernel qwen3_rmsnorm;
extern const hg_kernel qwen3_add_rmsnorm;
extern const hg_kernel qwen3_head_norm_rope;
extern const hg_kernel qwen3_kv_write;
extern const hg_kernel qwen3_silu_mul;
extern const hg_kernel qwen3_residual;
/* Their OpenCL program (kernels_cl.c): each slot takes the dtypes orch.c
 * passes (an OpenCL kernel cannot see a view's dtype). */
extern const char qwen3_cl_source[];

/* What the golden computes besides `out`: each layer's written K and V rows
 * (kv_heads * head_dim values per sequence), before bf16 rounding. */
typedef struct qwen3_golden_rows {
    double *k, *v; /* [layers][batch][kv_heads * head_dim] */
} qwen3_golden_rows;

/* The reference step over the case's inputs (golden.c): fills out_golden
 * ([batch][hidden]) and rows.  HG_ENOMEM if its scratch cannot be had. */
int qwen3_golden(const qwen3_dims *d, const scene_case *c, double *out_golden,
                 qwen3_golden_rows *rows);

/* How the caches were filled, so the check can recompute any element. */
typedef struct qwen3_fill {
    uint64_t seed;
    double offset, scale;
} qwen3_fill;

/* The case's private state: what the compact check needs (check.c). */
typedef struct qwen3_state {
    qwen3_dims dims;
    qwen3_golden_rows rows;
    size_t *slots;           /* [batch] written cache slot per sequence */
    size_t *order;           /* [batch] sequences by slot, for ranges */
    uint64_t *hash[2];       /* [layers] hash of each cache's unwritten bytes */
    qwen3_fill fill[2];      /* k_cache, v_cache */
    double rtol[2], atol[2]; /* written K rows, V rows */
    /* The KV heads this rank's caches hold, [kv_first, kv_first +
     * kv_count) of dims.kv_heads (all of them unless split). */
    size_t kv_first, kv_count;
} qwen3_state;

/* Cuts the case down to rank tp->rank's share of a tp->size-way tensor-
 * parallel step (split.c): HG_EINVAL naming --tp unless tp->size divides
 * the query heads, the KV heads and the intermediate size. */
int qwen3_split(scene_case *c, qwen3_state *st, const scene_tp *tp, hg_err *err);

/* Records the slots and hashes the caches' unwritten bytes as made. */
int qwen3_check_prepare(qwen3_state *st, const scene_case *c);
/* The scene_check_fn of the case: written rows against the golden, the
 * rest byte for byte against the caches as made. */
bool qwen3_check(const scene_case *c, scene_check_result *res);
void qwen3_state_free(qwen3_state *st);

#endif
