/*
 * intern.h: a set of strings owned by the set, one copy per distinct string.
 *
 * The runtime copies the names users hand it (kernel names) instead of
 * keeping their pointers: the graph interns each task's kernel name at
 * submit, and a trace interns every name it records.  Interning keeps one
 * copy per distinct name, so a million tasks of one kernel store its name
 * once, and a lookup of a name already held allocates nothing.
 *
 * Cost: O(len) expected per lookup (one strcmp when the same pointer is
 * passed twice in a row; else one hash of the string, then expected O(1) probes: open addressing,
 * at most half full); memory O(distinct strings).  Not locked: its owner serialises access.
 */
#ifndef HG_BASE_INTERN_H
#define HG_BASE_INTERN_H

#include <stddef.h>
#include <stdint.h>

typedef struct intern_slot {
    uint64_t hash;
    char *str; /* NULL: empty */
} intern_slot;

typedef struct intern_table {
    intern_slot *slots; /* capacity: a power of two, or 0 */
    size_t cap, count;
    /* The last lookup: a caller passing the same pointer again (a kernel
     * record submitted task after task) pays one strcmp, not a hash.  The
     * pointer alone proves nothing (its bytes may have changed): the strcmp
     * does. */
    const char *last_src, *last;
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

#endif
