/*
 * intern.c: the string set of intern.h.
 *
 * Open addressing with linear probing over a power-of-two array of (hash,
 * string) slots, kept at most half full, so an expected lookup probes O(1)
 * slots and compares a string only when its 64-bit hash matches.  Strings
 * are never removed one by one: the set only grows until intern_free, which
 * is what its users need (a graph's kernel names, a trace's span names, for
 * as long as the graph or the trace lives).
 */
#include "base/intern.h"

#include <stdlib.h>
#include <string.h>

void intern_init(intern_table *t)
{
    memset(t, 0, sizeof *t);
}

void intern_free(intern_table *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].str);
    free(t->slots);
    intern_init(t);
}

size_t intern_count(const intern_table *t)
{
    return t->count;
}

uint64_t intern_bytes(const intern_table *t)
{
    return (uint64_t)t->cap * sizeof *t->slots + t->str_bytes;
}

/* FNV-1a, 64-bit: names are short, so a simple byte hash is enough; its
 * length comes back in *len for the copy. */
static uint64_t intern_hash(const char *s, size_t *len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)s;
    for (; *p != '\0'; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    *len = (size_t)(p - (const unsigned char *)s);
    return h;
}

/* The slot holding s, or the empty slot where it would go.  cap > 0. */
static intern_slot *intern_probe(intern_slot *slots, size_t cap, uint64_t hash, const char *s)
{
    size_t i = (size_t)hash & (cap - 1);
    while (slots[i].str != NULL && (slots[i].hash != hash || strcmp(slots[i].str, s) != 0))
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

/* Doubles the slot array (16 to start), moving every string over. */
static int intern_grow(intern_table *t)
{
    size_t cap = t->cap ? t->cap * 2 : 16;
    if (cap > SIZE_MAX / sizeof(intern_slot))
        return -1;
    intern_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].str != NULL)
            *intern_probe(slots, cap, t->slots[i].hash, t->slots[i].str) = t->slots[i];
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

const char *intern_get(intern_table *t, const char *s)
{
    if (s == NULL)
        return NULL;
    const size_t r = ((uintptr_t)s >> 4) & (INTERN_RECENT - 1);
    if (s == t->recent[r].src && strcmp(s, t->recent[r].str) == 0)
        return t->recent[r].str;
    size_t len;
    const uint64_t hash = intern_hash(s, &len);
    if (t->cap > 0) {
        intern_slot *hit = intern_probe(t->slots, t->cap, hash, s);
        if (hit->str != NULL) {
            t->recent[r].src = s;
            return t->recent[r].str = hit->str;
        }
    }
    if ((t->count + 1) * 2 > t->cap && intern_grow(t) != 0)
        return NULL;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, s, len + 1);
    intern_slot *slot = intern_probe(t->slots, t->cap, hash, s);
    *slot = (intern_slot){.hash = hash, .str = copy};
    t->count++;
    t->str_bytes += len + 1;
    t->recent[r].src = s;
    return t->recent[r].str = copy;
}
