/*
 * json.h: the few JSON writing helpers the reports and the trace share.
 * Output goes straight to a FILE; callers lay out objects themselves.
 */
#ifndef HG_BASE_JSON_H
#define HG_BASE_JSON_H

#include <stdio.h>

/* Writes s as a JSON string literal (quotes, escapes control characters). */
void json_write_string(FILE *f, const char *s);
/* Writes a finite double with enough digits; NaN and infinities as null. */
void json_write_number(FILE *f, double v);
#endif
