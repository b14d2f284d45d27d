/*
 * known_bugs.h: the known-defect knob of the random tests (the fuzz targets
 * and the residency model test).
 *
 * A scenario that reaches a defect still being fixed is generated only when
 * the defect's number is listed in HG_FUZZ_KNOWN_BUGS ("1,4,6,7", or
 * "all"); KNOWN_BUGS_DEFAULT is used when the variable is unset.  So the
 * suites stay green while a fix is pending, and the full scenarios turn on
 * with one variable (or, once a fix is merged, by adding its number to the
 * default).  The numbers are the lead's list of defects:
 *    1  verify mode: an undeclared write beside a declared one approved
 *    2  a device view of one device accepted by another device's runner
 *    4  an INOUT written through the API during its run published as current
 *    6  the generation moves more than once per run for one buffer
 *    7  resident copies of destroyed host buffers never dropped
 *   10  hg_tensor_is_dense true for a view whose byte extent overflows
 *   11  two resident args over one copy (same buffer and extent) in a run:
 *       the second uploads it whole when the buffer moved on since publish
 */
#ifndef HG_KNOWN_BUGS_H
#define HG_KNOWN_BUGS_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The defects generated when HG_FUZZ_KNOWN_BUGS is unset: every one listed
 * above is fixed, so every scenario runs by default. */
#ifndef KNOWN_BUGS_DEFAULT
#define KNOWN_BUGS_DEFAULT "all"
#endif

/* True if known defect n may be generated. */
static inline bool known_bug(unsigned n)
{
    const char *s = getenv("HG_FUZZ_KNOWN_BUGS");
    if (s == NULL)
        s = KNOWN_BUGS_DEFAULT;
    if (strcmp(s, "all") == 0)
        return true;
    while (*s != '\0') {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s) {
            s++;
            continue;
        }
        if (v == n)
            return true;
        s = end;
    }
    return false;
}

#endif
