/*
 * spread.c: what repeated measurements say, honestly.
 *
 * A mode's later-round average is measured once per repeat; the median is
 * its value and [min, max] its spread.  A change against off counts only
 * when the spreads do not overlap: on a loaded machine two runs of the same
 * mode differ by tens of percent, and a single pair of numbers would print
 * that noise as a result.  Nothing here is tuned: no thresholds, no
 * percentages.
 */
#include <math.h>
#include <stdlib.h>

#include "scene/scene.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

scene_spread scene_spread_of(const double *values, uint32_t n)
{
    scene_spread s = {.median = NAN, .min = NAN, .max = NAN, .n = 0};
    double v[SCENE_MAX_REPEAT];
    for (uint32_t i = 0; i < n && s.n < SCENE_MAX_REPEAT; i++)
        if (!isnan(values[i]))
            v[s.n++] = values[i];
    if (s.n == 0)
        return s;
    qsort(v, s.n, sizeof v[0], cmp_double);
    s.min = v[0];
    s.max = v[s.n - 1];
    s.median = s.n % 2 ? v[s.n / 2] : (v[s.n / 2 - 1] + v[s.n / 2]) / 2;
    return s;
}

const char *scene_verdict(const scene_spread *mode, const scene_spread *off)
{
    if (mode->n == 0 || off->n == 0)
        return "n/a";
    if (mode->max < off->min)
        return "faster";
    if (mode->min > off->max)
        return "slower";
    return "within noise";
}
