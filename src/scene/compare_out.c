/*
 * compare_out.c: `hostgraph compare`'s renderings: the table and the SVG.
 *
 * The table is built as text cells first, so each column is as wide as its
 * widest value.  Its header line says how to read it: the later-round
 * average is the median over the repeats with its min-max spread, the change
 * against off is the medians', negative means faster, and a change is
 * "within noise" when the spreads overlap.  Bytes per later round are the
 * first repeat's means over rounds 2..N (they do not vary).
 */
#include <math.h>
#include <string.h>

#include "scene/compare.h"

enum { COLS = 10, CELL = 40 };

static void cell_num(char *cell, double v, const char *fmt)
{
    if (isnan(v))
        snprintf(cell, CELL, "n/a");
    else
        snprintf(cell, CELL, fmt, v);
}

static double change_pct(double v, double off)
{
    return off > 0 && !isnan(v) && !isnan(off) ? 100.0 * (v - off) / off : NAN;
}

/* One row's cells. */
static void row_cells(char cells[COLS][CELL], const mode_run *m, const mode_run *off, int mode)
{
    const scene_report *r = &m->rep;
    snprintf(cells[0], CELL, "%s", scene_residency_name((scene_residency)mode));
    cell_num(cells[1], r->setup_ms, "%.3f");
    cell_num(cells[2], r->first_ms, "%.3f");
    cell_num(cells[3], r->later.median, "%.3f");
    if (r->later.n > 0)
        snprintf(cells[4], CELL, "%.3f-%.3f", r->later.min, r->later.max);
    else
        snprintf(cells[4], CELL, "n/a");
    cell_num(cells[5], change_pct(r->later.median, off->rep.later.median), "%+.1f%%");
    cell_num(cells[6], r->overall_ms, "%.3f");
    cell_num(cells[7], m->h2d_later, "%.0f");
    cell_num(cells[8], m->d2h_later, "%.0f");
    snprintf(cells[9], CELL, "%s", r->verdict != NULL ? r->verdict : "n/a");
}

void compare_print_table(FILE *f, const scene_run_opts *o, const mode_run *m)
{
    static const char *const head[COLS] = {
        "mode",         "setup_ms",   "first_ms",      "later_ms",      "later_ms_min-max",
        "later_vs_off", "overall_ms", "h2d_per_later", "d2h_per_later", "verdict"};
    char cells[SCENE_RESIDENCY_COUNT + 1][COLS][CELL];
    int width[COLS] = {0}, nrows = 1;
    for (int c = 0; c < COLS; c++)
        snprintf(cells[0][c], CELL, "%s", head[c]);
    for (int i = 0; i < SCENE_RESIDENCY_COUNT && m[i].rep.scene != NULL; i++)
        row_cells(cells[nrows++], &m[i], &m[0], i);
    for (int r = 0; r < nrows; r++)
        for (int c = 0; c < COLS; c++)
            width[c] = (int)strlen(cells[r][c]) > width[c] ? (int)strlen(cells[r][c]) : width[c];
    fprintf(f,
            "%s: later_ms is the median of %u repeats' later-round averages (rounds 2..%u),\n"
            "modes interleaved on fresh devices; later_vs_off: against off's median, negative "
            "means faster;\nwithin noise: the min-max spreads overlap or lie closer than the wider "
            "one\n",
            o->scene->name, o->repeat > 0 ? o->repeat : 1, o->rounds);
    for (int r = 0; r < nrows; r++) {
        for (int c = 0; c + 1 < COLS; c++)
            fprintf(f, "%-*s  ", width[c], cells[r][c]);
        fprintf(f, "%s\n", cells[r][COLS - 1]);
    }
    char why[256];
    compare_no_verdict(o, m, why, sizeof why);
    if (*why != '\0')
        fprintf(f, "%s\n", why);
}

/* ------------------------------------------------------------------ SVG */

enum { SVG_W = 720, SVG_H = 420, PLOT_X = 70, PLOT_Y = 40, PLOT_W = 480, PLOT_H = 320 };

static const char *const mode_colors[SCENE_RESIDENCY_COUNT] = {"#d62728", "#9467bd", "#1f77b4",
                                                               "#2ca02c"};

/* A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least v. */
static double nice_max(double v)
{
    if (!(v > 0))
        return 1;
    double p = pow(10, floor(log10(v)));
    for (int k = 0; k < 3; k++) {
        double step = (k == 0 ? 1 : k == 1 ? 2 : 5) * p;
        if (step >= v)
            return step;
    }
    return 10 * p;
}

static void svg_axes(FILE *f, uint32_t rounds, double ymax)
{
    fprintf(f,
            "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n"
            "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n",
            PLOT_X, PLOT_Y + PLOT_H, PLOT_X + PLOT_W, PLOT_Y + PLOT_H, PLOT_X, PLOT_Y, PLOT_X,
            PLOT_Y + PLOT_H);
    for (int t = 0; t <= 5; t++) { /* y ticks */
        double y = PLOT_Y + PLOT_H - PLOT_H * t / 5.0;
        fprintf(f,
                "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>\n"
                "<text x='%d' y='%.1f' text-anchor='end' font-size='11'>%g</text>\n",
                PLOT_X, y, PLOT_X + PLOT_W, y, PLOT_X - 6, y + 4, ymax * t / 5.0);
    }
    uint32_t step = rounds > 10 ? (rounds + 9) / 10 : 1;
    for (uint32_t r = 1; r <= rounds; r += step) { /* x ticks */
        double x = PLOT_X + (rounds > 1 ? PLOT_W * (r - 1) / (double)(rounds - 1) : PLOT_W / 2.0);
        fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle' font-size='11'>%u</text>\n", x,
                PLOT_Y + PLOT_H + 16, r);
    }
    fprintf(f,
            "<text x='%d' y='%d' text-anchor='middle' font-size='13'>round</text>\n"
            "<text x='18' y='%d' text-anchor='middle' font-size='13' "
            "transform='rotate(-90 18 %d)'>wall time per round (ms)</text>\n",
            PLOT_X + PLOT_W / 2, PLOT_Y + PLOT_H + 36, PLOT_Y + PLOT_H / 2, PLOT_Y + PLOT_H / 2);
}

static void svg_series(FILE *f, const mode_run *m, int mode, uint32_t rounds, double ymax)
{
    fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", mode_colors[mode]);
    for (uint32_t i = 0; i < m->rep.nrounds; i++) {
        double x = PLOT_X + (rounds > 1 ? PLOT_W * i / (double)(rounds - 1) : PLOT_W / 2.0);
        double y = PLOT_Y + PLOT_H - PLOT_H * ((double)m->rounds[i].stats.wall_ns / 1e6) / ymax;
        fprintf(f, "%s%.1f,%.1f", i ? " " : "", x, y);
    }
    fputs("'/>\n", f);
    int ly = PLOT_Y + 20 + 22 * mode; /* legend */
    fprintf(f,
            "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='%s' stroke-width='3'/>\n"
            "<text x='%d' y='%d' font-size='13'>%s</text>\n",
            PLOT_X + PLOT_W + 20, ly, PLOT_X + PLOT_W + 44, ly, mode_colors[mode],
            PLOT_X + PLOT_W + 50, ly + 4, scene_residency_name((scene_residency)mode));
}

void compare_write_svg(FILE *f, const scene_run_opts *o, const mode_run *m)
{
    double top = 0;
    for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++)
        for (uint32_t r = 0; r < m[i].rep.nrounds; r++)
            top = fmax(top, (double)m[i].rounds[r].stats.wall_ns / 1e6);
    const double ymax = nice_max(top);
    fprintf(f,
            "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
            "font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n"
            "<text x='%d' y='22' font-size='15'>%s: wall time per round by residency "
            "mode</text>\n",
            SVG_W, SVG_H, PLOT_X, o->scene->name);
    svg_axes(f, o->rounds, ymax);
    for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++)
        svg_series(f, &m[i], i, o->rounds, ymax);
    fputs("</svg>\n", f);
}
