/*
 * verify.c: verify mode's check that no byte of a resident arg changed on
 * the host without a declared write (bind.c calls it; the contract is in
 * hostgraph.h at hg_runner_set_verify).
 *
 * Each resident copy published in verify mode keeps
 *   - a shadow: a host copy of its extent as last made equal to the device
 *     (the bytes uploaded, then those copy-back fetched), and
 *   - the XXH3 of every VERIFY_BLOCK bytes of that shadow.
 * At bind, with the ranges declared since publish known from the write log:
 *   - a block no declared range touches is hashed on the host and compared
 *     with its recorded hash (one read of the host bytes, the cost of the
 *     old whole-extent hash);
 *   - a block a declared range touches cannot be judged by its hash (the
 *     declared bytes changed it): its other bytes are compared with the
 *     shadow, so an undeclared write beside a declared one, in the same
 *     block, is still caught.
 * A mismatch is located to the byte against the shadow and fails the run.
 * Then the uploaded ranges are copied into the shadow and their blocks
 * rehashed; after copy-back an INOUT's fetched ranges likewise, from
 * staging (the device's bytes: a fetched byte no task wrote is not
 * committed, so a host byte changed there behind the API still differs).
 *
 * Cost per run: the extent hashed once (IN and INOUT), plus the declared
 * blocks' other bytes compared, plus the bytes uploaded or copied back
 * copied and rehashed.  Memory: the shadow (the extent's bytes) and 8 bytes
 * per block, per resident copy, only in verify mode.  `verified_bytes`
 * counts the host and staging bytes read: hashed, compared, copied.
 */
#include <stdlib.h>
#include <string.h>

#include "stage/stage.h"
#include "tensor/tensor.h"

/* Small enough that a declared write makes only its own neighbourhood be
 * compared byte for byte; large enough that the hashes are 1/8192 of the
 * extent and XXH3 runs at its streaming speed. */
#define VERIFY_BLOCK (64u << 10)

static const unsigned char *host_at(const stage_arg *sa, size_t offset)
{
    return (const unsigned char *)hg_hostbuf_data(sa->tensor.host) + offset;
}

static size_t nblocks(const stage_arg *sa)
{
    return (sa->hi - sa->lo + VERIFY_BLOCK - 1) / VERIFY_BLOCK;
}

/* Block b's buffer range [*lo, *hi). */
static void block_range(const stage_arg *sa, size_t b, size_t *lo, size_t *hi)
{
    *lo = sa->lo + b * VERIFY_BLOCK;
    *hi = sa->hi - *lo > VERIFY_BLOCK ? *lo + VERIFY_BLOCK : sa->hi;
}

/* The first byte of [lo, hi) where host and shadow differ, or SIZE_MAX. */
static size_t first_difference(const stage_arg *sa, const resident_copy *r, size_t lo, size_t hi)
{
    if (memcmp(host_at(sa, lo), r->shadow + (lo - sa->lo), hi - lo) == 0)
        return SIZE_MAX;
    while (*host_at(sa, lo) == r->shadow[lo - sa->lo])
        lo++;
    return lo;
}

/* Block b against the declared ranges d[*k..n) (sorted; *k advances past
 * those that end in it): the first undeclared byte that changed, or
 * SIZE_MAX. */
static size_t check_block(stage_plan *p, const stage_arg *sa, const resident_copy *r, size_t b,
                          const hg_range *d, size_t n, size_t *k)
{
    size_t lo, hi;
    block_range(sa, b, &lo, &hi);
    while (*k < n && d[*k].hi <= lo)
        (*k)++;
    if (*k == n || d[*k].lo >= hi) { /* no declared byte: the hash judges */
        p->rstats.verified_bytes += hi - lo;
        if (residency_hash(host_at(sa, lo), hi - lo) == r->block_hash[b])
            return SIZE_MAX;
        return first_difference(sa, r, lo, hi);
    }
    size_t at = lo, bad = SIZE_MAX; /* the gaps between declared ranges */
    for (size_t j = *k; j < n && d[j].lo < hi && bad == SIZE_MAX; j++) {
        if (at < d[j].lo) {
            p->rstats.verified_bytes += d[j].lo - at;
            bad = first_difference(sa, r, at, d[j].lo);
        }
        at = d[j].hi > at ? d[j].hi : at;
    }
    if (bad == SIZE_MAX && at < hi) {
        p->rstats.verified_bytes += hi - at;
        bad = first_difference(sa, r, at, hi);
    }
    return bad;
}

int verify_check(stage_plan *p, const stage_arg *sa, const resident_copy *r,
                 const hg_range *declared, size_t n, hg_err *e)
{
    size_t bad = SIZE_MAX, k = 0;
    for (size_t b = 0; b < nblocks(sa) && bad == SIZE_MAX; b++)
        bad = check_block(p, sa, r, b, declared, n, &k);
    if (bad == SIZE_MAX)
        return 0;
    return err_set(e, HG_ESTALE,
                   "arg '%s': host buffer %llu changed at byte %zu without a write through the "
                   "API since generation %llu (verify mode): its resident copy is stale",
                   sa->name, (unsigned long long)hg_hostbuf_id(sa->tensor.host), bad,
                   (unsigned long long)r->generation);
}

/* Copies [lo, hi) of the extent from src into the shadow and rehashes the
 * blocks it touches (*last: the last block rehashed, so sorted ranges
 * sharing a block hash it once). */
static void shadow_put(stage_plan *p, const stage_arg *sa, resident_copy *r, size_t lo, size_t hi,
                       const unsigned char *src, size_t *last)
{
    if (lo == hi)
        return;
    memcpy(r->shadow + (lo - sa->lo), src, hi - lo);
    p->rstats.verified_bytes += hi - lo;
    for (size_t b = (lo - sa->lo) / VERIFY_BLOCK; b <= (hi - 1 - sa->lo) / VERIFY_BLOCK; b++) {
        if (*last != SIZE_MAX && b <= *last)
            continue;
        size_t blo, bhi;
        block_range(sa, b, &blo, &bhi);
        r->block_hash[b] = residency_hash(r->shadow + (blo - sa->lo), bhi - blo);
        *last = b;
    }
}

int verify_take(stage_plan *p, const stage_arg *sa, resident_copy *r, hg_err *e)
{
    if (r->shadow == NULL) {
        r->shadow = malloc(sa->hi - sa->lo);
        r->block_hash = malloc(nblocks(sa) * sizeof *r->block_hash);
        if (r->shadow == NULL || r->block_hash == NULL) {
            free(r->shadow);
            free(r->block_hash);
            r->shadow = NULL;
            r->block_hash = NULL;
            return err_set(e, HG_ENOMEM, "arg '%s': cannot allocate the %zu-byte verify shadow",
                           sa->name, sa->hi - sa->lo);
        }
    }
    size_t n = sa->up_whole ? 1 : sa->up_n, last = SIZE_MAX;
    for (size_t k = 0; k < n; k++) {
        size_t lo = sa->up_whole ? sa->lo : p->spans[sa->up_first + k].lo;
        size_t hi = sa->up_whole ? sa->hi : p->spans[sa->up_first + k].hi;
        shadow_put(p, sa, r, lo, hi, host_at(sa, lo), &last);
    }
    return 0;
}

void verify_copied_back(stage_plan *p, const stage_arg *sa, resident_copy *r)
{
    size_t last = SIZE_MAX;
    for (uint32_t k = sa->back_first; k < sa->back_first + sa->back_n; k++) {
        const hg_range *s = &p->spans[k];
        shadow_put(p, sa, r, s->lo, s->hi, p->staging + p->span_staging[k], &last);
    }
}
