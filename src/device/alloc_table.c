/*
 * alloc_table.c: the sorted allocation table of a device backend
 * (alloc_table.h states its invariants and costs).
 */
#include "device/alloc_table.h"

#include "device/backend.h"

#include <stdlib.h>
#include <string.h>

void alloc_table_init(alloc_table *t, hg_devaddr base, uint64_t bytes)
{
    *t = (alloc_table){.base = base, .bytes = bytes};
}

void alloc_table_free(alloc_table *t)
{
    free(t->entries);
    t->entries = NULL;
    t->n = t->cap = 0;
}

uint64_t alloc_table_align(uint64_t bytes)
{
    return (bytes + HG_DEVICE_ALIGN - 1) & ~(uint64_t)(HG_DEVICE_ALIGN - 1);
}

/* Index of the last entry with addr <= a, or -1. */
static long alloc_table_index(const alloc_table *t, hg_devaddr a)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->entries[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

const alloc_entry *alloc_table_lookup(const alloc_table *t, hg_devaddr a, size_t bytes)
{
    long i = alloc_table_index(t, a);
    if (i < 0)
        return NULL;
    const alloc_entry *e = &t->entries[i];
    uint64_t off = a - e->addr;
    if (e->pending || off > e->size || bytes > e->size - off)
        return NULL;
    return e;
}

const alloc_entry *alloc_table_containing(const alloc_table *t, hg_devaddr a)
{
    long i = alloc_table_index(t, a);
    if (i < 0 || t->entries[i].pending || a - t->entries[i].addr >= t->entries[i].size)
        return NULL;
    return &t->entries[i];
}

int alloc_table_find(const alloc_table *t, pthread_rwlock_t *lock, hg_devaddr a, hg_devaddr *base,
                     size_t *size, bool *user)
{
    int rc = HG_ENOTFOUND;
    device_rwlock_rdlock(lock);
    const alloc_entry *e = alloc_table_containing(t, a);
    if (e != NULL) {
        *base = e->addr;
        *size = e->size;
        *user = e->user;
        rc = 0;
    }
    device_rwlock_unlock(lock);
    return rc;
}

/* First fit: the lowest gap of `span` bytes; its address and the index to
 * insert at.  False if no gap is big enough. */
static bool alloc_table_first_fit(const alloc_table *t, uint64_t span, hg_devaddr *addr, size_t *at)
{
    uint64_t cursor = t->base;
    for (size_t i = 0; i < t->n; i++) {
        if (t->entries[i].addr - cursor >= span) {
            *addr = cursor;
            *at = i;
            return true;
        }
        cursor = t->entries[i].addr + t->entries[i].span;
    }
    if (t->base + t->bytes - cursor < span)
        return false;
    *addr = cursor;
    *at = t->n;
    return true;
}

static bool alloc_table_reserve(alloc_table *t)
{
    if (t->n < t->cap)
        return true;
    size_t cap = t->cap ? t->cap * 2 : 64;
    alloc_entry *grown = realloc(t->entries, cap * sizeof *grown);
    if (grown == NULL)
        return false;
    t->entries = grown;
    t->cap = cap;
    return true;
}

alloc_entry *alloc_table_insert(alloc_table *t, const alloc_entry *e)
{
    hg_devaddr addr;
    size_t at;
    if (!alloc_table_reserve(t) || !alloc_table_first_fit(t, e->span, &addr, &at))
        return NULL;
    memmove(&t->entries[at + 1], &t->entries[at], (t->n - at) * sizeof *t->entries);
    t->entries[at] = *e;
    t->entries[at].addr = addr;
    t->n++;
    return &t->entries[at];
}

alloc_entry *alloc_table_at(alloc_table *t, hg_devaddr a)
{
    long i = alloc_table_index(t, a);
    return i >= 0 && t->entries[i].addr == a ? &t->entries[i] : NULL;
}

bool alloc_table_remove(alloc_table *t, hg_devaddr a, alloc_entry *out)
{
    long i = alloc_table_index(t, a);
    if (i < 0 || t->entries[i].addr != a)
        return false;
    *out = t->entries[i];
    memmove(&t->entries[i], &t->entries[i + 1], (t->n - (size_t)i - 1) * sizeof *t->entries);
    t->n--;
    return true;
}

bool alloc_window_take(alloc_windows *w, uint32_t *window)
{
    bool ok = false;
    pthread_mutex_lock(&w->lock);
    for (uint32_t n = 0; n < ALLOC_WINDOWS && !ok; n++) {
        uint32_t i = (w->next + n) % ALLOC_WINDOWS;
        if (w->held[i / 64] & (1ull << (i % 64)))
            continue;
        w->held[i / 64] |= 1ull << (i % 64);
        w->next = (i + 1) % ALLOC_WINDOWS;
        *window = i;
        ok = true;
    }
    pthread_mutex_unlock(&w->lock);
    return ok;
}

void alloc_window_give(alloc_windows *w, uint32_t window)
{
    pthread_mutex_lock(&w->lock);
    w->held[window / 64] &= ~(1ull << (window % 64));
    pthread_mutex_unlock(&w->lock);
}
