/*
 * fuzz_residency.c: residency, ranged uploads and copy-back against a
 * host-side oracle, driven by the fuzzer's bytes.
 *
 * World (opened and closed per input, so nothing carries over): two sim
 * devices, three runners (two share device 0), four host buffers (created,
 * or wrapping harness memory), one user device buffer per device.  Each
 * input byte stream is a sequence of operations:
 *   - declared host writes (hg_hostbuf_write, or in place + mark_written),
 *     bursts that overflow the write log;
 *   - undeclared writes (in place, no mark), only while every runner is in
 *     verify mode, and their later declaration;
 *   - runs of one task over 1-4 args of random extents, directions and
 *     residency, sometimes a device view, sometimes an injected fault, and
 *     sometimes a host write through the API made during orchestration;
 *     a run may repeat a runner's last run (the same args; its tasks then
 *     touch every byte of them, or the same pieces);
 *   - buffers destroyed and re-wrapped over the same memory (a new id), or
 *     created anew; budgets, verify mode, runners closed and reopened.
 * The oracle keeps every host byte a buffer must hold and its generation.
 * After every run it checks, from the header's promises: every host byte;
 * each generation moved once per buffer the run copied back into (plus the
 * declared writes); on failure nothing changed; d2h bytes are the written
 * ranges exactly, h2d bytes lie within the IN/INOUT extents and cover the
 * staged ones, and are 0 for an exact repeat with nothing changed;
 * hg_runner_copied_back is the ranges tasks wrote; an undeclared write under
 * a resident arg is HG_ESTALE or never read stale, and HG_ESTALE for an
 * exact repeat of a run whose copies are current (residency_oracle.c).
 *
 * Known defects (tests/known_bugs.h, HG_FUZZ_KNOWN_BUGS) whose scenarios
 * are generated only on request: 1 declared writes to a buffer with an
 * undeclared write pending; 2 device views of another device; 4 API writes
 * during a run to a resident INOUT arg's buffer; 6 two written args on one
 * buffer; 7 the count of a runner's resident copies bounded by the live
 * buffers' extents; 11 no byte up for an exact repeat when two args share
 * one copy.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "hostgraph.h"
#include "model_kernel.h"
#include "residency.h"

/* ------------------------------------------------------------ buffers */

static void key_forget(fz_world *w, uint64_t id)
{
    for (int r = 0; r < NRUNNER; r++) {
        fz_runner *fr = &w->run[r];
        uint32_t k = 0;
        for (uint32_t i = 0; i < fr->nkeys; i++)
            if (fr->keys[i].id != id)
                fr->keys[k++] = fr->keys[i];
        fr->nkeys = k;
    }
}

static void key_add(fz_runner *fr, uint64_t id, size_t lo, size_t hi)
{
    for (uint32_t i = 0; i < fr->nkeys; i++)
        if (fr->keys[i].id == id && fr->keys[i].lo == lo && fr->keys[i].hi == hi)
            return;
    if (fr->nkeys < MAX_KEYS)
        fr->keys[fr->nkeys++] = (fz_key){id, lo, hi};
}

/* Registers slot i's memory anew: created (zeroed, then filled through
 * the API) or wrapping harness memory.  Never two live registrations of
 * the same memory. */
static void buf_open(fz_world *w, int i, size_t size, bool wrap, unsigned char fill)
{
    fz_buf *b = &w->buf[i];
    b->size = size;
    int rc = wrap ? hg_hostbuf_wrap(b->mem, size, &b->hb) : hg_hostbuf_create(size, &b->hb);
    if (rc != 0)
        fz_fail("buffer %d: cannot register %zu bytes: %s", i, size, hg_strerror(rc));
    if (!wrap)
        memset(b->model, 0, sizeof b->model);
    else
        memcpy(b->model, b->mem, size);
    b->gen = hg_hostbuf_generation(b->hb);
    b->pending = false;
    b->changes++;
    if (fill) {
        memset(b->model, fill, size);
        hg_hostbuf_write(b->hb, 0, b->model, size);
        b->gen++;
    }
    b->virgin = true;
}

static void buf_close(fz_world *w, int i)
{
    fz_buf *b = &w->buf[i];
    key_forget(w, hg_hostbuf_id(b->hb));
    hg_hostbuf_destroy(b->hb);
    b->hb = NULL;
}

/* Declares slot i's undeclared write, as a user answering HG_ESTALE would. */
static void buf_declare(fz_world *w, int i)
{
    fz_buf *b = &w->buf[i];
    if (!b->pending)
        return;
    TRACE(w, "declare buffer %d [%zu, %zu)\n", i, b->ulo, b->uhi);
    hg_hostbuf_mark_written(b->hb, b->ulo, b->uhi - b->ulo);
    b->gen++;
    buf_changed(b);
    b->pending = false;
}

/* Slot i may take a declared write (defect 1: not over an undeclared one). */
static bool may_declare(const fz_world *w, int i)
{
    return !w->buf[i].pending || w->bug[1];
}

static void op_write(fz_world *w)
{
    int i = (int)fz_below(&w->in, NBUF);
    fz_buf *b = &w->buf[i];
    size_t lo = fz_below(&w->in, (uint32_t)b->size);
    size_t len = 1 + fz_below(&w->in, (uint32_t)(b->size - lo));
    unsigned char v = fz_u8(&w->in);
    bool in_place = v & 1;
    if (!may_declare(w, i))
        return buf_declare(w, i);
    TRACE(w, "write buffer %d [%zu, %zu)%s\n", i, lo, lo + len, in_place ? " in place" : "");
    for (size_t j = 0; j < len; j++)
        b->model[lo + j] = (unsigned char)(v + 3 * j);
    if (in_place) {
        memcpy(buf_data(b) + lo, b->model + lo, len);
        hg_hostbuf_mark_written(b->hb, lo, len);
    } else {
        hg_hostbuf_write(b->hb, lo, b->model + lo, len);
    }
    b->gen++;
    buf_changed(b);
}

/* More one-byte writes than the log remembers. */
static void op_burst(fz_world *w)
{
    int i = (int)fz_below(&w->in, NBUF);
    fz_buf *b = &w->buf[i];
    unsigned char v = fz_u8(&w->in);
    if (!may_declare(w, i))
        return buf_declare(w, i);
    for (size_t k = 0; k < HG_HOSTBUF_LOG + 8; k++) {
        size_t at = (k * 7 + v) % b->size;
        b->model[at] = (unsigned char)(v + k);
        hg_hostbuf_write(b->hb, at, &b->model[at], 1);
        b->gen++;
    }
    buf_changed(b);
}

/* A write that bypasses the API: every runner verifies from now on. */
static void op_undeclared(fz_world *w)
{
    int i = (int)fz_below(&w->in, NBUF);
    fz_buf *b = &w->buf[i];
    size_t lo = fz_below(&w->in, (uint32_t)b->size);
    size_t len = 1 + fz_below(&w->in, (uint32_t)(b->size - lo));
    unsigned char v = fz_u8(&w->in);
    if (!b->virgin && !w->bug[1])
        return; /* defect 1: copies current at an older generation upload the logged ranges */
    for (int r = 0; r < NRUNNER; r++)
        if (!w->run[r].verify) { /* undeclared writes are caught only in verify mode */
            w->run[r].verify = true;
            w->run[r].last_valid = false;
            hg_runner_set_verify(w->run[r].r, true);
        }
    TRACE(w, "undeclared write buffer %d [%zu, %zu)\n", i, lo, lo + len);
    for (size_t j = 0; j < len; j++)
        b->model[lo + j] = (unsigned char)(b->model[lo + j] ^ (v | 1));
    memcpy(buf_data(b) + lo, b->model + lo, len);
    if (!b->pending) {
        b->ulo = lo;
        b->uhi = lo + len;
    }
    b->ulo = lo < b->ulo ? lo : b->ulo;
    b->uhi = lo + len > b->uhi ? lo + len : b->uhi;
    b->pending = true;
}

static void op_rewrap(fz_world *w)
{
    int i = (int)fz_below(&w->in, NBUF);
    uint8_t how = fz_u8(&w->in);
    fz_buf *b = &w->buf[i];
    size_t size = b->size;
    TRACE(w, "%s buffer %d\n", how & 1 ? "re-wrap" : "new", i);
    buf_close(w, i);
    if (how & 1) { /* the same memory, a new registration */
        if (b->mem == NULL) {
            b->mem = malloc(MAX_BUF);
            memcpy(b->mem, b->model, size);
        }
        buf_open(w, i, size, true, 0);
    } else { /* a new buffer of a new size */
        free(b->mem);
        b->mem = NULL;
        buf_open(w, i, 1 + (how >> 1) * 2 % MAX_BUF, false, how | 1);
    }
}

/* ----------------------------------------------------------------- runs */

static int orch_model(hg_orch *o, void *user)
{
    fz_run *run = user;
    hg_task_arg ta[MAX_ARGS];
    uint64_t dirs[MAX_ARGS];
    for (uint32_t i = 0; i < run->n; i++) {
        const hg_arg *a = &run->args[i];
        ta[i] = (hg_task_arg){i, a->dir, {0}};
        int rc = hg_tensor_slice(&a->tensor, 0, run->cut[i].lo, run->cut[i].hi - run->cut[i].lo,
                                 &ta[i].view);
        if (rc != 0)
            return hg_orch_fail(o, rc, "cut of arg %u", i);
        dirs[i] = a->dir;
    }
    hg_task_desc d = {&K_MODEL, ta, run->n, dirs, run->n, NULL, 0};
    int rc = hg_task_submit(o, &d, NULL);
    if (rc == 0 && run->iw_slot >= 0) {
        unsigned char src[MAX_BUF];
        memset(src, run->iw_val, run->iw_len);
        rc = hg_hostbuf_write(run->iw_hb, run->iw_lo, src, run->iw_len);
        run->iw_done = rc == 0;
    }
    return rc;
}

static const char *const NAMES[MAX_ARGS] = {"a0", "a1", "a2", "a3"};

/* Arg k over slot i, or over a device view of device `vd` when i < 0. */
static void make_arg(fz_world *w, fz_run *run, uint32_t k, int i, int vd)
{
    fz_in *in = &w->in;
    uint8_t c = fz_u8(in);
    hg_dir dir = i < 0 ? HG_IN : (hg_dir)(HG_IN + c % 3);
    hg_residency res = (c >> 2) % 4 ? HG_RESIDENT : HG_STAGED;
    size_t size = i < 0 ? VIEW : w->buf[i].size, lo = 0, len = size;
    if (c & 0x10) { /* mostly whole buffers, so copies get reused */
        lo = fz_below(in, (uint32_t)size);
        len = fz_below(in, (uint32_t)(size - lo) + 1);
    }
    run->slot[k] = i;
    run->vdev[k] = vd;
    run->lo[k] = lo;
    run->len[k] = len;
    run->args[k] = (hg_arg){NAMES[k], dir, {0}, 0, res};
    if (i >= 0) {
        hg_tensor_host(&run->args[k].tensor, w->buf[i].hb, HG_U8, 1, &len);
        run->args[k].tensor.offset = lo;
    } else {
        hg_tensor_device(&run->args[k].tensor, len ? w->view[vd] + lo : 0, HG_U8, 1, &len);
    }
    size_t a = 0, b = len;
    if (is_written(dir) && len > 0 && (c & 0x20)) { /* write a piece only */
        a = fz_below(in, (uint32_t)len);
        b = a + fz_below(in, (uint32_t)(len - a) + 1);
    }
    run->cut[k] = (hg_range){a, b};
}

/* Random args for runner r; false when the bugs off forbid what came out. */
static bool make_run(fz_world *w, uint32_t r, fz_run *run)
{
    memset(run, 0, sizeof *run);
    run->n = 1 + fz_below(&w->in, MAX_ARGS);
    for (uint32_t k = 0; k < run->n; k++) {
        uint8_t c = fz_u8(&w->in);
        int vd = (int)w->run[r].dev;
        if (c % 8 == 7 && w->bug[2])
            vd = (c >> 3) % NDEV;
        make_arg(w, run, k, c % 8 == 7 ? -1 : (int)(c % NBUF), vd);
    }
    uint8_t c = fz_u8(&w->in);
    run->iw_slot = -1;
    if (c % 6 == 5) { /* mostly into one of the run's own buffers */
        int k = (int)((c >> 3) % (run->n + 1));
        run->iw_slot = k < (int)run->n && run->slot[k] >= 0 ? run->slot[k] : (c >> 5) % NBUF;
        fz_buf *b = &w->buf[run->iw_slot];
        run->iw_lo = fz_below(&w->in, (uint32_t)b->size);
        run->iw_len = 1 + fz_below(&w->in, (uint32_t)(b->size - run->iw_lo));
        run->iw_val = fz_u8(&w->in);
        run->iw_hb = b->hb;
    }
    for (uint32_t k = 0; k < run->n; k++) {
        int i = run->slot[k];
        if (i < 0 || !is_written(run->args[k].dir))
            continue;
        if (!may_declare(w, i))
            return false; /* defect 1: a copy-back over an undeclared write */
        for (uint32_t j = k + 1; j < run->n && !w->bug[6]; j++)
            if (run->slot[j] == i && is_written(run->args[j].dir) && run->len[k] && run->len[j])
                return false; /* defect 6: two written args on one buffer */
        if (i == run->iw_slot && run->args[k].dir == HG_INOUT &&
            run->args[k].residency == HG_RESIDENT && !w->bug[4])
            return false; /* defect 4 */
    }
    return run->iw_slot < 0 || may_declare(w, run->iw_slot);
}

/* Runs `run` on runner r and checks every promise the oracle knows. */
static void do_run(fz_world *w, uint32_t r, fz_run *run, bool repeat)
{
    fz_runner *fr = &w->run[r];
    fz_expect x;
    residency_expect(w, r, run, repeat, &x);
    static unsigned char out[MAX_ARGS][MAX_BUF];
    residency_outputs(w, r, run, out);
    uint8_t f = fz_u8(&w->in);
    x.faulted = f % 8 == 7;
    hg_device *dev = w->dev[fr->dev];
    if (x.faulted)
        hg_device_inject_fault(dev, (f >> 3) & 1 ? HG_FAULT_COPY : HG_FAULT_ALLOC,
                               1 + (f >> 4) % 6);
    hg_callable call = {"model", orch_model, run};
    hg_run_stats s;
    run->iw_done = false;
    int rc = hg_runner_run(fr->r, &call, run->args, run->n, &s);
    hg_device_inject_fault(dev, HG_FAULT_ALLOC, 0);
    hg_device_inject_fault(dev, HG_FAULT_COPY, 0);
    residency_trace(w, r, run, repeat, &x, rc, &s);
    for (uint32_t k = 0; k < run->n; k++)
        if (run->slot[k] >= 0 && run->args[k].residency == HG_RESIDENT && run->len[k] > 0 &&
            run->args[k].dir != HG_OUT)
            key_add(fr, hg_hostbuf_id(w->buf[run->slot[k]].hb), run->lo[k],
                    run->lo[k] + run->len[k]);
    if (run->iw_done) { /* declared, whatever became of the run */
        fz_buf *b = &w->buf[run->iw_slot];
        memset(b->model + run->iw_lo, run->iw_val, run->iw_len);
        b->gen++;
        buf_changed(b);
    }
    bool fault_rc = x.faulted && (rc == HG_EDEVMEM || rc == HG_ECOPY);
    if (x.einval && rc != HG_EINVAL && !(x.refuse && rc != 0))
        fz_fail("overlapping args, one written: rc %d (%s), HG_EINVAL expected", rc,
                hg_runner_errmsg(fr->r));
    if (x.refuse && rc == 0)
        fz_fail("a view of another device's memory was accepted");
    if (x.must_stale && rc != HG_ESTALE && !fault_rc)
        fz_fail("an undeclared write under a current resident copy (verify mode): rc %d, "
                "HG_ESTALE expected",
                rc);
    if (rc == HG_ESTALE && !x.may_stale)
        fz_fail("HG_ESTALE without an undeclared write: %s", hg_runner_errmsg(fr->r));
    if (rc != 0 && !x.einval && !x.refuse && rc != HG_ESTALE && !fault_rc)
        fz_fail("run failed: rc %d: %s", rc, hg_runner_errmsg(fr->r));
    if (rc == 0)
        residency_check_success(w, r, run, &x, out, &s);
    residency_check_host(w, rc == 0 ? "after a run" : "after a failed run");
    if (w->bug[7] && hg_runner_resident_copies(fr->r) > fr->nkeys)
        fz_fail("runner %u holds %u resident copies, its live buffers' extents are %u", r,
                hg_runner_resident_copies(fr->r), fr->nkeys);
    if (rc == HG_ESTALE)
        for (int i = 0; i < NBUF; i++)
            buf_declare(w, i);
    if (!repeat)
        fr->last = *run;
    fr->last_valid = true;
    fr->last_ok = rc == 0;
    /* A write during the run leaves an IN copy at the bind generation. */
    fr->last_fit = rc == 0 && s.resident_staged == 0 && !run->iw_done;
    for (int i = 0; i < NBUF; i++) {
        fr->last_changes[i] = w->buf[i].changes;
        memcpy(fr->last_bytes[i], w->buf[i].model, MAX_BUF);
    }
}

static void op_run(fz_world *w)
{
    uint32_t r = fz_below(&w->in, NRUNNER);
    fz_run run;
    if (make_run(w, r, &run))
        do_run(w, r, &run, false);
}

static void op_repeat(fz_world *w)
{
    uint32_t r = fz_below(&w->in, NRUNNER);
    bool whole = fz_u8(&w->in) & 1;
    fz_runner *fr = &w->run[r];
    if (!fr->last_valid)
        return;
    fz_run run = fr->last;
    run.iw_slot = -1;
    for (uint32_t k = 0; k < run.n; k++) {
        if (whole) /* the same args, every byte read: a stale copy shows */
            run.cut[k] = (hg_range){0, run.len[k]};
        if (run.slot[k] >= 0) { /* the buffers may have been re-registered */
            fz_buf *b = &w->buf[run.slot[k]];
            if (run.lo[k] + run.len[k] > b->size ||
                (is_written(run.args[k].dir) && !may_declare(w, run.slot[k])))
                return;
            run.args[k].tensor.host = b->hb;
        }
    }
    do_run(w, r, &run, true);
}

/* ------------------------------------------------------------ runners */

static void runner_open(fz_world *w, uint32_t r)
{
    fz_runner *fr = &w->run[r];
    if (hg_runner_open(w->dev[fr->dev], &fr->r) != 0)
        fz_fail("runner %u: cannot open", r);
    /* Budgets keep every runner's copies and retained buffer inside its
     * device together, so only injected faults fail allocations. */
    hg_runner_set_budget(fr->r, 8 << 10);
    hg_runner_set_verify(fr->r, fr->verify);
    fr->last_valid = false;
    fr->nkeys = 0;
}

static void op_runner(fz_world *w)
{
    uint32_t r = fz_below(&w->in, NRUNNER);
    uint8_t c = fz_u8(&w->in);
    fz_runner *fr = &w->run[r];
    fr->last_valid = false;
    TRACE(w, "runner %u: %s\n", r, c % 3 == 0 ? "budget" : c % 3 == 1 ? "verify toggle" : "reopen");
    if (c % 3 == 0) {
        hg_runner_set_budget(fr->r, (1 + (c >> 2) % 16) << 10);
    } else if (c % 3 == 1) {
        fr->verify = !fr->verify;
        if (!fr->verify) /* undeclared writes are caught only in verify mode */
            for (int i = 0; i < NBUF; i++)
                buf_declare(w, i);
        hg_runner_set_verify(fr->r, fr->verify);
    } else {
        hg_runner_close(fr->r);
        runner_open(w, r);
    }
}

static void world_open(fz_world *w)
{
    static const char *const specs[NDEV] = {"sim:cores=2,mem=128K", "sim:cores=1,mem=128K"};
    for (int d = 0; d < NDEV; d++) {
        char msg[256];
        if (hg_device_open(specs[d], &w->dev[d], msg, sizeof msg) != 0 ||
            hg_devbuf_malloc(w->dev[d], VIEW, &w->view[d]) != 0)
            fz_fail("device %d: %s", d, msg);
        for (int j = 0; j < VIEW; j++)
            w->view_model[d][j] = (unsigned char)(j * 5 + 101 * d + 1);
        hg_devbuf_copy_to(w->dev[d], w->view[d], w->view_model[d], VIEW);
    }
    for (uint32_t r = 0; r < NRUNNER; r++) {
        w->run[r].dev = r < 2 ? 0 : 1;
        runner_open(w, r);
    }
    for (int i = 0; i < NBUF; i++) {
        size_t size = 1 + (size_t)fz_u8(&w->in) * 2 % MAX_BUF;
        if (i >= 2) {
            w->buf[i].mem = malloc(MAX_BUF);
            for (size_t j = 0; j < MAX_BUF; j++)
                w->buf[i].mem[j] = (unsigned char)(j * 3 + (size_t)i);
        }
        buf_open(w, i, size, i >= 2, (unsigned char)(i == 0 ? 0 : 16 * i + 1));
    }
}

static void world_close(fz_world *w)
{
    for (int r = 0; r < NRUNNER; r++)
        hg_runner_close(w->run[r].r);
    for (int i = 0; i < NBUF; i++) {
        hg_hostbuf_destroy(w->buf[i].hb);
        free(w->buf[i].mem);
    }
    for (int d = 0; d < NDEV; d++) {
        hg_devbuf_free(w->dev[d], w->view[d]);
        hg_device_close(w->dev[d]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_world *w = calloc(1, sizeof *w);
    if (w == NULL)
        return 0;
    w->in = (fz_in){data, size, 0};
    const char *trace = getenv("HG_FUZZ_TRACE");
    w->trace = trace != NULL && *trace != '\0' && *trace != '0';
    for (unsigned b = 1; b < 12; b++)
        w->bug[b] = fz_known(b);
    world_open(w);
    for (int op = 0; op < MAX_OPS && !fz_done(&w->in); op++) {
        uint8_t c = fz_u8(&w->in);
        switch (c % 16) {
        case 0:
        case 1:
        case 2:
            op_write(w);
            break;
        case 3:
            op_burst(w);
            break;
        case 4:
        case 5:
            op_undeclared(w);
            break;
        case 6:
            buf_declare(w, (int)fz_below(&w->in, NBUF));
            break;
        case 7:
            op_rewrap(w);
            break;
        case 8:
            op_runner(w);
            break;
        case 9:
        case 10:
            op_repeat(w);
            break;
        default:
            op_run(w);
            break;
        }
    }
    world_close(w);
    free(w);
    return 0;
}
