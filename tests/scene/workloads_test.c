/*
 * workloads_test.c: the real-workload scenes at their tiny presets, as a
 * user of `hostgraph run` relies on them: paged_attention and qwen3_decode
 * pass golden round after round on untyped and typed cores with identical
 * outputs and exactly the bytes their args imply; the graph has the shape
 * the orchestration promises; the compact cache check catches a changed byte
 * anywhere and names its index; bad inputs and bad params are refused with
 * the param or arg named; and the projection's and attention's AVX-512
 * paths and portable paths agree with a double reference.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../scenes/kernels/kernels.h"
#include "../../scenes/qwen3/qwen3.h"
#include "scene/scene.h"
#include "testlib.h"

static const char *const specs[] = {"sim:cores=1", "sim:cube=1,vector=2", "sim"};

/* What on_round saw. */
typedef struct round_log {
    uint32_t rounds, tasks;
    uint64_t h2d, d2h;
    bool bytes_same, outputs_same;
    void *first; /* round 1's checked output */
    size_t first_len;
} round_log;

static void log_round(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    round_log *log = user;
    const hg_hostbuf *hb = c->args[c->checks[0].arg].tensor.host;
    log->rounds = round;
    if (round == 1) {
        log->h2d = s->h2d_bytes;
        log->d2h = s->d2h_bytes;
        log->tasks = s->tasks;
        log->bytes_same = log->outputs_same = true;
        log->first_len = hg_hostbuf_size(hb);
        log->first = malloc(log->first_len + 1);
        memcpy(log->first, hg_hostbuf_data(hb), log->first_len);
        return;
    }
    log->bytes_same = log->bytes_same && s->h2d_bytes == log->h2d && s->d2h_bytes == log->d2h;
    log->outputs_same =
        log->outputs_same && memcmp(log->first, hg_hostbuf_data(hb), log->first_len) == 0;
}

/* Makes the case for `name` with params "k=v"...; NULL on failure. */
static scene_case *make_case(const char *name, const char *const *kv, uint32_t nkv, int64_t *params)
{
    const scene *s = scene_find(name);
    scene_case *c = NULL;
    hg_err err;
    err_clear(&err);
    scene_params_default(s, params);
    for (uint32_t i = 0; i < nkv; i++) {
        if (scene_param_set(s, params, kv[i], &err) != 0) {
            printf("     %s\n", err.msg);
            return NULL;
        }
    }
    if (scene_case_make(s, params, &c, &err) != 0)
        printf("     %s\n", err.msg);
    return c;
}

/* Bytes that go in (IN, INOUT) and come back each round: copy-back moves
 * only what tasks wrote, so OUT args whole (every element is written) and,
 * of qwen3_decode's INOUT caches, exactly the K and V row each sequence
 * writes per layer: the kv_write tasks' OUT views must be those rows. */
static void arg_bytes(const scene_case *c, uint64_t *in, uint64_t *out)
{
    *in = *out = 0;
    for (uint32_t i = 0; i < c->nargs; i++) {
        const hg_arg *a = &c->args[i];
        if (a->dir == HG_SCALAR)
            continue;
        uint64_t bytes = hg_hostbuf_size(a->tensor.host);
        *in += a->dir != HG_OUT ? bytes : 0;
        *out += a->dir == HG_OUT ? bytes : 0;
    }
    if (c->scene == scene_find("qwen3_decode")) {
        const hg_tensor *kc = &c->args[QA_K_CACHE].tensor;
        uint64_t row = kc->shape[3] * kc->shape[4] * 2, batch = c->args[QA_SLOTS].tensor.shape[0];
        *out += 2 * kc->shape[0] * batch * row;
    }
}

/* Runs an already made case for `rounds` on `spec`; returns the exit code
 * and what stderr said. */
static int run_case(scene_case *c, const char *spec, uint32_t rounds, round_log *log, char *errtext,
                    size_t errlen)
{
    scene_run_opts o = {.scene = c->scene,
                        .rounds = rounds,
                        .quiet = true,
                        .on_round = log_round,
                        .on_round_user = log};
    hg_device *dev = NULL;
    memset(log, 0, sizeof *log);
    memcpy(o.params, c->params, sizeof o.params);
    if (hg_device_open(spec, &dev, NULL, 0) != 0)
        return -1;
    o.out = fopen("/dev/null", "w");
    o.err = tmpfile();
    int rc = scene_run_case(&o, dev, c);
    rewind(o.err);
    size_t n = fread(errtext, 1, errlen - 1, o.err);
    errtext[n] = '\0';
    fclose(o.out);
    fclose(o.err);
    hg_device_close(dev);
    return rc;
}

/* Every spec: golden passes each round, outputs identical, exact bytes. */
static void expect_passes(const char *name, const char *const *kv, uint32_t nkv, uint32_t rounds)
{
    int64_t params[SCENE_MAX_PARAMS];
    scene_case *c = make_case(name, kv, nkv, params);
    ASSERT(c != NULL);
    uint64_t in, out;
    arg_bytes(c, &in, &out);
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        round_log log;
        char err[1024];
        int rc = run_case(c, specs[s], rounds, &log, err, sizeof err);
        free(log.first);
        if (rc != SCENE_EXIT_OK)
            printf("     %s on %s: %s", name, specs[s], err);
        ASSERT_EQ(rc, SCENE_EXIT_OK);
        ASSERT_UEQ(log.rounds, rounds);
        ASSERT(log.bytes_same && log.outputs_same);
        ASSERT_UEQ(log.h2d, in);
        ASSERT_UEQ(log.d2h, out);
    }
    scene_case_destroy(c);
}

TEST(paged_attention_tiny_passes_every_round)
{
    expect_passes("paged_attention", NULL, 0, 3);
}

TEST(paged_attention_other_shapes_pass)
{
    /* GQA 2:1, chunks of 3 blocks of 4 tokens, a last block partly full */
    static const char *const kv[] = {"batch=7",      "heads=6",    "kv_heads=3",    "head_dim=24",
                                     "block_size=4", "context=29", "chunk_blocks=3"};
    expect_passes("paged_attention", kv, 7, 2);
    static const char *const one[] = {"batch=1", "context=1", "kv_heads=4"}; /* MHA, 1 token */
    expect_passes("paged_attention", one, 3, 2);
}

TEST(qwen3_tiny_passes_every_round)
{
    expect_passes("qwen3_decode", NULL, 0, 3);
}

TEST(qwen3_two_row_tiles_three_layers_pass)
{
    /* 20 sequences: a full tile row of 16 and one of 4 */
    static const char *const kv[] = {"batch=20", "layers=3", "context=30", "chunk_blocks=1"};
    expect_passes("qwen3_decode", kv, 4, 2);
}

/* Tasks qwen3_decode's orchestration promises (orch.c), from the case. */
static uint64_t qwen3_expected_tasks(const scene_case *c)
{
    const hg_tensor *wq = &c->args[QA_WQ].tensor, *wk = &c->args[QA_WK].tensor;
    const hg_tensor *kc = &c->args[QA_K_CACHE].tensor;
    size_t layers = wq->shape[0], h = wq->shape[2], d = c->args[QA_Q_NORM].tensor.shape[1];
    size_t hd = wq->shape[1], kvd = wk->shape[1], in = c->args[QA_W_GATE].tensor.shape[1];
    size_t batch = c->args[QA_HIDDEN].tensor.shape[0], block = kc->shape[2];
    size_t tb = (size_t)c->args[QA_TILE_BYTES].scalar, chunk = (size_t)c->args[QA_CHUNK].scalar;
    size_t nq = hd / qwen3_tile_width(hd, h, d, tb), nkv = kvd / qwen3_tile_width(kvd, h, d, tb);
    size_t no = h / qwen3_tile_width(h, hd, 1, tb), ng = in / qwen3_tile_width(in, h, 1, tb);
    size_t nd = h / qwen3_tile_width(h, in, 1, tb);
    const int32_t *lens = scene_case_data(c, QA_SEQ_LENS);
    uint64_t per_layer = 0;
    for (size_t r0 = 0; r0 < batch; r0 += QWEN3_TILE_ROWS) {
        /* rmsnorm, q k v, two norm-ropes, add_rmsnorm, o, gate, up, silu, down, residual */
        per_layer += 1 + nq + 2 * nkv + nq + nkv + 1 + no + 3 * ng + nd + 1;
    }
    for (size_t b = 0; b < batch; b++) {
        size_t blocks = ((size_t)lens[b] + block - 1) / block;
        per_layer += 1 + 3 * ((blocks + chunk - 1) / chunk) + 1; /* kv_write, chunks, merge */
    }
    return layers * per_layer;
}

TEST(qwen3_graph_has_a_task_per_kernel_per_tile)
{
    static const char *const kv[] = {"batch=20", "layers=2"};
    int64_t params[SCENE_MAX_PARAMS];
    scene_case *c = make_case("qwen3_decode", kv, 2, params);
    ASSERT(c != NULL);
    round_log log;
    char err[1024];
    int rc = run_case(c, "sim:cores=2", 1, &log, err, sizeof err);
    free(log.first);
    uint64_t want = qwen3_expected_tasks(c);
    scene_case_destroy(c);
    ASSERT_EQ(rc, SCENE_EXIT_OK);
    ASSERT_UEQ(log.tasks, want);
    ASSERT_UGT(want, 2 * 100); /* tens of tasks per layer per tile row, and attention */
}

/* Runs one round of c's callable on a fresh device, outside the scene
 * runner, so the case's buffers hold that round's outputs. */
static int run_once(scene_case *c)
{
    hg_device *dev = NULL;
    hg_runner *run = NULL;
    int rc = hg_device_open("sim:cores=2", &dev, NULL, 0);
    if (rc == 0)
        rc = hg_runner_open(dev, &run);
    if (rc == 0)
        rc = hg_runner_run(run, &c->callable, c->args, c->nargs, NULL);
    hg_runner_close(run);
    hg_device_close(dev);
    return rc;
}

/* True if element i of a cache lies in a row the step writes. */
static bool written(const scene_case *c, size_t i)
{
    const hg_tensor *kc = &c->args[QA_K_CACHE].tensor;
    size_t row = kc->shape[3] * kc->shape[4], per_layer = kc->shape[1] * kc->shape[2] * row;
    const int32_t *slots = scene_case_data(c, QA_SLOTS);
    for (size_t b = 0; b < c->args[QA_SLOTS].tensor.shape[0]; b++) {
        if ((i % per_layer) / row == (size_t)slots[b])
            return true;
    }
    return false;
}

/* Changes element i of arg `arg` (bf16) by `delta`, checks, puts it back. */
static scene_check_result check_changed(scene_case *c, uint32_t arg, size_t i, float delta)
{
    uint16_t *data = scene_case_data(c, arg), saved = data[i];
    data[i] =
        delta == 0.0f ? (uint16_t)(saved ^ 1u) : hg_f32_to_bf16(hg_bf16_to_f32(saved) + delta);
    scene_check_result res;
    scene_case_check(c, &res);
    data[i] = saved;
    return res;
}

TEST(qwen3_check_finds_any_changed_cache_element)
{
    test_rng r = test_seed(77);
    int64_t params[SCENE_MAX_PARAMS];
    scene_case *c = make_case("qwen3_decode", NULL, 0, params);
    ASSERT(c != NULL);
    ASSERT_OK(run_once(c));
    scene_check_result res;
    ASSERT(scene_case_check(c, &res));
    size_t numel = hg_hostbuf_size(c->args[QA_K_CACHE].tensor.host) / 2;
    for (int trial = 0; trial < 20; trial++) {
        uint32_t arg = trial % 2 ? QA_V_CACHE : QA_K_CACHE;
        size_t i = test_rand64(&r) % numel;
        bool in_row = written(c, i);
        /* an unwritten element off by its lowest bit; a written one by 0.5 */
        res = check_changed(c, arg, i, in_row ? 0.5f : 0.0f);
        ASSERT(!res.pass);
        ASSERT_STR_EQ(res.output, c->args[arg].name);
        ASSERT_UEQ(res.first_bad, i);
    }
    uint16_t *out = scene_case_data(c, QA_OUT);
    out[17] = hg_f32_to_bf16(hg_bf16_to_f32(out[17]) + 0.5f);
    bool pass = scene_case_check(c, &res);
    scene_case_destroy(c);
    ASSERT(!pass);
    ASSERT_STR_EQ(res.output, "out");
    ASSERT_UEQ(res.first_bad, 17);
}

/* Runs qwen3_decode at its defaults with one IN element of `arg` (i32)
 * replaced; wants exit 3 and `says` in the error. */
static void expect_bad_input(uint32_t arg, size_t i, int32_t value, const char *says)
{
    int64_t params[SCENE_MAX_PARAMS];
    scene_case *c = make_case("qwen3_decode", NULL, 0, params);
    ASSERT(c != NULL);
    ASSERT_OK(hg_hostbuf_write(c->args[arg].tensor.host, i * 4, &value, 4));
    round_log log;
    char err[1024];
    int rc = run_case(c, "sim:cores=1", 1, &log, err, sizeof err);
    free(log.first);
    scene_case_destroy(c);
    ASSERT_EQ(rc, SCENE_EXIT_RUNTIME);
    ASSERT_STR_CONTAINS(err, says);
}

TEST(qwen3_orchestration_names_bad_host_inputs)
{
    expect_bad_input(QA_SEQ_LENS, 3, 0, "arg 'seq_lens': sequence 3 has 0 tokens");
    expect_bad_input(QA_SEQ_LENS, 2, 1000, "arg 'seq_lens': sequence 2 has 1000 tokens");
    expect_bad_input(QA_SLOTS, 5, -2, "arg 'slot_mapping': sequence 5 has slot -2");
    expect_bad_input(QA_TABLE, 0, 1 << 30, "arg 'block_table': sequence 0 block 0");
}

TEST(named_params_and_cross_param_limits)
{
    const scene *s = scene_find("qwen3_decode");
    int64_t params[SCENE_MAX_PARAMS];
    hg_err err;
    scene_params_default(s, params);
    ASSERT_STR_EQ(scene_param_value_name(&s->params[0], params[0]), "tiny");
    ASSERT_OK(scene_param_set(s, params, "preset=real", &err));
    ASSERT_STR_EQ(scene_param_value_name(&s->params[0], params[0]), "real");
    ASSERT_EQ(scene_param_set(s, params, "preset=huge", &err), HG_EINVAL);
    ASSERT_STR_CONTAINS(err.msg, "'huge' is not one of tiny, real");
    ASSERT_EQ(scene_param_set(s, params, "preset=1", &err), HG_EINVAL); /* names only */
    ASSERT_EQ(scene_param_set(s, params, "batch=0", &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "param 'batch': 0 is outside [1, 256]");
    ASSERT(scene_param_value_name(&scene_find("bgemm")->params[0], 4) == NULL);

    scene_case *c = (scene_case *)1;
    static const char *const rope[] = {"context=70"}; /* tiny's rope tables have 64 rows */
    ASSERT((c = make_case("qwen3_decode", rope, 1, params)) == NULL);
    ASSERT_EQ(scene_case_make(s, params, &c, &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "param 'context': 70 needs rope tables of 71 rows");
    static const char *const huge[] = {"preset=real", "layers=40", "batch=256", "context=40000",
                                       "rope_len=40960"};
    ASSERT((c = make_case("qwen3_decode", huge, 5, params)) == NULL);
    ASSERT_EQ(scene_case_make(s, params, &c, &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "param 'layers': 40 layers at batch 256");
    ASSERT_STR_CONTAINS(err.msg, "GiB");
    static const char *const gqa[] = {"heads=4", "kv_heads=3"};
    ASSERT((c = make_case("paged_attention", gqa, 2, params)) == NULL);
    ASSERT_EQ(scene_case_make(scene_find("paged_attention"), params, &c, &err), HG_ERANGE);
    ASSERT_STR_CONTAINS(err.msg, "param 'kv_heads': 3 does not divide heads 4");
}

/* The worse of w and e, a NaN error counting as infinite (fmax drops it). */
static double worse(double w, double e)
{
    return isnan(e) ? INFINITY : fmax(w, e);
}

/* ------------------------------------------------------------ projection */

/* y = bf16(x) . w^T in double, and the sum of |x||w| per output (the
 * scale of f32 rounding error). */
static void proj_reference(const float *x, const uint16_t *w, size_t rows, size_t n, size_t k,
                           double *ref, double *mag)
{
    for (size_t r = 0; r < rows; r++) {
        for (size_t j = 0; j < n; j++) {
            double s = 0.0, m = 0.0;
            for (size_t i = 0; i < k; i++) {
                double xv = hg_bf16_to_f32(hg_f32_to_bf16(x[r * k + i]));
                double wv = hg_bf16_to_f32(w[j * k + i]);
                s += xv * wv;
                m += fabs(xv * wv);
            }
            ref[r * n + j] = s;
            mag[r * n + j] = m;
        }
    }
}

/* Runs kern_proj on x (dense rows x k, or as `tiles` column tiles) and
 * returns the worst error as a fraction of the worst-case bound of f32
 * summation, k 2^-24 sum |x w|. */
static double proj_error(const float *x, const uint16_t *w, size_t rows, size_t n, size_t k,
                         size_t tiles, const double *ref, const double *mag)
{
    size_t tw = k / tiles;
    float *tiled = malloc(rows * k * sizeof(float) + 4), *y = malloc(rows * n * sizeof(float) + 4);
    for (size_t t = 0; t < tiles; t++)
        for (size_t r = 0; r < rows; r++)
            memcpy(tiled + (t * rows + r) * tw, x + r * k + t * tw, tw * sizeof(float));
    kern_mat m = {(char *)tiled, HG_F32, tiles, rows, tw, rows * tw, tw, 1};
    double worst = kern_proj(&m, w, n, k, k, y, n) == 0 ? 0.0 : INFINITY;
    for (size_t i = 0; i < rows * n; i++)
        worst = worse(worst, fabs(y[i] - ref[i]) / ((double)k * 0x1p-24 * mag[i] + 1e-30));
    free(tiled);
    free(y);
    return worst;
}

TEST(projection_paths_agree_with_a_double_reference)
{
    test_rng r = test_seed(2024);
    /* rows, n, k, column tiles of x: odd n, K tails, K blocks, more rows than
     * a pass (16) and more weight rows than a chunk (512) */
    static const size_t shapes[][4] = {{16, 48, 64, 1}, {5, 33, 100, 2},   {20, 17, 2100, 3},
                                       {1, 1, 31, 1},   {16, 64, 1056, 4}, {3, 8, 1024, 1},
                                       {9, 1030, 96, 2}};
    kern_force_portable(false);
    const char *fast = kern_path();
    printf("     dispatch picks the %s path\n", fast);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], n = shapes[s][1], k = shapes[s][2], tiles = shapes[s][3];
        float *x = malloc(rows * k * sizeof(float));
        uint16_t *w = malloc(n * k * sizeof(uint16_t));
        double *ref = malloc(rows * n * sizeof(double)), *mag = malloc(rows * n * sizeof(double));
        for (size_t i = 0; i < rows * k; i++)
            x[i] = (float)((double)test_rand(&r) / 4294967296.0 * 4.0 - 2.0);
        for (size_t i = 0; i < n * k; i++)
            w[i] = hg_f32_to_bf16((float)((double)test_rand(&r) / 4294967296.0 * 2.0 - 1.0));
        proj_reference(x, w, rows, n, k, ref, mag);
        kern_force_portable(true);
        double portable = proj_error(x, w, rows, n, k, tiles, ref, mag);
        kern_force_portable(false);
        double dispatched = proj_error(x, w, rows, n, k, tiles, ref, mag);
        free(x);
        free(w);
        free(ref);
        free(mag);
        printf("     rows %zu n %zu k %zu: worst error %.3f (portable), %.3f (%s) of the bound\n",
               rows, n, k, portable, dispatched, fast);
        ASSERT(portable <= 1.0);
        ASSERT(dispatched <= 1.0);
    }
}

/* ------------------------------------------------------------- attention */

/* One chunk of the attention kernels, called directly: kv heads, heads per
 * kv head, D, block size, tokens, and the scores' row length. */
typedef struct attn_shape {
    size_t kv_heads, group, d, block, tokens, ctok;
} attn_shape;

typedef struct attn_out {
    float *scores, *stats, *part; /* scores after softmax: the probabilities */
    float *raw;                   /* scores before softmax */
} attn_out;

/* QK, softmax and PV over one chunk (blocks kb and vb, nb of them). */
static void attn_run(const attn_shape *sh, const float *q, uint16_t **kb, uint16_t **vb, size_t nb,
                     attn_out *o)
{
    size_t h = sh->kv_heads * sh->group, qs[2] = {1, h * sh->d}, ss[2] = {h, sh->ctok};
    size_t sts[2] = {h, 2}, ps[2] = {h, sh->d}, bs[3] = {sh->block, sh->kv_heads, sh->d};
    hg_kview args[KERN_ATTN_MAX_BLOCKS + 2];
    uint64_t sc[2] = {sh->tokens, hg_scalar_f64(1.0 / sqrt((double)sh->d))};
    args[0] = kern_dense_view((void *)q, HG_F32, 2, qs);
    for (size_t i = 0; i < nb; i++)
        args[1 + i] = kern_dense_view(kb[i], HG_BF16, 3, bs);
    args[1 + nb] = kern_dense_view(o->scores, HG_F32, 2, ss);
    ASSERT_EQ(kern_call(&kern_attn_qk, args, (uint32_t)nb + 2, sc, 2), 0);
    memcpy(o->raw, o->scores, h * sh->ctok * sizeof(float));
    hg_kview sm[2] = {kern_dense_view(o->scores, HG_F32, 2, ss),
                      kern_dense_view(o->stats, HG_F32, 2, sts)};
    ASSERT_EQ(kern_call(&kern_attn_softmax, sm, 2, sc, 1), 0);
    for (size_t i = 0; i < nb; i++)
        args[1 + i] = kern_dense_view(vb[i], HG_BF16, 3, bs);
    args[0] = kern_dense_view(o->scores, HG_F32, 2, ss);
    args[1 + nb] = kern_dense_view(o->part, HG_F32, 2, ps);
    ASSERT_EQ(kern_call(&kern_attn_pv, args, (uint32_t)nb + 2, sc, 1), 0);
}

/* Worst errors of one path as fractions of f32 summation's bound, n 2^-24
 * sum |terms| (for p = e^x, the polynomial's 2^-22 relative plus x's
 * rounding); infinite when
 * the max is not exact or a probability past the tokens is not 0. */
static double attn_error(const attn_shape *sh, const float *q, uint16_t **kb, uint16_t **vb,
                         const attn_out *o)
{
    size_t hc = sh->kv_heads * sh->group, d = sh->d, T = sh->tokens;
    double scale = (double)(float)(1.0 / sqrt((double)d)), worst = 0.0;
    for (size_t h = 0; h < hc; h++) {
        size_t g = h / sh->group;
        double mx = -INFINITY, l = 0.0;
        for (size_t t = 0; t < T; t++) {
            const uint16_t *k = kb[t / sh->block] + ((t % sh->block) * sh->kv_heads + g) * d;
            double s = 0.0, m = 0.0;
            for (size_t i = 0; i < d; i++) {
                s += (double)q[h * d + i] * hg_bf16_to_f32(k[i]);
                m += fabs((double)q[h * d + i] * hg_bf16_to_f32(k[i]));
            }
            double got = o->raw[h * sh->ctok + t];
            worst = worse(worst,
                          fabs(got - scale * s) / ((double)(d + 1) * 0x1p-24 * scale * m + 1e-30));
            mx = fmax(mx, got);
        }
        if (o->stats[2 * h] != (float)mx) /* the max of the scores, exactly */
            return INFINITY;
        for (size_t t = 0; t < T; t++) {
            double x = o->raw[h * sh->ctok + t] - mx, p = o->scores[h * sh->ctok + t];
            double want = exp(x); /* x's f32 rounding: |x| 2^-24 relative in p */
            worst = worse(worst, fabs(p - want) / ((0x1p-22 + fabs(x) * 0x1p-24) * want + 1e-30));
            l += p;
        }
        for (size_t t = T; t < sh->ctok; t++) {
            if (o->scores[h * sh->ctok + t] != 0.0f) /* past the tokens: no weight */
                return INFINITY;
        }
        worst = worse(worst, fabs(o->stats[2 * h + 1] - l) / ((double)T * 0x1p-24 * l + 1e-30));
        for (size_t i = 0; i < d; i++) {
            double s = 0.0, m = 0.0;
            for (size_t t = 0; t < T; t++) {
                const uint16_t *v = vb[t / sh->block] + ((t % sh->block) * sh->kv_heads + g) * d;
                double pv = (double)o->scores[h * sh->ctok + t] * hg_bf16_to_f32(v[i]);
                s += pv;
                m += fabs(pv);
            }
            worst = worse(worst, fabs(o->part[h * d + i] - s) / ((double)T * 0x1p-24 * m + 1e-30));
        }
    }
    return worst;
}

TEST(attention_paths_agree_with_a_double_reference)
{
    test_rng r = test_seed(77);
    /* Qwen3's chunk (8 kv heads, 5:1, D 128, 4 blocks of 128, a partial
     * last block); more heads per kv head than a pass takes (9) with D 48
     * (a 32 and a 16 slab); one head per kv head; D not a multiple of 16 */
    static const attn_shape shapes[] = {{8, 5, 128, 128, 437, 512},
                                        {1, 9, 48, 8, 37, 40},
                                        {3, 1, 16, 16, 16, 16},
                                        {2, 2, 20, 4, 7, 8}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const attn_shape *sh = &shapes[si];
        size_t hc = sh->kv_heads * sh->group, nb = (sh->tokens + sh->block - 1) / sh->block;
        size_t belems = sh->block * sh->kv_heads * sh->d;
        float *q = malloc(hc * sh->d * sizeof(float));
        for (size_t i = 0; i < hc * sh->d; i++)
            q[i] = (float)((double)test_rand(&r) / 4294967296.0 * 6.0 - 3.0);
        uint16_t *kb[KERN_ATTN_MAX_BLOCKS], *vb[KERN_ATTN_MAX_BLOCKS];
        for (size_t b = 0; b < nb; b++) {
            kb[b] = malloc(belems * sizeof(uint16_t));
            vb[b] = malloc(belems * sizeof(uint16_t));
            for (size_t i = 0; i < belems; i++) {
                /* rows past the chunk's tokens are NaN: read, they would show */
                bool past = b * sh->block + i / (sh->kv_heads * sh->d) >= sh->tokens;
                kb[b][i] =
                    past
                        ? 0x7fc0
                        : hg_f32_to_bf16((float)((double)test_rand(&r) / 4294967296.0 * 2.0 - 1.0));
                vb[b][i] =
                    past
                        ? 0x7fc0
                        : hg_f32_to_bf16((float)((double)test_rand(&r) / 4294967296.0 * 2.0 - 1.0));
            }
        }
        attn_out out[2];
        for (int path = 0; path < 2; path++) { /* 0 portable, 1 dispatched */
            attn_out *o = &out[path];
            o->scores = malloc(hc * sh->ctok * sizeof(float));
            o->raw = malloc(hc * sh->ctok * sizeof(float));
            o->stats = malloc(hc * 2 * sizeof(float));
            o->part = malloc(hc * sh->d * sizeof(float));
            kern_force_portable(path == 0);
            attn_run(sh, q, kb, vb, nb, o);
            kern_force_portable(false);
        }
        double portable = attn_error(sh, q, kb, vb, &out[0]);
        double dispatched = attn_error(sh, q, kb, vb, &out[1]);
        printf("     kv_heads %zu group %zu D %zu tokens %zu: worst error %.3f (portable), %.3f "
               "(%s) of the bound\n",
               sh->kv_heads, sh->group, sh->d, sh->tokens, portable, dispatched, kern_path());
        ASSERT(portable <= 1.0);
        ASSERT(dispatched <= 1.0);
        /* softmax is the same arithmetic on both paths: fed the same scores,
         * the same bits */
        memcpy(out[1].scores, out[0].raw, hc * sh->ctok * sizeof(float));
        size_t ss[2] = {hc, sh->ctok}, sts[2] = {hc, 2};
        uint64_t tok = sh->tokens;
        hg_kview sm[2] = {kern_dense_view(out[1].scores, HG_F32, 2, ss),
                          kern_dense_view(out[1].stats, HG_F32, 2, sts)};
        ASSERT_EQ(kern_call(&kern_attn_softmax, sm, 2, &tok, 1), 0);
        ASSERT(memcmp(out[1].scores, out[0].scores, hc * sh->ctok * sizeof(float)) == 0);
        ASSERT(memcmp(out[1].stats, out[0].stats, hc * 2 * sizeof(float)) == 0);
        for (int path = 0; path < 2; path++) {
            free(out[path].scores);
            free(out[path].raw);
            free(out[path].stats);
            free(out[path].part);
        }
        for (size_t b = 0; b < nb; b++) {
            free(kb[b]);
            free(vb[b]);
        }
        free(q);
    }
}

/* HG_KERNELS=portable (ctest runs this file once more with it set) forces
 * the portable paths from the first kernel call on; otherwise dispatch
 * picks by the CPU. */
TEST(hg_kernels_env_picks_the_path)
{
    const char *env = getenv("HG_KERNELS");
    kern_force_portable(false);
    if (env != NULL && strcmp(env, "portable") == 0) {
        ASSERT_STR_EQ(kern_path(), "portable");
        ASSERT(!kern_use_avx512bf16());
    } else {
        ASSERT(strcmp(kern_path(), "portable") == 0 || strcmp(kern_path(), "avx512bf16") == 0);
        ASSERT_EQ(kern_use_avx512bf16(), strcmp(kern_path(), "avx512bf16") == 0);
    }
}

TEST(scenes_pass_on_the_portable_kernels_too)
{
    kern_force_portable(true);
    ASSERT_STR_EQ(kern_path(), "portable");
    static const char *const kv[] = {"batch=5"};
    expect_passes("qwen3_decode", kv, 1, 2);
    expect_passes("paged_attention", NULL, 0, 2);
    kern_force_portable(false);
}

int main(void)
{
    return RUN_TESTS();
}
