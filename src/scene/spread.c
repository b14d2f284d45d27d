/*
 * spread.c: what repeated measurements say, honestly.
 *
 * A mode's later-round average is measured once per repeat; the median is
 * its value and [min, max] its spread.  A change against off counts only
 * when the spreads are apart by more than the wider of them (scene_verdict):
 * on a loaded machine two runs of the same
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

/* Apart: the spreads do not overlap, and the gap between them is wider
 * than the wider spread.  Three repeats a side of one distribution fall
 * apart in min-max 2 times in 20 (10%); with the gap rule about 0.7% (a
 * simulation of 10^5 pairs of 3 log-normal samples), so identical modes
 * keep their verdict run after run.  A 2x change is still called ~91% of
 * the time at 10% noise. */
static bool apart(double lo_max, double hi_min, const scene_spread *a, const scene_spread *b)
{
    double wa = a->max - a->min, wb = b->max - b->min;
    return lo_max < hi_min && hi_min - lo_max > (wa > wb ? wa : wb);
}

const char *scene_verdict(const scene_spread *mode, const scene_spread *off)
{
    /* One or two samples have no spread worth the name: a 1% gap between
     * two single runs is noise printed as a result. */
    if (mode->n < SCENE_VERDICT_MIN_REPEAT || off->n < SCENE_VERDICT_MIN_REPEAT)
        return NULL;
    if (apart(mode->max, off->min, mode, off))
        return "faster";
    if (apart(off->max, mode->min, mode, off))
        return "slower";
    return "within noise";
}
