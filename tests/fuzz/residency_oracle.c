/*
 * residency_oracle.c: what fuzz_residency checks after every run (see its
 * header comment for the promises), and its trace.
 */
#include <string.h>

#include "fuzz.h"
#include "residency.h"

/* --------------------------------------------------------------- checks */

void residency_check_host(const fz_world *w, const char *when)
{
    for (int i = 0; i < NBUF; i++) {
        const fz_buf *b = &w->buf[i];
        if (memcmp(buf_data(b), b->model, b->size) != 0) {
            size_t j = 0;
            while (buf_data(b)[j] == b->model[j])
                j++;
            fz_fail("%s: buffer %d byte %zu is %u, the oracle says %u", when, i, j, buf_data(b)[j],
                    b->model[j]);
        }
        if (hg_hostbuf_generation(b->hb) != b->gen)
            fz_fail("%s: buffer %d generation %llu, the oracle says %llu", when, i,
                    (unsigned long long)hg_hostbuf_generation(b->hb), (unsigned long long)b->gen);
    }
}

static bool overlap(size_t a, size_t alen, size_t b, size_t blen)
{
    return alen && blen && a < b + blen && b < a + alen;
}

void residency_expect(const fz_world *w, uint32_t r, const fz_run *run, bool repeat, fz_expect *x)
{
    const fz_runner *fr = &w->run[r];
    memset(x, 0, sizeof *x);
    bool all_resident = true, changed = false, twice = false;
    for (uint32_t k = 0; k < run->n; k++) {
        int i = run->slot[k];
        hg_dir d = run->args[k].dir;
        if (i < 0) {
            x->refuse |= run->vdev[k] != (int)fr->dev && run->len[k] > 0;
            continue;
        }
        for (uint32_t j = k + 1; j < run->n; j++) {
            if (run->slot[j] == i && (is_written(d) || is_written(run->args[j].dir)) &&
                overlap(run->lo[k], run->len[k], run->lo[j], run->len[j]))
                x->einval = true;
            twice |= run->slot[j] == i && run->lo[j] == run->lo[k] && run->len[j] == run->len[k];
        }
        bool resident = run->args[k].residency == HG_RESIDENT && d != HG_OUT;
        all_resident &= resident || d == HG_OUT || run->len[k] == 0;
        const fz_buf *b = &w->buf[i];
        if (resident && fr->verify && b->pending &&
            overlap(b->ulo, b->uhi - b->ulo, run->lo[k], run->len[k]))
            x->may_stale = true;
        /* Bytes changed behind the API since the last run published them. */
        changed |= resident &&
                   memcmp(b->model + run->lo[k], fr->last_bytes[i] + run->lo[k], run->len[k]) != 0;
    }
    bool same = repeat && fr->last_valid && fr->last_ok && fr->last_fit && !x->einval;
    for (int i = 0; same && i < NBUF; i++)
        same = fr->last_changes[i] == w->buf[i].changes;
    x->must_stale = same && changed && fr->verify;
    /* Known defect 11: two args over one copy (same buffer and extent)
     * upload it whole when the buffer moved on since its publish. */
    x->must_zero = same && !changed && all_resident && (!twice || w->bug[11]);
}

/* The bytes each written arg's cut must hold after the run. */
void residency_outputs(const fz_world *w, uint32_t r, const fz_run *run,
                       unsigned char out[MAX_ARGS][MAX_BUF])
{
    const unsigned char *src[MAX_ARGS];
    uint32_t sum = 0;
    for (uint32_t k = 0; k < run->n; k++) {
        int i = run->slot[k];
        src[k] =
            (i >= 0 ? w->buf[i].model : w->view_model[w->run[r].dev]) + run->lo[k] + run->cut[k].lo;
        if (run->args[k].dir != HG_OUT)
            for (size_t j = 0; j < run->cut[k].hi - run->cut[k].lo; j++)
                sum += src[k][j];
    }
    for (uint32_t k = 0; k < run->n; k++) {
        if (!is_written(run->args[k].dir))
            continue;
        for (size_t j = 0; j < run->cut[k].hi - run->cut[k].lo; j++) {
            unsigned char v = (unsigned char)(sum + 31u * j + 17u * k);
            out[k][j] = run->args[k].dir == HG_INOUT ? (unsigned char)(src[k][j] + v) : v;
        }
    }
}

/* A successful run: the model moves on, then stats and copied-back ranges. */
void residency_check_success(fz_world *w, uint32_t r, const fz_run *run, const fz_expect *x,
                             unsigned char out[MAX_ARGS][MAX_BUF], const hg_run_stats *s)
{
    uint64_t d2h = 0, up_max = 0, up_min = 0;
    bool bumped[NBUF] = {false};
    for (uint32_t k = 0; k < run->n; k++) {
        int i = run->slot[k];
        size_t cut = run->cut[k].hi - run->cut[k].lo;
        hg_range got[2];
        size_t n = 0;
        int rc = hg_runner_copied_back(w->run[r].r, k, got, 2, &n);
        bool back = i >= 0 && is_written(run->args[k].dir) && cut > 0;
        size_t at = run->lo[k] + run->cut[k].lo;
        if (rc != 0 || n != (back ? 1u : 0u) ||
            (back && (got[0].lo != at || got[0].hi != at + cut)))
            fz_fail("arg %u: hg_runner_copied_back gave %zu ranges (rc %d), [%zu, %zu) expected", k,
                    n, rc, back ? at : 0, back ? at + cut : 0);
        if (i < 0)
            continue;
        if (run->args[k].dir != HG_OUT) {
            up_max += run->len[k];
            up_min += run->args[k].residency == HG_STAGED ? run->len[k] : 0;
        }
        if (back) {
            memcpy(w->buf[i].model + at, out[k], cut);
            d2h += cut;
            bumped[i] = true;
        }
    }
    for (int i = 0; i < NBUF; i++)
        if (bumped[i]) {
            w->buf[i].gen++; /* one write step per buffer per run */
            buf_changed(&w->buf[i]);
        }
    if (s->d2h_bytes != d2h)
        fz_fail("d2h %llu bytes, the tasks wrote %llu", (unsigned long long)s->d2h_bytes,
                (unsigned long long)d2h);
    if (s->h2d_bytes > up_max || s->h2d_bytes < up_min || (x->must_zero && s->h2d_bytes != 0))
        fz_fail("h2d %llu bytes, expected %s [%llu, %llu]", (unsigned long long)s->h2d_bytes,
                x->must_zero ? "0 (a repeat, nothing changed), within" : "within",
                (unsigned long long)up_min, (unsigned long long)up_max);
}

void residency_trace(const fz_world *w, uint32_t r, const fz_run *run, bool repeat,
                     const fz_expect *x, int rc, const hg_run_stats *s)
{
    if (!w->trace)
        return;
    fprintf(stderr, "%s runner %u (verify %d):", repeat ? "repeat" : "run", r, w->run[r].verify);
    for (uint32_t k = 0; k < run->n; k++)
        fprintf(stderr, " [%s %s%s%d [%zu,+%zu) cut [%zu,%zu)]",
                (const char *[]){"?", "IN", "OUT", "INOUT"}[run->args[k].dir],
                run->args[k].residency ? "resident " : "", run->slot[k] < 0 ? "view " : "buf ",
                run->slot[k] < 0 ? run->vdev[k] : run->slot[k], run->lo[k], run->len[k],
                run->cut[k].lo, run->cut[k].hi);
    if (run->iw_slot >= 0)
        fprintf(stderr, " in-run write buffer %d [%zu,+%zu)", run->iw_slot, run->iw_lo,
                run->iw_len);
    fprintf(stderr, "%s%s%s -> rc %d h2d %llu d2h %llu hits %llu\n", x->faulted ? " fault" : "",
            x->must_stale ? " must-stale" : "", x->must_zero ? " must-zero" : "", rc,
            (unsigned long long)s->h2d_bytes, (unsigned long long)s->d2h_bytes,
            (unsigned long long)s->resident_hits);
}
