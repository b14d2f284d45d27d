/*
 * intern.h: a set of strings owned by the set, one copy per distinct string.
 *
 * The runtime copies the names users hand it (kernel names) instead of
 * keeping their pointers: the graph interns each task's kernel name at
 * submit, and a trace interns every name it records.  Interning keeps one
 * copy per distinct name, so a million tasks of one kernel store its name
 * once, and a lookup of a name already held allocates nothing.
 *
 * Cost: O(len) expected per lookup: one strcmp when a pointer passed
 * recently comes again (so a submit of a known kernel record costs a few ns,
 * bench/task_overhead); else one hash of the string and expected O(1)
 * probes (open addressing, at most half full).  Memory O(distinct strings).
 * Not locked: its owner serialises access.
 */
#ifndef HG_BASE_INTERN_H
#define HG_BASE_INTERN_H

#include <stddef.h>
#include <stdint.h>

#define INTERN_RECENT 16 /* a power of two */

typedef struct intern_slot {
    uint64_t hash;
    char *str; /* NULL: empty */
} intern_slot;

typedef struct intern_table {
    intern_slot *slots; /* capacity: a power of two, or 0 */
    size_t cap, count;
    size_t str_bytes; /* the strings' bytes, terminators included */
    /* Recent lookups by the caller's pointer (direct mapped): a caller
     * passing the same few pointers again (kernel records submitted task
     * after task) pays one strcmp, not a hash.  The pointer alone proves
     * nothing (its bytes may have changed): the strcmp does. */
    struct {
        const char *src, *str;
    } recent[INTERN_RECENT];
} intern_table;

/* An empty table (all zero is one too). */
void intern_init(intern_table *t);
/* Frees every string the table holds and the table's memory. */
void intern_free(intern_table *t);
/* The table's copy of `s`, added if no equal string is held yet.  NULL if s
 * is NULL or host memory ran out (then the table is unchanged).  The copy
 * lives until intern_free. */
const char *intern_get(intern_table *t, const char *s);
/* Distinct strings held. */
size_t intern_count(const intern_table *t);
/* Host bytes the table holds: its slots and its strings (what a caller
 * that counts its memory adds for it). */
uint64_t intern_bytes(const intern_table *t);

#endif
