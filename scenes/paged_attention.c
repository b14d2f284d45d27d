/*
 * paged_attention.c: decode-time attention of B sequences over a paged KV
 * cache, as a serving engine runs it.
 *
 * query [B, H, D] bf16; key_cache and value_cache [num_blocks, block_size,
 * kv_heads, D] bf16, paged: sequence b's token t lives in block
 * block_table[b][t / block_size] at row t % block_size; context_lens [B]
 * i32; out [B, H, D] f32; scale a SCALAR (1/sqrt(D)).  Query heads share
 * kv heads in groups of H / kv_heads (grouped-query attention).
 *
 * The orchestration reads context_lens and block_table on the host and sizes
 * each sequence's work from them: chunks of `chunk_blocks` blocks, each a
 * QK, softmax and PV task, then one merge per sequence (kernels.h).  The
 * cache's blocks are handed out shuffled, so a sequence's blocks are
 * scattered as in a real block pool, and lengths differ per sequence.
 *
 * Presets: `tiny` (the default, for tests) and `real`, near the reference's
 * shape: B=256, H=16, D=128, block 128, context up to 8192.  With the
 * reference's kv_heads=16 a cache would be 8 GiB: 16 GiB for both, and as
 * much again for the device's copy, too much for a 24 GiB machine; so `real`
 * takes kv_heads=2 (GQA 8:1): 0.96 GB per cache, a peak RSS of ~3.75 GiB.
 *
 * Golden: plain double loops over the same bf16 inputs (no kernel code).
 * The kernels accumulate in f32, so outputs agree to ~1e-6 relative; the
 * tolerance (rtol 1e-4, atol 1e-5) is loose enough for f32 sums over 8192
 * tokens and tight enough to see one token dropped (~1/len of an output).
 */
#include <math.h>
#include <stdlib.h>

#include "common/workload.h"
#include "kernels/kernels.h"
#include "scene/scene.h"

enum { P_PRESET, P_BATCH, P_HEADS, P_KV_HEADS, P_HEAD_DIM, P_BLOCK, P_CONTEXT, P_CHUNK, P_COUNT };

enum { PRESET_TINY, PRESET_REAL };

/* Golden tolerance (see the top of the file). */
#define PA_RTOL 1e-4
#define PA_ATOL 1e-5

static const scene_param_value preset_names[] = {
    {"tiny", PRESET_TINY}, {"real", PRESET_REAL}, {NULL, 0}};

static const scene_param pa_params[] = {
    [P_PRESET] = {"preset", PRESET_TINY, PRESET_TINY, PRESET_REAL,
                  "tiny (tests) or real (B=256 H=16 kv_heads=2 D=128 block 128 context 8192)", NULL,
                  preset_names},
    [P_BATCH] = {"batch", 0, 0, 4096, "sequences (0: the preset's, 5 or 256)", NULL, NULL},
    [P_HEADS] = {"heads", 0, 0, 128, "query heads (0: the preset's, 4 or 16)", NULL, NULL},
    [P_KV_HEADS] = {"kv_heads", 0, 0, 128, "kv heads, dividing heads (0: the preset's, 2)", NULL,
                    NULL},
    [P_HEAD_DIM] = {"head_dim", 0, 0, 512, "head dimension D (0: the preset's, 16 or 128)", NULL,
                    NULL},
    [P_BLOCK] = {"block_size", 0, 0, 1024, "tokens per cache block (0: the preset's, 8 or 128)",
                 NULL, NULL},
    [P_CONTEXT] = {"context", 0, 0, 1 << 20,
                   "longest context; others are up to 22% shorter (0: the preset's, 37 or 8192)",
                   NULL, NULL},
    [P_CHUNK] = {"chunk_blocks", 0, 0, KERN_ATTN_MAX_BLOCKS,
                 "cache blocks per chunk task (0: the preset's, 2 or 4)", NULL, NULL},
};

typedef struct pa_dims {
    size_t batch, heads, kv_heads, d, block, context, chunk;
    size_t max_blocks, num_blocks;
} pa_dims;

static size_t pick(int64_t v, size_t tiny, size_t real, int64_t preset)
{
    return v > 0 ? (size_t)v : preset == PRESET_REAL ? real : tiny;
}

/* Sequence b's length: up to 22% shorter than the longest, so sequences
 * need different numbers of blocks and chunks. */
static size_t seq_len(size_t context, size_t b)
{
    return context - (b * 5 % 8) * context / 32; /* >= 25/32 of context >= 1 */
}

static int dims_from(const int64_t *p, pa_dims *d, hg_err *err)
{
    int64_t preset = p[P_PRESET];
    *d = (pa_dims){.batch = pick(p[P_BATCH], 5, 256, preset),
                   .heads = pick(p[P_HEADS], 4, 16, preset),
                   .kv_heads = pick(p[P_KV_HEADS], 2, 2, preset),
                   .d = pick(p[P_HEAD_DIM], 16, 128, preset),
                   .block = pick(p[P_BLOCK], 8, 128, preset),
                   .context = pick(p[P_CONTEXT], 37, 8192, preset),
                   .chunk = pick(p[P_CHUNK], 2, 4, preset)};
    if (d->heads % d->kv_heads != 0)
        return err_set(err, HG_ERANGE, "param 'kv_heads': %zu does not divide heads %zu",
                       d->kv_heads, d->heads);
    d->max_blocks = (d->context + d->block - 1) / d->block;
    for (size_t b = 0; b < d->batch; b++)
        d->num_blocks += (seq_len(d->context, b) + d->block - 1) / d->block;
    d->num_blocks += d->batch / 4 + 1; /* a pool has free blocks too */
    return 0;
}

/* --------------------------------------------------------- orchestration */

enum { A_QUERY, A_KEY, A_VALUE, A_TABLE, A_LENS, A_OUT, A_SCALE, A_CHUNK, A_COUNT };

static const char *const pa_arg_names[A_COUNT] = {"query",       "key_cache",    "value_cache",
                                                  "block_table", "context_lens", "out",
                                                  "scale",       "chunk_blocks"};

/* What the orchestration knows once it has read and checked its inputs. */
typedef struct pa_plan {
    uint32_t idx[A_COUNT];
    const hg_arg *args[A_COUNT];
    const int32_t *table, *lens;
    size_t batch, heads, kv_heads, d, block, num_blocks, max_blocks, chunk;
} pa_plan;

static int read_inputs(hg_orch *o, pa_plan *p)
{
    const void *table, *lens;
    int rc = scene_orch_lookup(o, pa_arg_names, A_COUNT, p->idx, p->args);
    if (rc != 0 || (rc = hg_orch_host_view(o, p->idx[A_TABLE], &table)) != 0 ||
        (rc = hg_orch_host_view(o, p->idx[A_LENS], &lens)) != 0)
        return rc;
    const hg_tensor *k = &p->args[A_KEY]->tensor, *q = &p->args[A_QUERY]->tensor;
    const hg_tensor *bt = &p->args[A_TABLE]->tensor;
    if (q->ndims != 3 || k->ndims != 4 || bt->ndims != 2 || q->shape[2] != k->shape[3] ||
        p->args[A_LENS]->tensor.shape[0] != q->shape[0] || bt->shape[0] != q->shape[0])
        return hg_orch_fail(o, HG_EINVAL,
                            "args 'query', 'key_cache', 'block_table', 'context_lens': shapes "
                            "do not agree");
    p->table = table;
    p->lens = lens;
    p->batch = q->shape[0];
    p->heads = q->shape[1];
    p->d = q->shape[2];
    p->num_blocks = k->shape[0];
    p->block = k->shape[1];
    p->kv_heads = k->shape[2];
    p->max_blocks = bt->shape[1];
    p->chunk = (size_t)p->args[A_CHUNK]->scalar;
    if (p->chunk < 1 || p->chunk > KERN_ATTN_MAX_BLOCKS)
        return hg_orch_fail(o, HG_EINVAL, "arg 'chunk_blocks': %zu is outside [1, %d]", p->chunk,
                            KERN_ATTN_MAX_BLOCKS);
    for (size_t b = 0; b < p->batch; b++) {
        int32_t len = p->lens[b];
        if (len < 1 || (size_t)len > p->max_blocks * p->block)
            return hg_orch_fail(o, HG_EINVAL,
                                "arg 'context_lens': sequence %zu has %d tokens, want 1 to %zu", b,
                                (int)len, p->max_blocks * p->block);
        for (size_t i = 0; i < ((size_t)len + p->block - 1) / p->block; i++) {
            int32_t blk = p->table[b * p->max_blocks + i];
            if (blk < 0 || (size_t)blk >= p->num_blocks)
                return hg_orch_fail(o, HG_EINVAL,
                                    "arg 'block_table': sequence %zu block %zu is %d, the cache "
                                    "has %zu blocks",
                                    b, i, (int)blk, p->num_blocks);
        }
    }
    return 0;
}

static int pa_orchestrate(hg_orch *o, void *user)
{
    pa_plan p;
    wl_attn_scratch scr;
    int rc = read_inputs(o, &p);
    if (rc != 0)
        return rc;
    size_t slots = 0, hd = p.heads * p.d, s1[1] = {hd}, u1[1] = {1};
    for (size_t b = 0; b < p.batch; b++)
        slots += wl_attn_chunks((size_t)p.lens[b], p.block, p.chunk);
    rc = wl_attn_scratch_take(o, slots, p.heads, p.d, p.chunk * p.block, &scr);
    slots = 0;
    for (size_t b = 0; rc == 0 && b < p.batch; b++) {
        wl_attn_seq s = {
            .q = {p.idx[A_QUERY], HG_IN, wl_view(&p.args[A_QUERY]->tensor, b * hd, 1, s1, u1)},
            .out = {p.idx[A_OUT], HG_OUT, wl_view(&p.args[A_OUT]->tensor, b * hd, 1, s1, u1)},
            .k_arg = p.idx[A_KEY],
            .v_arg = p.idx[A_VALUE],
            .k_cache = &p.args[A_KEY]->tensor,
            .v_cache = &p.args[A_VALUE]->tensor,
            .blocks = p.table + b * p.max_blocks,
            .tokens = (size_t)p.lens[b],
            .block = p.block,
            .kv_heads = p.kv_heads,
            .chunk = p.chunk,
            .scale_bits = p.args[A_SCALE]->scalar};
        rc = wl_attn_submit(o, &s, &scr, slots);
        slots += wl_attn_chunks(s.tokens, p.block, p.chunk);
    }
    return rc;
}

/* ---------------------------------------------------------------- golden */

static double bf16_at(const uint16_t *base, size_t i)
{
    return (double)hg_bf16_to_f32(base[i]);
}

/* The element index of sequence b's token t, kv head g, in a cache. */
static size_t cache_row(const pa_dims *d, const int32_t *table, size_t b, size_t t, size_t g)
{
    size_t block = (size_t)table[b * d->max_blocks + t / d->block];
    return ((block * d->block + t % d->block) * d->kv_heads + g) * d->d;
}

/* out[b][h] = softmax(scale q k^T) v over sequence b's tokens, in double.
 * A (sequence, kv head)'s query rows and each cache row are widened to
 * double once, not once per head.  False if it cannot have its scratch. */
static bool pa_golden(const pa_dims *d, const uint16_t *q, const uint16_t *kc, const uint16_t *vc,
                      const int32_t *table, const int32_t *lens, double scale, double *golden)
{
    size_t group = d->heads / d->kv_heads;
    double *scores = malloc(group * d->context * sizeof(double));
    double *kv = malloc(d->d * sizeof(double));
    double *qg = malloc(group * d->d * sizeof(double));
    bool ok = scores != NULL && kv != NULL && qg != NULL;
    for (size_t b = 0; ok && b < d->batch; b++) {
        size_t len = (size_t)lens[b];
        for (size_t g = 0; g < d->kv_heads; g++) {
            for (size_t i = 0; i < group * d->d; i++)
                qg[i] = bf16_at(q, (b * d->heads + g * group) * d->d + i);
            for (size_t t = 0; t < len; t++) {
                size_t at = cache_row(d, table, b, t, g);
                for (size_t i = 0; i < d->d; i++)
                    kv[i] = bf16_at(kc, at + i);
                for (size_t h = 0; h < group; h++) {
                    double s = 0.0;
                    for (size_t i = 0; i < d->d; i++)
                        s += qg[h * d->d + i] * kv[i];
                    scores[h * len + t] = s * scale;
                }
            }
            for (size_t h = 0; h < group; h++) {
                double m = -INFINITY, l = 0.0;
                for (size_t t = 0; t < len; t++)
                    m = fmax(m, scores[h * len + t]);
                for (size_t t = 0; t < len; t++) {
                    scores[h * len + t] = exp(scores[h * len + t] - m);
                    l += scores[h * len + t];
                }
                for (size_t t = 0; t < len; t++)
                    scores[h * len + t] /= l;
            }
            for (size_t t = 0; t < len; t++) {
                size_t at = cache_row(d, table, b, t, g);
                for (size_t i = 0; i < d->d; i++)
                    kv[i] = bf16_at(vc, at + i);
                for (size_t h = 0; h < group; h++) {
                    double *o = golden + (b * d->heads + g * group + h) * d->d;
                    for (size_t i = 0; i < d->d; i++)
                        o[i] += scores[h * len + t] * kv[i];
                }
            }
        }
    }
    free(scores);
    free(kv);
    free(qg);
    return ok;
}

/* ------------------------------------------------------------------ make */

/* Lengths per sequence and a shuffled block table over the pool. */
static bool fill_table(const pa_dims *d, int32_t *table, int32_t *lens)
{
    size_t *blocks = malloc(d->batch * sizeof *blocks + 1);
    if (blocks == NULL)
        return false;
    for (size_t b = 0; b < d->batch; b++) {
        lens[b] = (int32_t)seq_len(d->context, b);
        blocks[b] = ((size_t)lens[b] + d->block - 1) / d->block;
    }
    bool ok = wl_block_table(d->batch, blocks, d->max_blocks, d->num_blocks, 41, table);
    free(blocks);
    return ok;
}

static int pa_make(scene_case *c, const int64_t *params, void *user)
{
    (void)user;
    hg_err *err = scene_case_err(c);
    pa_dims d;
    int rc = dims_from(params, &d, err);
    if (rc != 0)
        return rc;
    /* What runs, for the report: the preset's values for its 0s (scene.h). */
    const size_t ran[] = {
        [P_BATCH] = d.batch, [P_HEADS] = d.heads,     [P_KV_HEADS] = d.kv_heads, [P_HEAD_DIM] = d.d,
        [P_BLOCK] = d.block, [P_CONTEXT] = d.context, [P_CHUNK] = d.chunk};
    for (uint32_t i = P_BATCH; i < sizeof ran / sizeof ran[0]; i++)
        c->params[i] = (int64_t)ran[i];
    size_t sq[3] = {d.batch, d.heads, d.d}, sc[4] = {d.num_blocks, d.block, d.kv_heads, d.d};
    size_t st[2] = {d.batch, d.max_blocks}, sl[1] = {d.batch};
    uint64_t cache = (uint64_t)d.num_blocks * d.block * d.kv_heads * d.d * 2;
    uint64_t qo = (uint64_t)d.batch * d.heads * d.d * (2 + 3 * 4 + 8); /* q, out x3, golden */
    if ((rc = wl_check_memory("context", "this paged_attention case", 2 * cache + qo,
                              2 * cache + qo, err)) != 0)
        return rc;
    uint32_t q, k, v, table, lens, out;
    if ((rc = scene_case_add_tensor(c, "query", HG_IN, HG_BF16, 3, sq, &q, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "key_cache", HG_IN, HG_BF16, 4, sc, &k, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "value_cache", HG_IN, HG_BF16, 4, sc, &v, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "block_table", HG_IN, HG_I32, 2, st, &table, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "context_lens", HG_IN, HG_I32, 1, sl, &lens, err)) != 0 ||
        (rc = scene_case_add_tensor(c, "out", HG_OUT, HG_F32, 3, sq, &out, err)) != 0)
        return rc;
    double scale = 1.0 / sqrt((double)d.d);
    if ((rc = scene_case_add_scalar(c, "scale", hg_scalar_f64(scale), err)) != 0 ||
        (rc = scene_case_add_scalar(c, "chunk_blocks", d.chunk, err)) != 0)
        return rc;
    /* q and k at +-sqrt(3) have unit variance: scores of unit spread. */
    if ((rc = wl_fill(c, q, 51, 0.0, 1.7)) != 0 || (rc = wl_fill(c, k, 52, 0.0, 1.7)) != 0 ||
        (rc = wl_fill(c, v, 53, 0.0, 1.0)) != 0 || (rc = wl_fill(c, out, 54, 0.0, 1000.0)) != 0)
        return err_set(err, rc, "paged_attention: cannot fill inputs");
    if (!fill_table(&d, scene_case_data(c, table), scene_case_data(c, lens)))
        return err_set(err, HG_ENOMEM, "paged_attention: no host memory for the block table");
    hg_hostbuf *tb = c->args[table].tensor.host, *lb = c->args[lens].tensor.host;
    if ((rc = hg_hostbuf_mark_written(tb, 0, hg_hostbuf_size(tb))) != 0 ||
        (rc = hg_hostbuf_mark_written(lb, 0, hg_hostbuf_size(lb))) != 0)
        return err_set(err, rc, "paged_attention: cannot mark the block table written");
    double *golden;
    if ((rc = scene_case_add_check(c, out, PA_RTOL, PA_ATOL, &golden, err)) != 0)
        return rc;
    if (!pa_golden(&d, scene_case_data(c, q), scene_case_data(c, k), scene_case_data(c, v),
                   scene_case_data(c, table), scene_case_data(c, lens), scale, golden))
        return err_set(err, HG_ENOMEM, "paged_attention: no host memory for the golden");
    c->callable = (hg_callable){"paged_attention", pa_orchestrate, NULL};
    return 0;
}

static const char *const pa_host_reads[] = {"block_table", "context_lens", NULL};

const scene scene_paged_attention = {
    .size = sizeof(hg_scene_def),
    .version = HG_SCENE_DEF_VERSION,
    .name = "paged_attention",
    .description = "decode attention over a paged bf16 KV cache: QK, softmax, PV per block "
                   "chunk, then a merge per sequence",
    .params = pa_params,
    .nparams = P_COUNT,
    .make = pa_make,
    .host_reads = pa_host_reads,
};
