/*
 * compare.c: `hostgraph compare`, every residency mode of one scene side by
 * side in one process.
 *
 * One unreported warm-up round comes first, so the process's first-time
 * costs do not all land on the first mode.
 * The case is made once (its host buffers and goldens are the same for every
 * mode; each round restores its outputs anyway).  Each mode then gets a fresh
 * device of the same spec, so no mode inherits another's touched device
 * pages, and runs its rounds on its own runner.  A mode's overall counts its
 * setup (pin's upload) and its rounds, not the shared case making.  The table
 * compares each mode with off; bytes per later round are means over rounds
 * 2..N.  The SVG draws each mode's wall time per round.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/json.h"
#include "scene/report.h"
#include "scene/scene.h"

typedef struct mode_run {
    scene_report rep;
    char device[256]; /* rep.device points here: the mode's device is closed */
    scene_round *rounds;
    int rc;
    double h2d_later, d2h_later; /* mean bytes per later round; NAN with one round */
} mode_run;

static void later_bytes(mode_run *m)
{
    double h = 0, d = 0;
    for (uint32_t i = 1; i < m->rep.nrounds; i++) {
        h += (double)m->rounds[i].stats.h2d_bytes;
        d += (double)m->rounds[i].stats.d2h_bytes;
    }
    uint32_t n = m->rep.nrounds > 1 ? m->rep.nrounds - 1 : 0;
    m->h2d_later = n ? h / n : NAN;
    m->d2h_later = n ? d / n : NAN;
}

/* One mode on a fresh device; SCENE_EXIT_* in m->rc. */
static void run_mode(const scene_run_opts *base, scene_case *c, scene_residency mode, mode_run *m)
{
    scene_run_opts o = *base;
    o.residency = mode;
    o.quiet = true;
    o.json_path = o.trace_path = NULL;
    memset(&m->rep, 0, sizeof m->rep);
    m->rc = SCENE_EXIT_RUNTIME;
    hg_device *dev = NULL;
    char msg[256] = "";
    if (hg_device_open(o.device_spec ? o.device_spec : "sim", &dev, msg, sizeof msg) != 0) {
        fprintf(o.err, "hostgraph: %s\n", msg);
        return;
    }
    const uint64_t start = clock_now_ns();
    m->rc = scene_run_rounds(&o, dev, c, NULL, m->rounds, &m->rep);
    m->rep.params = base->params; /* o is this function's: it is gone by the report */
    m->rep.overall_ms = (double)(clock_now_ns() - start) / 1e6;
    snprintf(m->device, sizeof m->device, "%s", hg_device_spec(dev));
    m->rep.device = m->device;
    hg_device_close(dev);
    later_bytes(m);
}

static void print_value(FILE *f, double v, const char *fmt)
{
    if (isnan(v))
        fprintf(f, "%-12s", "n/a");
    else
        fprintf(f, fmt, v);
}

/* "+12.3%" (or "n/a") left-aligned in `width` columns. */
static void print_pct(FILE *f, double v, int width)
{
    char text[32] = "n/a";
    if (!isnan(v))
        snprintf(text, sizeof text, "%+.1f%%", v);
    fprintf(f, "%-*s", width, text);
}

static double change_pct(double v, double off)
{
    return off > 0 && !isnan(v) && !isnan(off) ? 100.0 * (v - off) / off : NAN;
}

static void print_table(FILE *f, const mode_run *m)
{
    fprintf(f, "mode  setup_ms  first_ms    later_avg_ms  overall_ms  later_vs_off  "
               "overall_vs_off  h2d_per_later  d2h_per_later\n");
    for (int i = 0; i < SCENE_RESIDENCY_COUNT && m[i].rep.scene != NULL; i++) {
        const scene_report *r = &m[i].rep;
        fprintf(f, "%-4s  %-8.3f  %-10.3f  ", scene_residency_name((scene_residency)i), r->setup_ms,
                r->first_ms);
        print_value(f, r->later_avg_ms, "%-12.3f");
        fprintf(f, "  %-10.3f  ", r->overall_ms);
        print_pct(f, change_pct(r->later_avg_ms, m[0].rep.later_avg_ms), 12);
        fputs("  ", f);
        print_pct(f, change_pct(r->overall_ms, m[0].rep.overall_ms), 14);
        fputs("  ", f);
        print_value(f, m[i].h2d_later, "%-13.0f");
        fputs("  ", f);
        print_value(f, m[i].d2h_later, "%.0f");
        fputc('\n', f);
    }
}

static void write_json(FILE *f, const scene_run_opts *o, const mode_run *m, const char *device,
                       bool interrupted)
{
    fputs("{\n  \"scene\": ", f);
    json_write_string(f, o->scene->name);
    fputs(",\n  \"device\": ", f);
    json_write_string(f, device);
    fputs(",\n  \"params\": ", f);
    scene_report_write_params(f, o->scene, o->params);
    fprintf(f, ",\n  \"interrupted\": %s", interrupted ? "true" : "false");
    fputs(",\n  \"modes\": {", f);
    for (int i = 0; i < SCENE_RESIDENCY_COUNT && m[i].rep.scene != NULL; i++) {
        fprintf(f, "%s\n    ", i ? "," : "");
        json_write_string(f, scene_residency_name((scene_residency)i));
        fputs(": ", f);
        scene_report_write_object(f, &m[i].rep, 4);
    }
    fputs("\n  }\n}\n", f);
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

static void write_svg(FILE *f, const scene_run_opts *o, const mode_run *m)
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

/* ----------------------------------------------------------------- compare */

/* The table and the files, of the modes run (all but when interrupted). */
static int finish(const scene_run_opts *o, const char *svg_path, const mode_run *m,
                  scene_outputs *outs, bool interrupted)
{
    int rc = interrupted ? SCENE_EXIT_INTERRUPTED : SCENE_EXIT_OK;
    for (int i = 0; i < SCENE_RESIDENCY_COUNT && !interrupted; i++)
        if (m[i].rc == SCENE_EXIT_GOLDEN)
            rc = SCENE_EXIT_GOLDEN;
    print_table(o->out, m);
    if (outs->json.f != NULL) {
        const char *device = m[0].rep.device  ? m[0].rep.device
                             : o->device_spec ? o->device_spec
                                              : "sim";
        write_json(outs->json.f, o, m, device, interrupted);
        if (scene_output_commit(&outs->json, o->err, "--json", o->json_path) != 0)
            rc = SCENE_EXIT_RUNTIME;
    }
    if (outs->svg.f != NULL) {
        write_svg(outs->svg.f, o, m);
        if (scene_output_commit(&outs->svg, o->err, "--svg", svg_path) != 0)
            rc = SCENE_EXIT_RUNTIME;
    }
    return rc;
}

/* Saves the initial outputs, then runs one unreported round of `off` on a
 * fresh device: the process's own first-time costs (code and host pages,
 * the allocator's arenas) would otherwise all land on the first mode. */
static int warm_up(const scene_run_opts *o, scene_case *c, scene_snapshot *initial)
{
    if (scene_snapshot_take(initial, c) != 0) {
        fprintf(o->err, "hostgraph: out of host memory\n");
        return SCENE_EXIT_RUNTIME;
    }
    scene_run_opts one = *o;
    one.rounds = 1;
    mode_run warm = {0};
    scene_round round;
    warm.rounds = &round;
    run_mode(&one, c, SCENE_RESIDENCY_OFF, &warm);
    return warm.rc == SCENE_EXIT_RUNTIME ? SCENE_EXIT_RUNTIME : SCENE_EXIT_OK;
}

int scene_compare(const scene_run_opts *o, const char *svg_path)
{
    scene_case *c = NULL;
    hg_err err;
    err_clear(&err);
    scene_outputs outs;
    int rc = scene_outputs_open(&outs, o->err, o->json_path, NULL, svg_path);
    if (rc != 0)
        return rc;
    /* A bad device spec is a usage error before the case is made. */
    hg_device *probe = NULL;
    char msg[256] = "";
    rc = hg_device_open(o->device_spec ? o->device_spec : "sim", &probe, msg, sizeof msg);
    if (rc != 0) {
        fprintf(o->err, "hostgraph: %s\n", *msg ? msg : hg_strerror(rc));
        scene_outputs_abort(&outs);
        return rc == HG_EINVAL ? SCENE_EXIT_USAGE : SCENE_EXIT_RUNTIME;
    }
    hg_device_close(probe);
    rc = scene_case_make(o->scene, o->params, &c, &err);
    if (rc != 0) {
        fprintf(o->err, "hostgraph: scene '%s': %s\n", o->scene->name,
                *err.msg ? err.msg : hg_strerror(rc));
        scene_outputs_abort(&outs);
        return SCENE_EXIT_RUNTIME;
    }
    mode_run m[SCENE_RESIDENCY_COUNT];
    memset(m, 0, sizeof m);
    scene_snapshot initial;
    rc = warm_up(o, c, &initial);
    for (int i = 0; i < SCENE_RESIDENCY_COUNT && rc == SCENE_EXIT_OK; i++) {
        m[i].rounds = calloc(o->rounds, sizeof *m[i].rounds);
        if (m[i].rounds == NULL) {
            fprintf(o->err, "hostgraph: out of host memory\n");
            rc = SCENE_EXIT_RUNTIME;
            break;
        }
        if (scene_cancel_requested(o->cancel)) {
            rc = SCENE_EXIT_INTERRUPTED;
            break;
        }
        scene_snapshot_restore(&initial, c);
        run_mode(o, c, (scene_residency)i, &m[i]);
        if (m[i].rc == SCENE_EXIT_RUNTIME || m[i].rc == SCENE_EXIT_INTERRUPTED)
            rc = m[i].rc; /* a runtime error's line is out already */
    }
    if (rc == SCENE_EXIT_OK || rc == SCENE_EXIT_INTERRUPTED) {
        rc = finish(o, svg_path, m, &outs, rc == SCENE_EXIT_INTERRUPTED);
    } else if (outs.json.f != NULL && m[0].rep.scene != NULL) {
        /* The modes run so far, the failed one with its "error". */
        write_json(outs.json.f, o, m, m[0].rep.device, false);
        scene_output_commit(&outs.json, o->err, "--json", o->json_path);
    }
    scene_outputs_abort(&outs);
    scene_snapshot_free(&initial);
    for (int i = 0; i < SCENE_RESIDENCY_COUNT; i++)
        free(m[i].rounds);
    scene_case_destroy(c);
    return rc;
}
