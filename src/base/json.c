/* json.c: JSON string and number output shared by reports and traces. */
#include "base/json.h"

#include <math.h>
#include <stdlib.h>

void json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* The fewest significant digits (15..17) that read back as exactly v. */
static int json_shortest_digits(double v)
{
    char buf[40];
    for (int digits = 15; digits < 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return digits;
    }
    return 17;
}

void json_write_number(FILE *f, double v)
{
    if (!isfinite(v))
        fputs("null", f);
    else if (fabs(v) < 9.0e15 && v == trunc(v)) /* range first: a cast past it is UB */
        fprintf(f, "%lld", (long long)v);
    else
        fprintf(f, "%.*g", json_shortest_digits(v), v);
}
