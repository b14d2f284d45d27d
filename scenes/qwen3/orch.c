/*
 * orch.c: the decode step's orchestration.  It reads seq_lens, block_table
 * and slot_mapping on the host, checks them, and submits, per layer and per
 * tile row of up to QWEN3_TILE_ROWS sequences:
 *
 *   rmsnorm            2          x (bf16 rows) -> xn (f32), a task per half of
 *                                 the rows (as add_rmsnorm and residual)
 *   proj q, k, v       per column tile: xn . W^T -> q, k, v tiles (a phase's
 *                      last QWEN3_TAIL_TILES tiles: a task per half of the rows)
 *   head_norm_rope     per q and k tile: per-head RMSNorm, RoPE -> qr, kr
 *   kv_write           per sequence: its kr and v rows -> bf16 rows of the
 *                      caches at its slot (OUT views of exactly those rows)
 *   attention          per sequence: QK, softmax, PV per chunk, merge -> attn
 *   proj o             per column tile: attn . Wo^T -> o
 *   (allreduce o)      a rank's share of a split step (split.c, `user` is
 *                      its scene_tp): o summed over the ranks
 *   add_rmsnorm        2          h1 = x + o, xn2 = RMSNorm(h1)
 *   proj gate, up      per column tile
 *   silu_mul           per gate tile: act = SiLU(gate) x up
 *   proj down          per column tile: act . Wd^T -> d
 *   (allreduce d)      split: d summed over the ranks
 *   residual           2          bf16(h1 + d) -> the next layer's x, or out
 *
 * Projection outputs live in run-owned scratch as column tiles stored one
 * after another (kernels.h), so each projection task's OUT view is exactly
 * its tile and tiles of one projection run in parallel.  A tile's width is
 * qwen3_tile_width(): ~tile_bytes of weights per task (6 MiB at preset=real:
 * 10 q tiles, 2 k, 2 v, 10 o, 34 gate, 34 up, 40 down per tile row).
 *
 * Kernel args (views; f32 unless said):
 *   rmsnorm:        x [rows, H] (bf16 or f32), w [H], y [rows, H]; eps
 *   add_rmsnorm:    x [rows, H] bf16, o (tiled [rows, H]), w [H], h1, y; eps
 *   head_norm_rope: in [rows, W], w [D], seq_lens [rows] i32, cos [R, D],
 *                   sin [R, D], out [rows, W]; eps
 *   kv_write:       k row (tiled), v row (tiled), k_row [KVH*D] bf16, v_row
 *   silu_mul:       gate [rows, W], up [rows, W], act [rows, W]
 *   residual:       h1 [rows, H], d (tiled [rows, H]), out [rows, H] bf16
 */
#include <math.h>
#include <stdlib.h>

#include "../common/workload.h"
#include "../kernels/kernels.h"
#include "qwen3.h"

/* A tiled f32 scratch matrix: [row tiles][col tiles][rows][w], rows the
 * row tile's height (QWEN3_TILE_ROWS but in the last): a row tile is one
 * dense block of rows x cols, which a split step sums over the ranks in one
 * allreduce. */
typedef struct tiled {
    uint32_t arg;
    hg_tensor base;
    size_t cols, w, batch;
} tiled;

/* A row-major scratch matrix [rows][cols] (f32, or bf16 for layer outputs). */
typedef struct rowmaj {
    uint32_t arg;
    hg_tensor base;
    size_t cols;
} rowmaj;

typedef struct plan {
    uint32_t idx[QA_COUNT];
    const hg_arg *a[QA_COUNT];
    const int32_t *lens, *table, *slots;
    size_t layers, batch, hidden, heads, kv_heads, d, inter, num_blocks, block, max_blocks;
    size_t rope_len, chunk, row_tiles;
    uint64_t eps, scale;
    tiled q, k, v, qr, kr, o, gate, up, act, down;
    rowmaj xn, xn2, h1, attn, hid;
    wl_attn_scratch scr;
    size_t *first_slot; /* [batch]: each sequence's first attention chunk slot */
    const scene_tp *tp; /* a rank's share of a split step (split.c); NULL: whole */
} plan;

/* ------------------------------------------------------------ views */

static hg_tensor view2(const hg_tensor *base, size_t off, size_t rows, size_t cols, size_t ld)
{
    size_t shape[2] = {rows, cols}, strides[2] = {ld, 1};
    return wl_view(base, off, 2, shape, strides);
}

/* The rows of row tile rt, and where its block starts. */
static size_t tile_height(const tiled *t, size_t rt)
{
    size_t r0 = rt * QWEN3_TILE_ROWS;
    return t->batch - r0 < QWEN3_TILE_ROWS ? t->batch - r0 : QWEN3_TILE_ROWS;
}

static size_t block_at(const tiled *t, size_t rt)
{
    return rt * QWEN3_TILE_ROWS * t->cols;
}

/* Tile j of row tile rt (rows x w; rows is the row tile's height). */
static hg_tensor tile_at(const tiled *t, size_t rt, size_t j, size_t rows)
{
    return view2(&t->base, block_at(t, rt) + j * rows * t->w, rows, t->w, t->w);
}

/* Rows [r, r + rows) of row tile rt across all tiles: [ntiles, rows, w]. */
static hg_tensor tile_rows(const tiled *t, size_t rt, size_t r, size_t rows)
{
    size_t ntiles = t->cols / t->w;
    size_t shape[3] = {ntiles, rows, t->w}, strides[3] = {tile_height(t, rt) * t->w, t->w, 1};
    return wl_view(&t->base, block_at(t, rt) + r * t->w, 3, shape, strides);
}

static hg_tensor rows_of(const rowmaj *m, size_t layer_off, size_t r0, size_t rows)
{
    return view2(&m->base, layer_off + r0 * m->cols, rows, m->cols, m->cols);
}

static hg_task_arg targ(uint32_t arg, hg_dir access, hg_tensor view)
{
    return (hg_task_arg){arg, access, view};
}

static int submit(hg_orch *o, const hg_kernel *k, const hg_task_arg *a, uint32_t n,
                  const uint64_t *sc, uint32_t nsc)
{
    hg_task_desc desc = {.kernel = k, .args = a, .nargs = n, .scalars = sc, .nscalars = nsc};
    return hg_task_submit(o, &desc, NULL);
}

/* ---------------------------------------------------------- reading args */

static int read_shapes(hg_orch *o, plan *p)
{
    const hg_tensor *wq = &p->a[QA_WQ]->tensor, *wk = &p->a[QA_WK]->tensor;
    const hg_tensor *kc = &p->a[QA_K_CACHE]->tensor, *qn = &p->a[QA_Q_NORM]->tensor;
    const hg_tensor *bt = &p->a[QA_TABLE]->tensor, *hs = &p->a[QA_HIDDEN]->tensor;
    if (wq->ndims != 3 || wk->ndims != 3 || kc->ndims != 5 || qn->ndims != 2 || bt->ndims != 2 ||
        hs->ndims != 2 || p->a[QA_W_GATE]->tensor.ndims != 3 || p->a[QA_COS]->tensor.ndims != 2)
        return hg_orch_fail(o, HG_EINVAL, "qwen3_decode: an arg has the wrong number of dims");
    p->layers = wq->shape[0];
    p->hidden = wq->shape[2];
    p->d = qn->shape[1];
    p->heads = wq->shape[1] / p->d;
    p->kv_heads = wk->shape[1] / p->d;
    p->inter = p->a[QA_W_GATE]->tensor.shape[1];
    p->num_blocks = kc->shape[1];
    p->block = kc->shape[2];
    p->batch = hs->shape[0];
    p->max_blocks = bt->shape[1];
    p->rope_len = p->a[QA_COS]->tensor.shape[0];
    p->row_tiles = (p->batch + QWEN3_TILE_ROWS - 1) / QWEN3_TILE_ROWS;
    p->eps = p->a[QA_EPS]->scalar;
    p->scale = hg_scalar_f64(1.0 / sqrt((double)p->d));
    p->chunk = (size_t)p->a[QA_CHUNK]->scalar;
    if (p->d == 0 || p->heads == 0 || p->kv_heads == 0 || p->heads % p->kv_heads != 0 ||
        kc->shape[0] != p->layers || kc->shape[3] != p->kv_heads || kc->shape[4] != p->d ||
        hs->shape[1] != p->hidden || bt->shape[0] != p->batch)
        return hg_orch_fail(o, HG_EINVAL,
                            "qwen3_decode: weights, caches and hidden_states do not agree on "
                            "layers, heads, head_dim or batch");
    if (p->chunk < 1 || p->chunk > KERN_ATTN_MAX_BLOCKS)
        return hg_orch_fail(o, HG_EINVAL, "arg 'chunk_blocks': %zu is outside [1, %d]", p->chunk,
                            KERN_ATTN_MAX_BLOCKS);
    return 0;
}

/* Sequence b's length, block table row and slot must name real cache rows
 * and rope rows: the kernels trust them. */
static int check_sequence(hg_orch *o, const plan *p, size_t b)
{
    int32_t len = p->lens[b], slot = p->slots[b];
    if (len < 1 || (size_t)len > p->max_blocks * p->block || (size_t)len > p->rope_len)
        return hg_orch_fail(o, HG_EINVAL,
                            "arg 'seq_lens': sequence %zu has %d tokens, want 1 to %zu (block "
                            "table) and at most %zu (rope tables)",
                            b, (int)len, p->max_blocks * p->block, p->rope_len);
    for (size_t i = 0; i < ((size_t)len + p->block - 1) / p->block; i++) {
        int32_t blk = p->table[b * p->max_blocks + i];
        if (blk < 0 || (size_t)blk >= p->num_blocks)
            return hg_orch_fail(o, HG_EINVAL,
                                "arg 'block_table': sequence %zu block %zu is %d, the cache has "
                                "%zu blocks",
                                b, i, (int)blk, p->num_blocks);
    }
    if (slot < 0 || (size_t)slot >= p->num_blocks * p->block)
        return hg_orch_fail(o, HG_EINVAL,
                            "arg 'slot_mapping': sequence %zu has slot %d, the cache has %zu", b,
                            (int)slot, p->num_blocks * p->block);
    return 0;
}

static int read_host(hg_orch *o, plan *p)
{
    const void *lens, *table, *slots;
    int rc = scene_orch_lookup(o, qwen3_arg_names, QA_COUNT, p->idx, p->a);
    if (rc != 0 || (rc = hg_orch_host_view(o, p->idx[QA_SEQ_LENS], &lens)) != 0 ||
        (rc = hg_orch_host_view(o, p->idx[QA_TABLE], &table)) != 0 ||
        (rc = hg_orch_host_view(o, p->idx[QA_SLOTS], &slots)) != 0 || (rc = read_shapes(o, p)) != 0)
        return rc;
    p->lens = lens;
    p->table = table;
    p->slots = slots;
    for (size_t b = 0; b < p->batch; b++) {
        if ((rc = check_sequence(o, p, b)) != 0)
            return rc;
    }
    return 0;
}

/* -------------------------------------------------------------- scratch */

static int take_tiled(hg_orch *o, const char *name, const plan *p, size_t cols, size_t w, tiled *t)
{
    size_t shape[1] = {p->batch * cols};
    t->cols = cols;
    t->w = w;
    t->batch = p->batch;
    return hg_orch_scratch(o, name, HG_F32, 1, shape, &t->arg, &t->base);
}

static int take_rowmaj(hg_orch *o, const char *name, hg_dtype dt, size_t rows, size_t cols,
                       rowmaj *m)
{
    size_t shape[2] = {rows, cols};
    m->cols = cols;
    return hg_orch_scratch(o, name, dt, 2, shape, &m->arg, &m->base);
}

static int take_scratch(hg_orch *o, plan *p)
{
    size_t tb = (size_t)p->a[QA_TILE_BYTES]->scalar, hd = p->heads * p->d;
    size_t kvd = p->kv_heads * p->d, h = p->hidden, slots = 0;
    size_t wq = qwen3_tile_width(hd, h, p->d, tb), wkv = qwen3_tile_width(kvd, h, p->d, tb);
    size_t wo = qwen3_tile_width(h, hd, 1, tb), wg = qwen3_tile_width(p->inter, h, 1, tb);
    size_t wd = qwen3_tile_width(h, p->inter, 1, tb);
    int rc = 0;
    const struct {
        const char *name;
        tiled *t;
        size_t cols, w;
    } tiles[] = {{"q", &p->q, hd, wq},
                 {"qr", &p->qr, hd, wq},
                 {"k", &p->k, kvd, wkv},
                 {"kr", &p->kr, kvd, wkv},
                 {"v", &p->v, kvd, wkv},
                 {"o", &p->o, h, wo},
                 {"gate", &p->gate, p->inter, wg},
                 {"up", &p->up, p->inter, wg},
                 {"act", &p->act, p->inter, wg},
                 {"down", &p->down, h, wd}};
    for (size_t i = 0; rc == 0 && i < sizeof tiles / sizeof tiles[0]; i++)
        rc = take_tiled(o, tiles[i].name, p, tiles[i].cols, tiles[i].w, tiles[i].t);
    if (rc == 0 && (rc = take_rowmaj(o, "xn", HG_F32, p->batch, h, &p->xn)) == 0 &&
        (rc = take_rowmaj(o, "xn2", HG_F32, p->batch, h, &p->xn2)) == 0 &&
        (rc = take_rowmaj(o, "h1", HG_F32, p->batch, h, &p->h1)) == 0 &&
        (rc = take_rowmaj(o, "attn", HG_F32, p->batch, hd, &p->attn)) == 0)
        rc = take_rowmaj(o, "hidden_mid", HG_BF16, (p->layers - 1) * p->batch, h, &p->hid);
    for (size_t b = 0; b < p->batch; b++) {
        p->first_slot[b] = slots;
        slots += wl_attn_chunks((size_t)p->lens[b], p->block, p->chunk);
    }
    if (rc == 0)
        rc = wl_attn_scratch_take(o, slots, p->heads, p->d, p->chunk * p->block, &p->scr);
    return rc;
}

/* ---------------------------------------------------------------- tasks */

/* Rows [r0, r0 + rows) of layer l's input: hidden_states, or the previous
 * layer's output. */
static hg_task_arg layer_in(const plan *p, size_t l, size_t r0, size_t rows)
{
    size_t h = p->hidden;
    if (l == 0)
        return targ(p->idx[QA_HIDDEN], HG_IN, view2(&p->a[QA_HIDDEN]->tensor, r0 * h, rows, h, h));
    return targ(p->hid.arg, HG_IN, rows_of(&p->hid, (l - 1) * p->batch * h, r0, rows));
}

/* Where layer l's output rows go: the next layer's input, or `out`. */
static hg_task_arg layer_out(const plan *p, size_t l, size_t r0, size_t rows)
{
    size_t h = p->hidden;
    if (l + 1 == p->layers)
        return targ(p->idx[QA_OUT], HG_OUT, view2(&p->a[QA_OUT]->tensor, r0 * h, rows, h, h));
    return targ(p->hid.arg, HG_OUT, rows_of(&p->hid, l * p->batch * h, r0, rows));
}

/* Layer l's vector of an [layers, n] stack (norm weights). */
static hg_task_arg layer_vec(const plan *p, uint32_t arg, size_t l)
{
    const hg_tensor *t = &p->a[arg]->tensor;
    size_t n = t->shape[1], one = 1;
    return targ(p->idx[arg], HG_IN, wl_view(t, l * n, 1, &n, &one));
}

/* Rows [r, r + n) of a matrix arg: its view's second-to-last dim (a 2-D
 * matrix or a tiled 3-D one). */
static hg_task_arg arg_rows(hg_task_arg a, size_t r, size_t n)
{
    uint32_t d = a.view.ndims - 2;
    a.view.offset += r * a.view.strides[d];
    a.view.shape[d] = n;
    return a;
}

/* A row-wise kernel (each row of its matrix args on its own: rmsnorm,
 * add_rmsnorm, residual) as two tasks, each on half the rows of the args
 * in mask (bit i: arg i is a matrix of `rows` rows), so that both cores
 * take part in what is otherwise one serial task between two phases. */
static int submit_halves(hg_orch *o, const hg_kernel *k, const hg_task_arg *a, uint32_t n,
                         uint32_t mask, size_t rows, const uint64_t *sc, uint32_t nsc)
{
    hg_task_arg h[5];
    if (n > sizeof h / sizeof h[0])
        return hg_orch_fail(o, HG_EINVAL, "qwen3_decode: a row-wise kernel with %u args", n);
    size_t half = (rows + 1) / 2;
    int rc = 0;
    for (size_t r = 0; rc == 0 && r < rows; r += half) {
        size_t m = rows - r < half ? rows - r : half;
        for (uint32_t i = 0; i < n; i++)
            h[i] = mask >> i & 1u ? arg_rows(a[i], r, m) : a[i];
        rc = submit(o, k, h, n, sc, nsc);
    }
    return rc;
}

/* y = x . W[l]^T, one task per column tile of y.  Where the projection ends
 * a phase (`last`: the next task needs every tile), its last QWEN3_TAIL_TILES
 * tiles go as two tasks each, on two halves of the rows (a multiple of 4,
 * the AVX2 kernel's rows a pass): a phase then ends in tasks half as long,
 * and a core waits half as long for the other's last one.  Each half reads
 * the whole tile of weights, so these tiles' weights are read twice. */
static int submit_proj(hg_orch *o, const plan *p, hg_task_arg x, uint32_t warg, size_t l,
                       const tiled *y, size_t rt, size_t rows, bool last)
{
    const hg_tensor *w3 = &p->a[warg]->tensor;
    size_t n = w3->shape[1], k = w3->shape[2], tiles = y->cols / y->w;
    size_t half = ((rows + 1) / 2 + 3) / 4 * 4; /* the rows over 2, up to a multiple of 4 */
    int rc = 0;
    for (size_t j = 0; rc == 0 && j < tiles; j++) {
        hg_task_arg a[3] = {
            x, targ(p->idx[warg], HG_IN, view2(w3, (l * n + j * y->w) * k, y->w, k, k)),
            targ(y->arg, HG_OUT, tile_at(y, rt, j, rows))};
        if (!last || j + QWEN3_TAIL_TILES < tiles || half >= rows) {
            rc = submit(o, kern_proj_for(x.view.dtype), a, 3, NULL, 0);
            continue;
        }
        for (size_t r = 0; rc == 0 && r < rows; r += half) {
            size_t m = rows - r < half ? rows - r : half;
            hg_task_arg h[3] = {arg_rows(a[0], r, m), a[1], arg_rows(a[2], r, m)};
            rc = submit(o, kern_proj_for(x.view.dtype), h, 3, NULL, 0);
        }
    }
    return rc;
}

/* Per-head RMSNorm and RoPE, one task per tile (whole heads each). */
static int submit_norm_rope(hg_orch *o, const plan *p, const tiled *in, const tiled *out,
                            uint32_t warg, size_t l, size_t rt, size_t rows)
{
    size_t one = 1, r0 = rt * QWEN3_TILE_ROWS;
    hg_task_arg lens =
        targ(p->idx[QA_SEQ_LENS], HG_IN, wl_view(&p->a[QA_SEQ_LENS]->tensor, r0, 1, &rows, &one));
    int rc = 0;
    for (size_t j = 0; rc == 0 && j < in->cols / in->w; j++) {
        hg_task_arg a[6] = {targ(in->arg, HG_IN, tile_at(in, rt, j, rows)),
                            layer_vec(p, warg, l),
                            lens,
                            targ(p->idx[QA_COS], HG_IN, p->a[QA_COS]->tensor),
                            targ(p->idx[QA_SIN], HG_IN, p->a[QA_SIN]->tensor),
                            targ(out->arg, HG_OUT, tile_at(out, rt, j, rows))};
        rc = submit(o, &qwen3_head_norm_rope, a, 6, &p->eps, 1);
    }
    return rc;
}

/* Sequence b's K and V rows into the caches: OUT views of exactly the two
 * rows at its slot in layer l. */
static int submit_kv_write(hg_orch *o, const plan *p, size_t l, size_t b)
{
    size_t kvd = p->kv_heads * p->d, one = 1;
    size_t at = (l * p->num_blocks * p->block + (size_t)p->slots[b]) * kvd;
    size_t rt = b / QWEN3_TILE_ROWS, r = b % QWEN3_TILE_ROWS;
    hg_task_arg a[4] = {
        targ(p->kr.arg, HG_IN, tile_rows(&p->kr, rt, r, 1)),
        targ(p->v.arg, HG_IN, tile_rows(&p->v, rt, r, 1)),
        targ(p->idx[QA_K_CACHE], HG_OUT, wl_view(&p->a[QA_K_CACHE]->tensor, at, 1, &kvd, &one)),
        targ(p->idx[QA_V_CACHE], HG_OUT, wl_view(&p->a[QA_V_CACHE]->tensor, at, 1, &kvd, &one))};
    return submit(o, &qwen3_kv_write, a, 4, NULL, 0);
}

/* Layer l up to the attention, for row tile rt. */
static int submit_qkv(hg_orch *o, const plan *p, size_t l, size_t rt)
{
    size_t r0 = rt * QWEN3_TILE_ROWS;
    size_t rows = p->batch - r0 < QWEN3_TILE_ROWS ? p->batch - r0 : QWEN3_TILE_ROWS;
    hg_task_arg xn = targ(p->xn.arg, HG_OUT, rows_of(&p->xn, 0, r0, rows));
    hg_task_arg a[3] = {layer_in(p, l, r0, rows), layer_vec(p, QA_W_IN, l), xn};
    int rc = submit_halves(o, &qwen3_rmsnorm, a, 3, 0x5, rows, &p->eps, 1);
    xn.access = HG_IN;
    if (rc == 0 && (rc = submit_proj(o, p, xn, QA_WQ, l, &p->q, rt, rows, false)) == 0 &&
        (rc = submit_proj(o, p, xn, QA_WK, l, &p->k, rt, rows, false)) == 0 &&
        (rc = submit_proj(o, p, xn, QA_WV, l, &p->v, rt, rows, true)) == 0 &&
        (rc = submit_norm_rope(o, p, &p->q, &p->qr, QA_Q_NORM, l, rt, rows)) == 0)
        rc = submit_norm_rope(o, p, &p->k, &p->kr, QA_K_NORM, l, rt, rows);
    for (size_t b = r0; rc == 0 && b < r0 + rows; b++)
        rc = submit_kv_write(o, p, l, b);
    return rc;
}

static int submit_attention(hg_orch *o, const plan *p, size_t l, size_t b)
{
    size_t hd = p->heads * p->d, one = 1, kvd = p->kv_heads * p->d;
    wl_attn_seq s = {
        .q = targ(p->qr.arg, HG_IN, tile_rows(&p->qr, b / QWEN3_TILE_ROWS, b % QWEN3_TILE_ROWS, 1)),
        .out = targ(p->attn.arg, HG_OUT, wl_view(&p->attn.base, b * hd, 1, &hd, &one)),
        .k_arg = p->idx[QA_K_CACHE],
        .v_arg = p->idx[QA_V_CACHE],
        .k_cache = &p->a[QA_K_CACHE]->tensor,
        .v_cache = &p->a[QA_V_CACHE]->tensor,
        .cache_offset = l * p->num_blocks * p->block * kvd,
        .blocks = p->table + b * p->max_blocks,
        .tokens = (size_t)p->lens[b],
        .block = p->block,
        .kv_heads = p->kv_heads,
        .chunk = p->chunk,
        .scale_bits = p->scale};
    return wl_attn_submit(o, &s, &p->scr, p->first_slot[b]);
}

/* A split step's partial sums of row tile rt of t (o or down): summed over
 * the ranks in place, one allreduce of its dense block; nothing unsplit. */
static int submit_allreduce(hg_orch *o, const plan *p, const tiled *t, size_t rt)
{
    if (p->tp == NULL)
        return 0;
    size_t n = tile_height(t, rt) * t->cols, one = 1;
    hg_tensor block = wl_view(&t->base, block_at(t, rt), 1, &n, &one);
    return p->tp->allreduce(p->tp->user, o, t->arg, &block);
}

/* Layer l from the output projection on, for row tile rt. */
static int submit_mlp(hg_orch *o, const plan *p, size_t l, size_t rt)
{
    size_t r0 = rt * QWEN3_TILE_ROWS;
    size_t rows = p->batch - r0 < QWEN3_TILE_ROWS ? p->batch - r0 : QWEN3_TILE_ROWS;
    hg_task_arg attn = targ(p->attn.arg, HG_IN, rows_of(&p->attn, 0, r0, rows));
    hg_task_arg h1 = targ(p->h1.arg, HG_OUT, rows_of(&p->h1, 0, r0, rows));
    hg_task_arg xn2 = targ(p->xn2.arg, HG_OUT, rows_of(&p->xn2, 0, r0, rows));
    int rc = submit_proj(o, p, attn, QA_WO, l, &p->o, rt, rows, true);
    if (rc == 0)
        rc = submit_allreduce(o, p, &p->o, rt);
    hg_task_arg a[5] = {layer_in(p, l, r0, rows),
                        targ(p->o.arg, HG_IN, tile_rows(&p->o, rt, 0, rows)),
                        layer_vec(p, QA_W_POST, l), h1, xn2};
    if (rc == 0)
        rc = submit_halves(o, &qwen3_add_rmsnorm, a, 5, 0x1b, rows, &p->eps, 1);
    xn2.access = HG_IN;
    h1.access = HG_IN;
    if (rc == 0 && (rc = submit_proj(o, p, xn2, QA_W_GATE, l, &p->gate, rt, rows, false)) == 0)
        rc = submit_proj(o, p, xn2, QA_W_UP, l, &p->up, rt, rows, true);
    for (size_t j = 0; rc == 0 && j < p->gate.cols / p->gate.w; j++) {
        hg_task_arg s[3] = {targ(p->gate.arg, HG_IN, tile_at(&p->gate, rt, j, rows)),
                            targ(p->up.arg, HG_IN, tile_at(&p->up, rt, j, rows)),
                            targ(p->act.arg, HG_OUT, tile_at(&p->act, rt, j, rows))};
        rc = submit(o, &qwen3_silu_mul, s, 3, NULL, 0);
    }
    hg_task_arg act = targ(p->act.arg, HG_IN, tile_rows(&p->act, rt, 0, rows));
    if (rc == 0)
        rc = submit_proj(o, p, act, QA_W_DOWN, l, &p->down, rt, rows, true);
    if (rc == 0)
        rc = submit_allreduce(o, p, &p->down, rt);
    hg_task_arg r[3] = {h1, targ(p->down.arg, HG_IN, tile_rows(&p->down, rt, 0, rows)),
                        layer_out(p, l, r0, rows)};
    return rc != 0 ? rc : submit_halves(o, &qwen3_residual, r, 3, 0x7, rows, NULL, 0);
}

int qwen3_orchestrate(hg_orch *o, void *user)
{
    plan p = {.tp = user};
    int rc = read_host(o, &p);
    if (rc != 0)
        return rc;
    p.first_slot = malloc(p.batch * sizeof *p.first_slot + 1);
    if (p.first_slot == NULL)
        return hg_orch_fail(o, HG_ENOMEM, "qwen3_decode: no host memory for %zu sequences",
                            p.batch);
    rc = take_scratch(o, &p);
    for (size_t l = 0; rc == 0 && l < p.layers; l++) {
        for (size_t rt = 0; rc == 0 && rt < p.row_tiles; rt++)
            rc = submit_qkv(o, &p, l, rt);
        for (size_t b = 0; rc == 0 && b < p.batch; b++)
            rc = submit_attention(o, &p, l, b);
        for (size_t rt = 0; rc == 0 && rt < p.row_tiles; rt++)
            rc = submit_mlp(o, &p, l, rt);
    }
    free(p.first_slot);
    return rc;
}

size_t qwen3_tile_width(size_t n, size_t k, size_t unit, size_t tile_bytes)
{
    size_t w = unit;
    while (n % (2 * w) == 0 && 2 * w * k * 2 <= tile_bytes)
        w *= 2;
    return w;
}
