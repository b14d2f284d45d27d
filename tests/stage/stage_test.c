/*
 * stage_test.c: the bind plan and the retained buffer: classification,
 * 1024-byte slicing, grow-only reuse, checked sizes near SIZE_MAX (failing
 * before any allocation), release kinds, and the named errors of bad args.
 * Every test runs once per backend (test_device.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stage/stage.h"
#include "test_device.h"
#include "testlib.h"

static hg_device *open_on(const char *backend)
{
    return test_device_on(backend, "cores=1");
}

static uint64_t live_bytes(hg_device *dev)
{
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    return c.live_bytes;
}

static uint64_t allocs(hg_device *dev)
{
    hg_device_counters c;
    hg_device_counters_get(dev, &c);
    return c.allocs;
}

/* What bind does before allocating: classify, then lay out the slices. */
static int build_and_layout(stage_plan *p, hg_device *dev, const hg_arg *args, uint32_t n,
                            hg_err *e)
{
    int rc = stage_plan_build(p, dev, args, n, e);
    return rc != 0 ? rc : stage_plan_layout(p, e);
}

static hg_arg u8_arg(const char *name, hg_dir dir, hg_hostbuf *hb, size_t n)
{
    hg_arg a = {name, dir, {0}, 0, HG_STAGED};
    size_t shape[1] = {n};
    hg_tensor_host(&a.tensor, hb, HG_U8, 1, shape);
    return a;
}

TEST_EACH_BACKEND(slices_are_1024_aligned_and_sized_exactly)
{
    hg_device *dev = open_on(backend);
    ASSERT(dev != NULL);
    hg_hostbuf *a, *b, *c;
    ASSERT_OK(hg_hostbuf_create(1, &a));
    ASSERT_OK(hg_hostbuf_create(1025, &b));
    ASSERT_OK(hg_hostbuf_create(3, &c));
    hg_arg args[3] = {u8_arg("a", HG_IN, a, 1), u8_arg("b", HG_OUT, b, 1025),
                      u8_arg("c", HG_INOUT, c, 3)};
    stage_plan p;
    stage_plan_init(&p, NULL);
    hg_err e;
    ASSERT_OK(build_and_layout(&p, dev, args, 3, &e));
    ASSERT_UEQ(p.args[0].slice_offset, 0);
    ASSERT_UEQ(p.args[1].slice_offset, 1024);
    ASSERT_UEQ(p.args[2].slice_offset, 3072);
    ASSERT_UEQ(p.required, 4096);
    ASSERT(p.args[0].upload && !p.args[0].copy_back);
    ASSERT(!p.args[1].upload && p.args[1].copy_back); /* pure OUT is not copied in */
    ASSERT(p.args[2].upload && p.args[2].copy_back);
    ASSERT_EQ(p.args[1].release, RELEASE_RETAINED_SLICE);
    ASSERT_UEQ(allocs(dev), 0); /* planning allocates nothing */
    stage_plan_free(&p);
    hg_hostbuf_destroy(a);
    hg_hostbuf_destroy(b);
    hg_hostbuf_destroy(c);
    hg_device_close(dev);
}

TEST_EACH_BACKEND(retained_buffer_grows_and_never_shrinks)
{
    hg_device *dev = open_on(backend);
    ASSERT(dev != NULL);
    stage_retained r = {0, 0};
    hg_err e;
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, 5120, &e));
    ASSERT_UEQ(r.capacity, 5120);
    ASSERT_UEQ(allocs(dev), 1);
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, 3072, &e)); /* smaller: kept */
    ASSERT_UEQ(r.capacity, 5120);
    ASSERT_UEQ(allocs(dev), 1);
    /* larger: free old, take at least double (geometric growth) */
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, 6144, &e));
    ASSERT_UEQ(r.capacity, 10240);
    ASSERT_UEQ(allocs(dev), 2);
    ASSERT_UEQ(live_bytes(dev), 10240);
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, 30720, &e)); /* past double: exact */
    ASSERT_UEQ(r.capacity, 30720);
    ASSERT_OK(hg_device_inject_fault(dev, HG_FAULT_ALLOC, 1));
    ASSERT_EQ(stage_retained_reserve(&r, dev, NULL, 71680, &e), HG_EDEVMEM);
    ASSERT_UEQ(r.capacity, 0); /* the failed growth leaves no stale capacity */
    ASSERT_UEQ(live_bytes(dev), 0);
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, 40960, &e));
    stage_retained_free(&r, dev, NULL);
    ASSERT_UEQ(live_bytes(dev), 0);
    hg_device_close(dev);
}

/* An arg that grows by 4 KiB a run (a KV cache during decode) makes
 * O(log n) allocations of the retained buffer over n runs, not one a run. */
TEST_EACH_BACKEND(retained_buffer_grows_geometrically)
{
    hg_device *dev = open_on(backend);
    ASSERT(dev != NULL);
    stage_retained r = {0, 0};
    hg_err e;
    enum { RUNS = 1000 };
    for (size_t run = 1; run <= RUNS; run++)
        ASSERT_OK(stage_retained_reserve(&r, dev, NULL, (64u << 10) + run * 4096, &e));
    /* 68 KiB -> 4 MiB doubles about 6 times; allow log2(RUNS) + 2 */
    ASSERT_ULE(allocs(dev), 12);
    ASSERT_UGE(r.capacity, (64u << 10) + RUNS * 4096);
    stage_retained_free(&r, dev, NULL);
    hg_device_close(dev);
}

/* Growth stays within the device: when doubling would not fit, the buffer
 * is exactly what is required. */
TEST_EACH_BACKEND(retained_growth_is_capped_by_device_memory)
{
    hg_device *dev = test_device_on(backend, "cores=1,mem=100K");
    ASSERT(dev != NULL);
    stage_retained r = {0, 0};
    hg_err e;
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, 40 << 10, &e));
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, 60 << 10, &e));
    ASSERT_UEQ(r.capacity, 80 << 10);
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, 90 << 10, &e));
    ASSERT_UEQ(r.capacity, 90 << 10); /* 160K would not fit in 100K */
    stage_retained_free(&r, dev, NULL);
    hg_device_close(dev);
}

TEST_EACH_BACKEND(impossible_sizes_fail_before_any_allocation)
{
    hg_device *dev = open_on(backend);
    ASSERT(dev != NULL);
    /* A host buffer that claims SIZE_MAX bytes: planning must never touch it. */
    static char byte;
    hg_hostbuf *huge;
    ASSERT_OK(hg_hostbuf_wrap(&byte, SIZE_MAX, &huge));
    stage_plan p;
    stage_plan_init(&p, NULL);
    hg_err e;

    /* Two slices whose sum overflows. */
    hg_arg two[2] = {u8_arg("x", HG_IN, huge, SIZE_MAX / 2 + 1), u8_arg("y", HG_IN, huge, 0)};
    two[1].tensor.offset = SIZE_MAX / 2 + 1;
    two[1].tensor.shape[0] = SIZE_MAX / 2 - 1;
    ASSERT_EQ(build_and_layout(&p, dev, two, 2, &e), HG_EOVERFLOW);
    ASSERT_STR_CONTAINS(e.msg, "arg 'y'");

    /* One slice whose 1024-byte alignment overflows. */
    hg_arg one = u8_arg("z", HG_IN, huge, SIZE_MAX - 10);
    ASSERT_EQ(build_and_layout(&p, dev, &one, 1, &e), HG_EOVERFLOW);
    ASSERT_STR_CONTAINS(e.msg, "arg 'z'");

    /* A shape whose byte extent overflows. */
    hg_arg wide = u8_arg("w", HG_IN, huge, 1);
    wide.tensor.dtype = HG_F32;
    wide.tensor.shape[0] = SIZE_MAX / 2;
    ASSERT_EQ(build_and_layout(&p, dev, &wide, 1, &e), HG_EOVERFLOW);

    ASSERT_UEQ(allocs(dev), 0);
    stage_plan_free(&p);
    hg_hostbuf_destroy(huge);
    hg_device_close(dev);
}

TEST_EACH_BACKEND(bad_args_get_named_errors)
{
    hg_device *dev = open_on(backend);
    ASSERT(dev != NULL);
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(100, &hb));
    stage_plan p;
    stage_plan_init(&p, NULL);
    hg_err e;

    /* hg_tensor_host refuses such a view; a hand-made one still gets here. */
    hg_arg past = u8_arg("k_cache", HG_IN, hb, 100);
    past.tensor.shape[0] = 101;
    ASSERT_EQ(build_and_layout(&p, dev, &past, 1, &e), HG_ERANGE);
    ASSERT_STR_CONTAINS(e.msg, "arg 'k_cache': view ends at byte 101, buffer has 100");

    hg_arg noname = u8_arg("", HG_IN, hb, 1);
    ASSERT_EQ(build_and_layout(&p, dev, &noname, 1, &e), HG_EINVAL);

    hg_arg dup[2] = {u8_arg("a", HG_IN, hb, 1), u8_arg("a", HG_IN, hb, 1)};
    ASSERT_EQ(build_and_layout(&p, dev, dup, 2, &e), HG_EINVAL);
    ASSERT_STR_CONTAINS(e.msg, "'a'");

    hg_arg both = u8_arg("both", HG_IN, hb, 1);
    both.tensor.device = 0x1000;
    ASSERT_EQ(build_and_layout(&p, dev, &both, 1, &e), HG_EINVAL);
    ASSERT_STR_CONTAINS(e.msg, "arg 'both'");

    hg_arg alias[2] = {u8_arg("in", HG_IN, hb, 50), u8_arg("out", HG_OUT, hb, 10)};
    ASSERT_EQ(build_and_layout(&p, dev, alias, 2, &e), HG_EINVAL);
    ASSERT_STR_CONTAINS(e.msg, "'in' and 'out' overlap");
    alias[1].dir = HG_IN; /* two readers of one buffer are fine */
    ASSERT_OK(build_and_layout(&p, dev, alias, 2, &e));

    hg_arg dangling = {"dangling", HG_IN, {0}, 0, HG_STAGED};
    size_t shape[1] = {4};
    ASSERT_OK(hg_tensor_device(&dangling.tensor, 0xD0000000DEAD0000ull, HG_F32, 1, shape));
    ASSERT_EQ(build_and_layout(&p, dev, &dangling, 1, &e), HG_ERANGE);
    ASSERT_STR_CONTAINS(e.msg, "arg 'dangling'");

    stage_plan_free(&p);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

TEST_EACH_BACKEND(arg_limits_are_enforced_with_a_named_error)
{
    hg_device *dev = open_on(backend);
    ASSERT(dev != NULL);
    enum { N = HG_MAX_TENSOR_ARGS + 1 };
    static hg_arg args[N];
    static char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "s%d", i);
        args[i].name = names[i];
        args[i].dir = HG_SCALAR;
    }
    stage_plan p;
    stage_plan_init(&p, NULL);
    hg_err e;
    ASSERT_OK(build_and_layout(&p, dev, args, HG_MAX_SCALAR_ARGS, &e));
    ASSERT_EQ(build_and_layout(&p, dev, args, HG_MAX_SCALAR_ARGS + 1, &e), HG_ELIMIT);
    ASSERT_STR_CONTAINS(e.msg, "scalar");

    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(8, &hb));
    for (int i = 0; i < N; i++)
        args[i] = u8_arg(names[i], HG_IN, hb, 8);
    ASSERT_OK(build_and_layout(&p, dev, args, HG_MAX_TENSOR_ARGS, &e));
    ASSERT_EQ(build_and_layout(&p, dev, args, N, &e), HG_ELIMIT);
    ASSERT_STR_CONTAINS(e.msg, "tensor");
    stage_plan_free(&p);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

TEST_EACH_BACKEND(release_frees_run_owned_memory_only)
{
    hg_device *dev = open_on(backend);
    ASSERT(dev != NULL);
    hg_hostbuf *hb, *empty;
    ASSERT_OK(hg_hostbuf_create(64, &hb));
    ASSERT_OK(hg_hostbuf_create(0, &empty));
    hg_devaddr user;
    ASSERT_OK(hg_devbuf_malloc(dev, 256, &user));
    hg_arg args[4] = {u8_arg("host", HG_IN, hb, 64),
                      u8_arg("zero", HG_IN, empty, 0),
                      {"dev", HG_IN, {0}, 0, HG_STAGED},
                      {"scalar", HG_SCALAR, {0}, 7, HG_STAGED}};
    size_t shape[1] = {256};
    ASSERT_OK(hg_tensor_device(&args[2].tensor, user, HG_U8, 1, shape));

    stage_plan p;
    stage_plan_init(&p, NULL);
    stage_retained r = {0, 0};
    hg_err e;
    ASSERT_OK(build_and_layout(&p, dev, args, 4, &e));
    ASSERT_EQ(p.args[0].kind, STAGE_SLICE);
    ASSERT_EQ(p.args[1].kind, STAGE_ZERO);
    ASSERT_EQ(p.args[1].release, RELEASE_NONE);
    ASSERT_EQ(p.args[2].kind, STAGE_DEVICE_VIEW);
    ASSERT_EQ(p.args[2].release, RELEASE_USER_OWNED);
    ASSERT_UEQ(p.args[2].dev_region, user);
    ASSERT_EQ(p.args[3].kind, STAGE_SCALAR);
    ASSERT_UEQ(p.required, 1024); /* only the host arg takes a slice */
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, p.required, &e));
    ASSERT_OK(stage_upload(&p, dev, &r, &e));

    uint32_t idx;
    hg_tensor view;
    size_t sshape[2] = {4, 4};
    ASSERT_OK(stage_add_scratch(&p, dev, "tmp", HG_F32, 2, sshape, &idx, &view, &e));
    ASSERT_EQ(idx, 4);
    ASSERT_EQ(p.args[idx].release, RELEASE_POOLED);
    ASSERT_UEQ(live_bytes(dev), 3 * HG_DEVICE_ALIGN); /* user, retained, scratch */

    /* The scratch this run took goes back to the pool, kept for the next run */
    stage_release(&p, dev);
    ASSERT_UEQ(live_bytes(dev), 3 * HG_DEVICE_ALIGN);
    ASSERT_EQ(p.nall, 4);
    /* a run that does not take it frees it */
    p.run++;
    stage_release(&p, dev);
    ASSERT_UEQ(live_bytes(dev), 2 * HG_DEVICE_ALIGN); /* user-owned and retained stay */
    stage_retained_free(&r, dev, NULL);
    ASSERT_OK(hg_devbuf_free(dev, user)); /* still the user's to free */
    ASSERT_UEQ(live_bytes(dev), 0);
    stage_plan_free(&p);
    hg_hostbuf_destroy(hb);
    hg_hostbuf_destroy(empty);
    hg_device_close(dev);
}

/* A chain of W tasks writing one view of an INOUT notes it once (copy-back
 * sorts the notes: W of them would cost O(W log W)); views that come back
 * out of turn are noted again and dropped when copy-back plans.  The whole
 * run copies the bytes back once: tests/run/writeback_test.c counts that. */
TEST_EACH_BACKEND(a_chain_writing_one_view_notes_it_once)
{
    enum { W = 1000 };
    hg_device *dev = open_on(backend);
    ASSERT(dev != NULL);
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(128, &hb));
    hg_arg args[1] = {u8_arg("c", HG_INOUT, hb, 128)};
    stage_plan p;
    stage_plan_init(&p, NULL);
    hg_err e;
    ASSERT_OK(build_and_layout(&p, dev, args, 1, &e));
    hg_tensor a, b;
    ASSERT_OK(hg_tensor_slice(&args[0].tensor, 0, 0, 64, &a));
    ASSERT_OK(hg_tensor_slice(&args[0].tensor, 0, 64, 64, &b));
    for (int t = 0; t < W; t++)
        ASSERT_OK(stage_note_written(&p, 0, &a, &e));
    ASSERT_UEQ(p.nwritten, 1);
    ASSERT_OK(stage_note_written(&p, 0, &b, &e));
    ASSERT_OK(stage_note_written(&p, 0, &a, &e));
    ASSERT_UEQ(p.nwritten, 3);
    stage_plan_free(&p);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

/* Copy-back writes each byte of the written views' union once: through
 * host staging when the views are several (all or nothing across ranges),
 * straight into the host buffer when they are one dense range (the sim's
 * copy of one range writes all of it or none).  Either way the union comes
 * from the device and every other byte (a strided view's gaps included)
 * stays as the host had it. */
static void copy_back_case(int nviews, uint64_t *committed, uint64_t *direct)
{
    enum { SIZE = 1 << 20 };
    hg_device *dev = test_device_open("sim:cores=1");
    ASSERT(dev != NULL);
    hg_hostbuf *hb;
    ASSERT_OK(hg_hostbuf_create(SIZE, &hb));
    unsigned char *h = hg_hostbuf_data(hb), *d = malloc(SIZE);
    ASSERT(d != NULL);
    for (size_t i = 0; i < SIZE; i++)
        h[i] = (unsigned char)(i * 3), d[i] = (unsigned char)(i * 7 + 1);
    hg_arg args[1] = {u8_arg("c", HG_INOUT, hb, SIZE)};
    stage_plan p;
    stage_plan_init(&p, NULL);
    stage_retained r = {0, 0};
    hg_err e;
    ASSERT_OK(build_and_layout(&p, dev, args, 1, &e));
    ASSERT_OK(stage_retained_reserve(&r, dev, NULL, p.required, &e));
    ASSERT_OK(stage_upload(&p, dev, &r, &e));
    ASSERT_OK(device_copy_to(dev, p.args[0].dev_region, d, SIZE, NULL));
    hg_tensor v[4];
    ASSERT_OK(hg_tensor_slice(&args[0].tensor, 0, 0, SIZE / 2, &v[0]));
    ASSERT_OK(hg_tensor_slice(&args[0].tensor, 0, SIZE / 4, SIZE / 2, &v[1]));
    v[2] = v[0];
    v[3] = args[0].tensor; /* every other byte of the last quarter */
    v[3].offset = 3 * SIZE / 4;
    v[3].shape[0] = SIZE / 8;
    v[3].strides[0] = 2;
    for (int k = 0; k < nviews; k++)
        ASSERT_OK(stage_note_written(&p, 0, &v[k], &e));
    ASSERT_OK(stage_copy_back(&p, dev, &e));
    for (size_t i = 0; i < SIZE; i++) {
        bool written = nviews == 1 ? i < SIZE / 2 : i < 3 * SIZE / 4 || (i - 3 * SIZE / 4) % 2 == 0;
        ASSERT_EQ(h[i], written ? d[i] : (unsigned char)(i * 3));
    }
    *committed = p.rstats.committed_bytes;
    *direct = p.direct_fetches;
    stage_release(&p, dev);
    stage_retained_free(&r, dev, NULL);
    stage_plan_free(&p);
    free(d);
    hg_hostbuf_destroy(hb);
    hg_device_close(dev);
}

TEST(copy_back_commits_the_union_once)
{
    enum { SIZE = 1 << 20 };
    uint64_t committed, direct;
    copy_back_case(4, &committed, &direct);
    ASSERT_UEQ(committed, 3 * SIZE / 4 + SIZE / 8);
    ASSERT_UEQ(direct, 0);
    copy_back_case(1, &committed, &direct);
    ASSERT_UEQ(committed, SIZE / 2);
    ASSERT_UEQ(direct, 1);
}

/* One ROWS x COLS u8 INOUT matrix "c", staged on a fresh sim: the host
 * holds 1s, its device copy 9s, planned and uploaded, ready for notes. */
typedef struct matrix_case {
    hg_device *dev;
    hg_hostbuf *hb;
    hg_arg a;
    stage_plan p;
    stage_retained r;
    hg_err e;
} matrix_case;

static void matrix_open_on(matrix_case *m, const char *backend, size_t rows, size_t cols)
{
    m->dev = open_on(backend);
    ASSERT(m->dev != NULL);
    ASSERT_OK(hg_hostbuf_create(rows * cols, &m->hb));
    memset(hg_hostbuf_data(m->hb), 1, rows * cols);
    m->a = (hg_arg){"c", HG_INOUT, {0}, 0, HG_STAGED};
    size_t shape[2] = {rows, cols};
    ASSERT_OK(hg_tensor_host(&m->a.tensor, m->hb, HG_U8, 2, shape));
    stage_plan_init(&m->p, NULL);
    m->r = (stage_retained){0, 0};
    ASSERT_OK(build_and_layout(&m->p, m->dev, &m->a, 1, &m->e));
    ASSERT_OK(stage_retained_reserve(&m->r, m->dev, NULL, m->p.required, &m->e));
    ASSERT_OK(stage_upload(&m->p, m->dev, &m->r, &m->e));
    ASSERT_OK(device_fill(m->dev, m->p.args[0].dev_region, 9, rows * cols));
}

static void matrix_open(matrix_case *m, size_t rows, size_t cols)
{
    matrix_open_on(m, "sim", rows, cols);
}

static void matrix_close(matrix_case *m)
{
    stage_release(&m->p, m->dev);
    stage_retained_free(&m->r, m->dev, NULL);
    stage_plan_free(&m->p);
    hg_hostbuf_destroy(m->hb);
    hg_device_close(m->dev);
}

/* Strided views that tile one range between them (the two column halves of
 * a matrix, as bgemm's C tiles are) cover it exactly: it comes straight
 * back too, each byte once. */
TEST(tiles_covering_one_range_come_back_straight)
{
    enum { ROWS = 64, COLS = 256 };
    matrix_case m;
    matrix_open(&m, ROWS, COLS);
    for (int half = 0; half < 2; half++) {
        hg_tensor v;
        ASSERT_OK(hg_tensor_slice(&m.a.tensor, 1, (size_t)half * COLS / 2, COLS / 2, &v));
        ASSERT_OK(stage_note_written(&m.p, 0, &v, &m.e));
    }
    ASSERT_OK(stage_copy_back(&m.p, m.dev, &m.e));
    ASSERT_UEQ(m.p.direct_fetches, 1);
    ASSERT_UEQ(m.p.rstats.committed_bytes, ROWS * COLS);
    const unsigned char *h = hg_hostbuf_data(m.hb);
    for (size_t i = 0; i < ROWS * COLS; i++)
        ASSERT_EQ(h[i], 9);
    matrix_close(&m);
}

/* bgemm's C: a grid of GxG tiles, each task writing one tile (a strided
 * view) of a ROWS x COLS u8 buffer, `skip` tiles left out (-1: none).  Copy
 * back; returns the plan's counts through the out-params and checks that
 * exactly the written tiles' bytes came back (the rest keep the host's). */
static void copy_back_tiles(const char *backend, int skip, uint64_t *runs, uint32_t *ranges,
                            uint64_t *committed)
{
    enum { ROWS = 64, COLS = 128, G = 4 };
    matrix_case m;
    matrix_open_on(&m, backend, ROWS, COLS);
    for (int t = 0; t < G * G; t++) {
        if (t == skip)
            continue;
        hg_tensor row, tile;
        ASSERT_OK(hg_tensor_slice(&m.a.tensor, 0, (size_t)(t / G) * (ROWS / G), ROWS / G, &row));
        ASSERT_OK(hg_tensor_slice(&row, 1, (size_t)(t % G) * (COLS / G), COLS / G, &tile));
        ASSERT_OK(stage_note_written(&m.p, 0, &tile, &m.e));
    }
    ASSERT_OK(stage_copy_back(&m.p, m.dev, &m.e));
    *runs = m.p.plan_runs;
    *ranges = m.p.args[0].back_n;
    *committed = m.p.rstats.committed_bytes;
    const unsigned char *h = hg_hostbuf_data(m.hb);
    for (size_t i = 0; i < ROWS * COLS; i++) {
        size_t t = (i / COLS) / (ROWS / G) * G + (i % COLS) / (COLS / G);
        ASSERT_EQ(h[i], (int)t == skip ? 1 : 9);
    }
    matrix_close(&m);
}

/* The tiles of a grid join into one view per row, the rows into one range:
 * planning walks no tile's runs, fetches one range and commits it once. */
TEST_EACH_BACKEND(a_grid_of_tiles_is_planned_as_one_range)
{
    uint64_t runs, committed;
    uint32_t ranges;
    copy_back_tiles(backend, -1, &runs, &ranges, &committed);
    ASSERT_UEQ(runs, 0);
    ASSERT_UEQ(ranges, 1);
    ASSERT_UEQ(committed, 64 * 128);
}

/* A tile left out breaks the joins around it, never the bytes: only the
 * written tiles come back (checked byte by byte in copy_back_tiles). */
TEST_EACH_BACKEND(a_grid_with_a_tile_missing_commits_only_the_written_tiles)
{
    for (int skip = 0; skip < 16; skip += 5) {
        uint64_t runs, committed;
        uint32_t ranges;
        copy_back_tiles(backend, skip, &runs, &ranges, &committed);
        ASSERT_UEQ(committed, 64 * 128 - 16 * 32);
    }
}

/* Tasks that write their tiles in address order (most graphs) cost
 * planning no sort: one pass finds them in order, and the tiles join into
 * one range.  Out of order they are sorted, with the same result. */
TEST_EACH_BACKEND(tiles_written_in_order_are_planned_without_a_sort)
{
    enum { ROWS = 64, COLS = 64 };
    for (int reversed = 0; reversed < 2; reversed++) {
        matrix_case m;
        matrix_open_on(&m, backend, ROWS, COLS);
        for (int i = 0; i < ROWS; i++) {
            hg_tensor row;
            size_t at = (size_t)(reversed ? ROWS - 1 - i : i);
            ASSERT_OK(hg_tensor_slice(&m.a.tensor, 0, at, 1, &row));
            ASSERT_OK(stage_note_written(&m.p, 0, &row, &m.e));
        }
        ASSERT_OK(stage_copy_back(&m.p, m.dev, &m.e));
        ASSERT_UEQ(m.p.plan_sorted, reversed ? ROWS : 0);
        ASSERT_UEQ(m.p.args[0].back_n, 1);
        ASSERT_UEQ(m.p.rstats.committed_bytes, ROWS * COLS);
        const unsigned char *h = hg_hostbuf_data(m.hb);
        for (size_t b = 0; b < ROWS * COLS; b++)
            ASSERT_EQ(h[b], 9);
        matrix_close(&m);
    }
}

int main(void)
{
    return RUN_TESTS();
}
