/*
 * attn_tasks.c: submitting one sequence's paged attention as tasks, for
 * paged_attention and qwen3_decode alike: per chunk of cache blocks a QK,
 * a softmax and a PV task, then a merge (kernels.h has the math).
 *
 * Each chunk task's cache args are the chunk's blocks, one view each, so a
 * block written earlier in the same run (a decode step's new K/V row) is a
 * dependency the graph sees.
 */
#include "../kernels/kernels.h"
#include "workload.h"

int wl_attn_scratch_take(hg_orch *o, size_t slots, size_t heads, size_t d, size_t ctok,
                         wl_attn_scratch *s)
{
    size_t sc[3] = {slots, heads, ctok}, st[3] = {slots, heads, 2}, sp[3] = {slots, heads, d};
    s->heads = heads;
    s->d = d;
    s->ctok = ctok;
    int rc = hg_orch_scratch(o, "attn_scores", HG_F32, 3, sc, &s->scores, &s->scores_v);
    if (rc == 0)
        rc = hg_orch_scratch(o, "attn_stats", HG_F32, 3, st, &s->stats, &s->stats_v);
    if (rc == 0)
        rc = hg_orch_scratch(o, "attn_parts", HG_F32, 3, sp, &s->parts, &s->parts_v);
    return rc;
}

size_t wl_attn_chunks(size_t tokens, size_t block, size_t chunk)
{
    size_t blocks = (tokens + block - 1) / block;
    return (blocks + chunk - 1) / chunk;
}

/* Chunk c's blocks of one cache, as IN task args into out[]. */
static uint32_t block_args(const wl_attn_seq *s, uint32_t arg, const hg_tensor *cache, size_t c,
                           hg_task_arg *out)
{
    size_t d = cache->shape[cache->ndims - 1], row = s->kv_heads * d;
    size_t blocks = (s->tokens + s->block - 1) / s->block;
    size_t shape[3] = {s->block, s->kv_heads, d}, strides[3] = {row, d, 1};
    uint32_t n = 0;
    for (size_t i = c * s->chunk; i < blocks && i < (c + 1) * s->chunk; i++) {
        size_t at = s->cache_offset + (size_t)s->blocks[i] * s->block * row;
        out[n++] = (hg_task_arg){arg, HG_IN, wl_view(cache, at, 3, shape, strides)};
    }
    return n;
}

static int submit(hg_orch *o, const hg_kernel *k, const hg_task_arg *a, uint32_t n,
                  const uint64_t *sc, uint32_t nsc)
{
    hg_task_desc desc = {.kernel = k, .args = a, .nargs = n, .scalars = sc, .nscalars = nsc};
    return hg_task_submit(o, &desc, NULL);
}

/* QK, softmax and PV of chunk c into chunk slot `slot`. */
static int submit_chunk(hg_orch *o, const wl_attn_seq *s, const wl_attn_scratch *scr, size_t c,
                        size_t slot)
{
    size_t h = scr->heads, ctok = scr->ctok, tokens = s->tokens - c * ctok;
    size_t s2[2] = {h, ctok}, u2[2] = {ctok, 1}, st[2] = {h, 2}, ust[2] = {2, 1};
    size_t sp[2] = {h, scr->d}, up[2] = {scr->d, 1};
    hg_tensor scores = wl_view(&scr->scores_v, slot * h * ctok, 2, s2, u2);
    uint64_t sc[2] = {tokens < ctok ? tokens : ctok, s->scale_bits};
    hg_task_arg a[HG_MAX_TASK_ARGS];
    a[0] = s->q;
    uint32_t n = 1 + block_args(s, s->k_arg, s->k_cache, c, a + 1);
    a[n++] = (hg_task_arg){scr->scores, HG_OUT, scores};
    int rc = submit(o, kern_attn_qk_for(s->q.view.dtype, n - 2), a, n, sc, 2);
    hg_task_arg sm[2] = {{scr->scores, HG_INOUT, scores},
                         {scr->stats, HG_OUT, wl_view(&scr->stats_v, slot * h * 2, 2, st, ust)}};
    if (rc == 0)
        rc = submit(o, &kern_attn_softmax, sm, 2, sc, 1);
    a[0] = (hg_task_arg){scr->scores, HG_IN, scores};
    n = 1 + block_args(s, s->v_arg, s->v_cache, c, a + 1);
    a[n++] =
        (hg_task_arg){scr->parts, HG_OUT, wl_view(&scr->parts_v, slot * h * scr->d, 2, sp, up)};
    return rc != 0 ? rc : submit(o, kern_attn_pv_for(n - 2), a, n, sc, 1);
}

int wl_attn_submit(hg_orch *o, const wl_attn_seq *s, const wl_attn_scratch *scr, size_t first)
{
    size_t chunks = wl_attn_chunks(s->tokens, s->block, s->chunk);
    size_t h = scr->heads, d = scr->d;
    int rc = 0;
    for (size_t c = 0; rc == 0 && c < chunks; c++)
        rc = submit_chunk(o, s, scr, c, first + c);
    size_t s3[3] = {chunks, h, 2}, u3[3] = {2 * h, 2, 1};
    size_t p3[3] = {chunks, h, d}, v3[3] = {h * d, d, 1};
    hg_task_arg a[3] = {{scr->stats, HG_IN, wl_view(&scr->stats_v, first * h * 2, 3, s3, u3)},
                        {scr->parts, HG_IN, wl_view(&scr->parts_v, first * h * d, 3, p3, v3)},
                        s->out};
    return rc != 0 ? rc : submit(o, &kern_attn_merge, a, 3, NULL, 0);
}
