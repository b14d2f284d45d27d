/*
 * check.c: the compact golden check of the KV caches.
 *
 * At preset=real the caches are ~0.2 GiB per layer each, and a step writes
 * one row per sequence per layer: a golden of one double per element would
 * be 4x the caches.  Instead:
 *
 *   - the rows this step writes are compared with the golden's K and V rows
 *     (kv_heads * head_dim doubles per sequence per layer) within tolerance;
 *   - every other byte must equal the cache as made (the scene runner
 *     restores it before each round).  make() hashes those bytes, range by
 *     range between written rows; the check hashes the same ranges (64-bit
 *     hash: a false pass needs a collision, ~2^-64).  On a mismatch it finds
 *     the first differing element exactly, by regenerating the cache's
 *     seeded contents, and reports that index.
 *
 * A rank of a tensor-parallel step (split.c) checks its share: its KV
 * heads' slice of every row, against those heads' part of the golden rows.
 */
#include <math.h>
#include <stdlib.h>

#include "../common/workload.h"
#include "qwen3.h"

static const uint32_t cache_args[2] = {QA_K_CACHE, QA_V_CACHE};

/* Bytes of one cache row and one layer of this rank's caches (its KV
 * heads: all of them unless split). */
static size_t row_bytes(const qwen3_state *st)
{
    return st->kv_count * st->dims.head_dim * 2;
}

static size_t layer_bytes(const qwen3_state *st)
{
    return st->dims.num_blocks * st->dims.block * row_bytes(st);
}

/* Element i of this rank's cache as an element of the whole cache, where
 * its seeded contents were generated. */
static size_t whole_index(const qwen3_state *st, size_t i)
{
    size_t dh = st->dims.head_dim, row = st->kv_count * dh;
    return (i / row) * st->dims.kv_heads * dh + st->kv_first * dh + i % row;
}

/* Calls fn(ctx, lo, hi) for each byte range of layer l not written by the
 * step, in order: the gaps between the written rows (st->order). */
typedef bool (*range_fn)(void *ctx, size_t lo, size_t hi);

static bool each_unwritten(const qwen3_state *st, size_t l, range_fn fn, void *ctx)
{
    const qwen3_dims *d = &st->dims;
    size_t at = l * layer_bytes(st), end = at + layer_bytes(st), rb = row_bytes(st);
    for (size_t i = 0; i < d->batch; i++) {
        size_t row = l * layer_bytes(st) + st->slots[st->order[i]] * rb;
        if (row < at)
            continue; /* two sequences on one slot: already skipped */
        if (!fn(ctx, at, row))
            return false;
        at = row + rb;
    }
    return fn(ctx, at, end);
}

typedef struct hash_ctx {
    const void *data;
    uint64_t h;
} hash_ctx;

static bool hash_range(void *ctx, size_t lo, size_t hi)
{
    hash_ctx *hc = ctx;
    hc->h = wl_hash(hc->h, hc->data, lo, hi);
    return true;
}

static uint64_t hash_layer(const qwen3_state *st, const void *data, size_t l)
{
    hash_ctx hc = {data, WL_HASH_SEED};
    each_unwritten(st, l, hash_range, &hc);
    return hc.h;
}

void qwen3_state_free(qwen3_state *st)
{
    if (st == NULL)
        return;
    free(st->rows.k);
    free(st->rows.v);
    free(st->slots);
    free(st->order);
    free(st->hash[0]);
    free(st->hash[1]);
    free(st);
}

int qwen3_check_prepare(qwen3_state *st, const scene_case *c)
{
    const qwen3_dims *d = &st->dims;
    const int32_t *slots = scene_case_data(c, QA_SLOTS);
    st->slots = malloc(d->batch * sizeof *st->slots + 1);
    st->order = malloc(d->batch * sizeof *st->order + 1);
    st->hash[0] = malloc(d->layers * sizeof(uint64_t));
    st->hash[1] = malloc(d->layers * sizeof(uint64_t));
    if (!st->slots || !st->order || !st->hash[0] || !st->hash[1])
        return HG_ENOMEM;
    for (size_t b = 0; b < d->batch; b++) {
        st->slots[b] = (size_t)slots[b];
        st->order[b] = b;
    }
    /* Insertion sort by slot: a batch is small, and qsort has no context. */
    for (size_t i = 1; i < d->batch; i++) {
        size_t b = st->order[i], j = i;
        for (; j > 0 && st->slots[st->order[j - 1]] > st->slots[b]; j--)
            st->order[j] = st->order[j - 1];
        st->order[j] = b;
    }
    for (int k = 0; k < 2; k++) {
        for (size_t l = 0; l < d->layers; l++)
            st->hash[k][l] = hash_layer(st, scene_case_data(c, cache_args[k]), l);
    }
    return 0;
}

/* The first element of an unwritten range that differs from the cache as
 * made (regenerated from its seed). */
typedef struct find_ctx {
    const qwen3_state *st;
    const uint16_t *data;
    qwen3_fill fill;
    size_t bad; /* element index, SIZE_MAX until found */
} find_ctx;

static bool find_range(void *ctx, size_t lo, size_t hi)
{
    find_ctx *fc = ctx;
    for (size_t i = lo / 2; i < hi / 2; i++) {
        if (fc->data[i] != wl_fill_bf16_at(fc->fill.seed, fc->fill.offset, fc->fill.scale,
                                           whole_index(fc->st, i))) {
            fc->bad = i;
            return false;
        }
    }
    return true;
}

/* Checks cache k (0: K, 1: V) of every layer into res. */
static void check_cache(const scene_case *c, const qwen3_state *st, int k, scene_check_result *res)
{
    const qwen3_dims *d = &st->dims;
    const uint16_t *data = scene_case_data(c, cache_args[k]);
    const double *want = k == 0 ? st->rows.k : st->rows.v;
    /* The golden's rows hold every KV head; this rank's start at kv_first. */
    size_t kvd = d->kv_heads * d->head_dim, mine = st->kv_count * d->head_dim;
    size_t first = st->kv_first * d->head_dim, per_layer = layer_bytes(st) / 2;
    for (size_t l = 0; l < d->layers; l++) {
        for (size_t b = 0; b < d->batch; b++) {
            size_t at = l * per_layer + st->slots[b] * mine;
            const double *w = want + (l * d->batch + b) * kvd + first;
            for (size_t i = 0; i < mine; i++)
                scene_check_note(res, at + i, hg_bf16_to_f32(data[at + i]), w[i], st->rtol[k],
                                 st->atol[k]);
        }
        if (hash_layer(st, data, l) == st->hash[k][l])
            continue;
        find_ctx fc = {st, data, st->fill[k], SIZE_MAX};
        each_unwritten(st, l, find_range, &fc);
        if (fc.bad == SIZE_MAX) { /* the hash moved, no element did: made != regenerated */
            res->first_bad = l * per_layer < res->first_bad ? l * per_layer : res->first_bad;
            continue;
        }
        double made = hg_bf16_to_f32(wl_fill_bf16_at(st->fill[k].seed, st->fill[k].offset,
                                                     st->fill[k].scale, whole_index(st, fc.bad)));
        scene_check_note(res, fc.bad, hg_bf16_to_f32(data[fc.bad]), made, 0.0, 0.0);
        res->first_bad = fc.bad < res->first_bad ? fc.bad : res->first_bad;
    }
}

bool qwen3_check(const scene_case *c, scene_check_result *res)
{
    const qwen3_state *st = c->state;
    scene_check_result worst = scene_check_start("");
    for (int k = 0; k < 2; k++) {
        scene_check_result one = scene_check_start(c->args[cache_args[k]].name);
        check_cache(c, st, k, &one);
        if (one.first_bad != SIZE_MAX) {
            one.pass = false;
            *res = one;
            return false;
        }
        worst.output = one.output;
        worst.max_abs_err = fmax(worst.max_abs_err, one.max_abs_err);
        worst.max_rel_err = fmax(worst.max_rel_err, one.max_rel_err);
    }
    *res = worst;
    return true;
}
