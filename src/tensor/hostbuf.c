/*
 * hostbuf.c: host buffers, the host memory tensors view.
 *
 * Invariants: an id is never reused in the process (a global atomic counter:
 * identity, not run state); the generation only grows, by one per write step
 * made through the API (a write, a mark, a run's copy-back), and the last
 * written range is kept beside it.  Residency keys freshness on (id,
 * generation) sampled at bind, never on address + size; so two live buffers
 * never share a byte (each registers its memory in hostreg.h's registry).
 *
 * The write log: a ring of the last HG_HOSTBUF_LOG ranges, each with the
 * generation its step produced (one step may log several ranges).  When an
 * entry of generation G is overwritten, the log is complete only for
 * generations after G (`complete_after`): asking for the writes since an
 * older generation answers "unknown", and the caller takes the whole extent.
 * The ring is allocated at the first write; if that allocation fails the log
 * is simply incomplete (never wrong).  Cost: a write is O(1); a query is
 * O(log size + answer log answer).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "hostgraph.h"
#include "tensor/checked.h"
#include "tensor/hostreg.h"
#include "tensor/tensor.h"

typedef struct log_entry {
    uint64_t generation; /* the step that wrote it */
    size_t lo, hi;
} log_entry;

struct hg_hostbuf {
    uint64_t id;
    uint64_t generation;
    size_t size;
    void *data;
    bool owned;
    size_t last_lo, last_hi;
    log_entry *log; /* ring of HG_HOSTBUF_LOG; NULL until the first write */
    uint32_t log_head, log_count;
    uint64_t complete_after; /* the log holds every write after this generation */
    hostbuf_watch *watches;  /* resident copies of it, under hostbuf_watch_lock */
};

/* Watches of every buffer: identity of copies across runners, not run
 * state.  A plain mutex, taken when a copy is added, evicted or dropped and
 * when a buffer is destroyed: never per task, once per run at most. */
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;

void hostbuf_watch_lock(void)
{
    pthread_mutex_lock(&watch_lock);
}

void hostbuf_watch_unlock(void)
{
    pthread_mutex_unlock(&watch_lock);
}

void hostbuf_watch_add(hg_hostbuf *hb, hostbuf_watch *w)
{
    w->prev = NULL;
    w->next = hb->watches;
    if (hb->watches != NULL)
        hb->watches->prev = w;
    hb->watches = w;
}

void hostbuf_watch_remove(hg_hostbuf *hb, hostbuf_watch *w)
{
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        hb->watches = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

static atomic_uint_fast64_t hostbuf_next_id = 1;

/* HG_EINVAL for memory that overlaps a live buffer, naming both. */
static int overlap_error(const char *call, bool created, hostreg_entry mine, hostreg_entry clash)
{
    unsigned long long id = (unsigned long long)clash.id;
    const char *lead = created ? "the memory allocated at" : "memory";
    char hint[160];
    if (created)
        snprintf(hint, sizeof hint, "was that memory freed while host buffer %llu wrapped it?", id);
    else
        snprintf(hint, sizeof hint,
                 "take a view of host buffer %llu (hg_tensor_host, hg_tensor_slice) instead", id);
    return err_last_set(HG_EINVAL,
                        "%s: %s [%p, %p) overlaps live host buffer %llu [%p, %p): two live "
                        "host buffers never overlap; %s",
                        call, lead, (void *)mine.lo, (void *)mine.hi, id, (void *)clash.lo,
                        (void *)clash.hi, hint);
}

/* Gives the buffer its id and registers its memory (hostreg.h: two live
 * buffers never overlap); `call` names the API call in the message. */
static int hostbuf_new(void *data, size_t bytes, bool owned, const char *call, hg_hostbuf **out)
{
    hg_hostbuf *hb = calloc(1, sizeof *hb);
    if (hb == NULL)
        return err_last_set(HG_ENOMEM, "%s: no host memory for the buffer's record", call);
    hb->id = (uint64_t)atomic_fetch_add(&hostbuf_next_id, 1);
    hb->generation = 1;
    hb->size = bytes;
    hb->data = data;
    hb->owned = owned;
    hostreg_entry clash, mine = hostreg_span(data, bytes, hb->id);
    int rc = hostreg_add(mine, &clash);
    if (rc != 0) {
        free(hb);
        if (rc == HG_ENOMEM)
            return err_last_set(rc, "%s: no host memory to register the buffer", call);
        return overlap_error(call, owned, mine, clash);
    }
    err_last_clear();
    *out = hb;
    return 0;
}

int hg_hostbuf_create(size_t bytes, hg_hostbuf **out)
{
    if (out == NULL)
        return err_last_set(HG_EINVAL, "hg_hostbuf_create: out is NULL");
    /* calloc(0) may return NULL; keep a real pointer so data is never NULL. */
    void *data = calloc(bytes ? bytes : 1, 1);
    if (data == NULL)
        return err_last_set(HG_ENOMEM, "hg_hostbuf_create: cannot allocate bytes = %zu", bytes);
    int rc = hostbuf_new(data, bytes, true, "hg_hostbuf_create", out);
    if (rc != 0)
        free(data);
    return rc;
}

int hg_hostbuf_wrap(void *data, size_t bytes, hg_hostbuf **out)
{
    if (out == NULL)
        return err_last_set(HG_EINVAL, "hg_hostbuf_wrap: out is NULL");
    if (data == NULL && bytes != 0)
        return err_last_set(HG_EINVAL, "hg_hostbuf_wrap: data is NULL with bytes = %zu", bytes);
    return hostbuf_new(data, bytes, false, "hg_hostbuf_wrap", out);
}

void hg_hostbuf_destroy(hg_hostbuf *hb)
{
    if (hb == NULL)
        return;
    hostbuf_watch_lock(); /* its resident copies, in every runner: freed now */
    while (hb->watches != NULL) {
        hostbuf_watch *w = hb->watches;
        hostbuf_watch_remove(hb, w);
        w->destroyed(w);
    }
    hostbuf_watch_unlock();
    hostreg_remove(hostreg_span(hb->data, hb->size, hb->id));
    if (hb->owned)
        free(hb->data);
    free(hb->log);
    free(hb);
}

uint64_t hg_hostbuf_id(const hg_hostbuf *hb)
{
    return hb ? hb->id : 0;
}

uint64_t hg_hostbuf_generation(const hg_hostbuf *hb)
{
    return hb ? hb->generation : 0;
}

size_t hg_hostbuf_size(const hg_hostbuf *hb)
{
    return hb ? hb->size : 0;
}

void *hg_hostbuf_data(const hg_hostbuf *hb)
{
    return hb ? hb->data : NULL;
}

/* Appends one range of step `generation` to the ring. */
static void log_push(hg_hostbuf *hb, size_t lo, size_t hi)
{
    if (hb->log == NULL && (hb->log = malloc(HG_HOSTBUF_LOG * sizeof *hb->log)) == NULL) {
        hb->complete_after = hb->generation; /* nothing before now is known */
        return;
    }
    uint32_t slot = (hb->log_head + hb->log_count) % HG_HOSTBUF_LOG;
    if (hb->log_count == HG_HOSTBUF_LOG) {
        hb->complete_after = hb->log[hb->log_head].generation; /* that step is lost */
        hb->log_head = (hb->log_head + 1) % HG_HOSTBUF_LOG;
    } else {
        hb->log_count++;
    }
    hb->log[slot] = (log_entry){hb->generation, lo, hi};
}

int hostbuf_mark_ranges(hg_hostbuf *hb, const hg_range *ranges, size_t n)
{
    if (hb == NULL || (ranges == NULL && n != 0))
        return HG_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (ranges[i].lo > ranges[i].hi || ranges[i].hi > hb->size)
            return HG_ERANGE;
    hb->generation++;
    for (size_t i = 0; i < n; i++)
        log_push(hb, ranges[i].lo, ranges[i].hi);
    if (n > 0) { /* the step's whole span: its ranges come in any order */
        hb->last_lo = ranges[0].lo;
        hb->last_hi = ranges[0].hi;
        for (size_t i = 1; i < n; i++) {
            hb->last_lo = ranges[i].lo < hb->last_lo ? ranges[i].lo : hb->last_lo;
            hb->last_hi = ranges[i].hi > hb->last_hi ? ranges[i].hi : hb->last_hi;
        }
    }
    return 0;
}

int hg_hostbuf_mark_written(hg_hostbuf *hb, size_t offset, size_t bytes)
{
    size_t end;
    if (hb == NULL)
        return HG_EINVAL;
    if (!ck_add(offset, bytes, &end) || end > hb->size)
        return HG_ERANGE;
    hg_range r = {offset, end};
    return hostbuf_mark_ranges(hb, &r, 1);
}

static int range_cmp(const void *a, const void *b)
{
    const hg_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

size_t ranges_merge(hg_range *r, size_t n)
{
    if (n == 0)
        return 0;
    qsort(r, n, sizeof *r, range_cmp);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (r[i].lo <= r[k].hi) {
            if (r[i].hi > r[k].hi)
                r[k].hi = r[i].hi;
        } else {
            r[++k] = r[i];
        }
    }
    return k + 1;
}

size_t hostbuf_written_since(const hg_hostbuf *hb, uint64_t since, size_t lo, size_t hi,
                             hg_range *out, size_t max)
{
    if (since < hb->complete_after)
        return SIZE_MAX; /* the log no longer reaches back */
    size_t n = 0;
    for (uint32_t i = 0; i < hb->log_count; i++) {
        const log_entry *e = &hb->log[(hb->log_head + i) % HG_HOSTBUF_LOG];
        size_t a = e->lo > lo ? e->lo : lo, b = e->hi < hi ? e->hi : hi;
        if (e->generation <= since || a >= b)
            continue;
        if (n == max)
            return SIZE_MAX;
        out[n++] = (hg_range){a, b};
    }
    return ranges_merge(out, n);
}

int hg_hostbuf_write(hg_hostbuf *hb, size_t offset, const void *src, size_t bytes)
{
    size_t end;
    if (hb == NULL || (src == NULL && bytes != 0))
        return HG_EINVAL;
    if (!ck_add(offset, bytes, &end) || end > hb->size)
        return HG_ERANGE;
    if (bytes != 0)
        memmove((char *)hb->data + offset, src, bytes);
    return hg_hostbuf_mark_written(hb, offset, bytes);
}

void hg_hostbuf_last_write(const hg_hostbuf *hb, size_t *lo, size_t *hi)
{
    if (lo)
        *lo = hb ? hb->last_lo : 0;
    if (hi)
        *hi = hb ? hb->last_hi : 0;
}
