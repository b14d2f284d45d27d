/*
 * compare.h: what `hostgraph compare` measured per mode, shared by the
 * driver (compare.c) and its renderings (compare_out.c: the table, the SVG).
 */
#ifndef HG_SCENE_COMPARE_H
#define HG_SCENE_COMPARE_H

#include "scene/report.h"
#include "scene/scene.h"

typedef struct mode_run {
    scene_report rep;               /* the first repeat's report, with the spread and verdict */
    char device[256];               /* rep.device points here: the mode's device is closed */
    scene_round *rounds;            /* the first repeat's rounds */
    int rc;                         /* the worst SCENE_EXIT_* over its repeats */
    double h2d_later, d2h_later;    /* mean bytes per later round; NAN with one round */
    double later[SCENE_MAX_REPEAT]; /* every repeat's later-round average */
    uint32_t nlater;
} mode_run;

/* Why the modes have no verdict (fewer than SCENE_VERDICT_MIN_REPEAT
 * measurements of some mode) into why, or "" when they have one. */
void compare_no_verdict(const scene_run_opts *o, const mode_run *m, char *why, size_t len);
/* The table: a header line saying how to read it, then a row per mode run
 * and, when there is no verdict, a line saying why. */
void compare_print_table(FILE *f, const scene_run_opts *o, const mode_run *m);
/* The SVG: each mode's wall time per round (the first repeat). */
void compare_write_svg(FILE *f, const scene_run_opts *o, const mode_run *m);

#endif
