/*
 * split.c: one rank's share of a tensor-parallel decode step (Megatron's
 * split; docs/ARCHITECTURE.md, "The Qwen3 tensor-parallel split").
 *
 * Rank r of n holds, of every layer:
 *   - query heads [r*H/n, (r+1)*H/n) and KV heads [r*KV/n, (r+1)*KV/n): the
 *     rows of wq, wk and wv that compute them (nn.Linear's [out, in]
 *     layout, so a head is a block of rows) and those heads' slots of the
 *     K and V caches;
 *   - wo's columns that read its query heads (o_proj "by rows" of W^T):
 *     its o is a partial sum, summed over the ranks by an allreduce;
 *   - the rows [r*I/n, (r+1)*I/n) of w_gate and w_up and the same columns
 *     of w_down: its down output is again partial and summed.
 * Norm weights, rope tables, the sequences' tables and hidden_states are
 * replicated, and so is everything after each allreduce (the same bits on
 * every rank), so every rank ends with the whole `out`.
 *
 * The shares are cut from the whole case after its golden is computed (the
 * golden needs every weight), each into a new host buffer that replaces the
 * whole one: a rank's peak host memory is the whole case plus its share.
 * With contiguous head ranges, a rank's query heads are exactly the groups
 * of its KV heads (H/KV query heads per KV head), so attention stays local.
 */
#include <string.h>

#include "qwen3.h"

/* Replaces tensor arg `arg`, seen as [outer][n][inner] elements, with its
 * slice [outer][n0, n0 + count)[inner], reshaped to shape[0..ndims). */
static int slice_arg(scene_case *c, uint32_t arg, size_t outer, size_t n, size_t inner, size_t n0,
                     size_t count, uint32_t ndims, const size_t *shape)
{
    hg_arg *a = &c->args[arg];
    size_t es = hg_dtype_size(a->tensor.dtype), run = count * inner * es;
    hg_hostbuf *old = a->tensor.host, *hb = NULL;
    int rc = hg_hostbuf_create(outer * run, &hb);
    if (rc != 0)
        return rc;
    const char *from = hg_hostbuf_data(old);
    char *to = hg_hostbuf_data(hb);
    for (size_t o = 0; o < outer; o++)
        memcpy(to + o * run, from + ((o * n + n0) * inner) * es, run);
    if ((rc = hg_hostbuf_mark_written(hb, 0, outer * run)) != 0 ||
        (rc = hg_tensor_host(&a->tensor, hb, a->tensor.dtype, ndims, shape)) != 0) {
        hg_hostbuf_destroy(hb);
        return rc;
    }
    hg_hostbuf_destroy(old);
    return 0;
}

int qwen3_split(scene_case *c, qwen3_state *st, const scene_tp *tp, hg_err *err)
{
    const qwen3_dims *d = &st->dims;
    size_t n = tp->size, r = tp->rank;
    if (d->heads % n != 0 || d->kv_heads % n != 0 || d->inter % n != 0)
        return err_set(err, HG_EINVAL,
                       "--tp %zu: qwen3_decode's %zu query heads, %zu KV heads and intermediate "
                       "size %zu must each divide by it (1, 2, 4 or 8 do at both presets)",
                       n, d->heads, d->kv_heads, d->inter);
    size_t l = d->layers, h = d->hidden, dh = d->head_dim, hd = d->heads * dh;
    size_t kvd = d->kv_heads * dh, qn = d->heads / n * dh, kvn = d->kv_heads / n;
    size_t in = d->inter / n, rows = l * d->num_blocks * d->block;
    const struct {
        uint32_t arg;
        size_t outer, n, inner, n0, count;
        uint32_t ndims;
        size_t shape[5];
    } cut[] = {
        {QA_WQ, l, hd, h, r * qn, qn, 3, {l, qn, h}},
        {QA_WK, l, kvd, h, r * kvn * dh, kvn * dh, 3, {l, kvn * dh, h}},
        {QA_WV, l, kvd, h, r * kvn * dh, kvn * dh, 3, {l, kvn * dh, h}},
        {QA_WO, l * h, hd, 1, r * qn, qn, 3, {l, h, qn}},
        {QA_W_GATE, l, d->inter, h, r * in, in, 3, {l, in, h}},
        {QA_W_UP, l, d->inter, h, r * in, in, 3, {l, in, h}},
        {QA_W_DOWN, l * h, d->inter, 1, r * in, in, 3, {l, h, in}},
        {QA_K_CACHE, rows, d->kv_heads, dh, r * kvn, kvn, 5, {l, d->num_blocks, d->block, kvn, dh}},
        {QA_V_CACHE, rows, d->kv_heads, dh, r * kvn, kvn, 5, {l, d->num_blocks, d->block, kvn, dh}},
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        int rc = slice_arg(c, cut[i].arg, cut[i].outer, cut[i].n, cut[i].inner, cut[i].n0,
                           cut[i].count, cut[i].ndims, cut[i].shape);
        if (rc != 0)
            return err_set(err, rc, "qwen3_decode: rank %zu's share of arg '%s': %s", r,
                           qwen3_arg_names[cut[i].arg], hg_strerror(rc));
    }
    st->kv_first = r * kvn;
    st->kv_count = kvn;
    return 0;
}
