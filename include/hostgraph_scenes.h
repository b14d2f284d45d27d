/*
 * hostgraph_scenes.h: the built-in scenes, for applications that ask for them.
 *
 * The scenes (vector_add, bgemm, paged_attention, qwen3_decode: named
 * workloads with a golden reference) and the scene runner live in their own
 * library, libhostgraph_scenes, on top of libhostgraph.  An application that
 * links only libhostgraph carries none of their code; one that wants them
 * links both (pkg-config hostgraph_scenes, or CMake hostgraph::scenes).
 *
 * Two ways in:
 *   - the scene runner, as the `hostgraph` command runs it: hg_scene_run and
 *     hg_scene_compare, which write the command's JSON report;
 *   - a scene's case (its host buffers with deterministic contents, its args,
 *     its callable and its golden check), to run with your own runner:
 *     hg_scene_case_open.
 *
 * Every call here is safe to make from several threads on distinct objects.
 */
#ifndef HOSTGRAPH_SCENES_H
#define HOSTGRAPH_SCENES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostgraph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- registry */

/* Number of built-in scenes; they are numbered 0 .. count-1. */
uint32_t hg_scene_count(void);
/* Scene i's name ("bgemm") and one-line description; NULL past the end. */
const char *hg_scene_name(uint32_t i);
const char *hg_scene_description(uint32_t i);
/* Number of integer params scene i takes (0 past the end). */
uint32_t hg_scene_num_params(uint32_t i);

typedef struct hg_scene_param_info {
    const char *name;
    int64_t def, min, max;
    const char *def_name; /* the default's name for a named param ("tiny"), else NULL */
    const char *help;
} hg_scene_param_info;

/* Param `param` of scene `scene`; HG_ENOTFOUND past either end, HG_EINVAL
 * for a NULL out.  The strings are static. */
int hg_scene_param(uint32_t scene, uint32_t param, hg_scene_param_info *out);

/* ------------------------------------------------------------ scene runner */

/* Exit codes of hg_scene_run and hg_scene_compare: the command's. */
enum {
    HG_SCENE_OK = 0,           /* every round passed its golden check (or it was skipped) */
    HG_SCENE_GOLDEN = 1,       /* a golden check failed; the report is still written */
    HG_SCENE_USAGE = 2,        /* a bad name, param, mode, device spec or output path */
    HG_SCENE_RUNTIME = 3,      /* a run failed; the report holds the rounds done and "error" */
    HG_SCENE_INTERRUPTED = 130 /* stopped by hg_scene_cancel_request; the report holds
                                  the rounds done, "interrupted": true */
};

/* A stop request for one hg_scene_run or hg_scene_compare call (the
 * command's Ctrl-C): set it in hg_scene_opts.cancel, request from another
 * thread.  The first request stops the rounds after the one in flight; the
 * second also cancels that round's run (hg_runner_cancel).  The call then
 * returns HG_SCENE_INTERRUPTED. */
typedef struct hg_scene_cancel hg_scene_cancel;

/* HG_ENOMEM or HG_EINVAL (out NULL), else 0 and a new request in *out. */
int hg_scene_cancel_create(hg_scene_cancel **out);
/* Not while a call that uses it runs.  NULL is a no-op. */
void hg_scene_cancel_destroy(hg_scene_cancel *c);
/* Safe from any thread (not from a signal handler: it takes a lock). */
void hg_scene_cancel_request(hg_scene_cancel *c);

/* What `hostgraph run` / `hostgraph compare` take, as a struct.  Zero (or
 * NULL) means the command's default for every field. */
typedef struct hg_scene_opts {
    const char *scene;         /* "bgemm" */
    const char *const *params; /* "KEY=VALUE" strings, as --param takes them */
    uint32_t nparams;
    uint32_t rounds;         /* 0: the command's default (1, compare 5) */
    const char *residency;   /* "off" (NULL), "pin", "in" or "all"; run only */
    bool verify;             /* --verify */
    bool skip_golden;        /* --skip-golden */
    const char *device;      /* --device; NULL: "sim" */
    const char *json_path;   /* --json: the report; NULL: none */
    const char *trace_path;  /* --trace (run only); NULL: none */
    const char *svg_path;    /* --svg (compare only); NULL: none */
    bool print;              /* print the table and summary on stdout, as the command does */
    uint32_t repeat;         /* --repeat; 0: the command's default (1, compare 3) */
    uint32_t warmup;         /* --warmup; compare warms up at least one round */
    hg_scene_cancel *cancel; /* NULL: the call runs to its end */
    bool replay;             /* --replay: hg_runner_set_replay on every runner */
} hg_scene_opts;

/* Runs a scene for o->rounds rounds, as `hostgraph run` does, and writes the
 * same JSON report to o->json_path.  Returns an HG_SCENE_* exit code; on any
 * other than HG_SCENE_OK, errbuf (when not NULL) holds the command's error
 * lines ("hostgraph: round 2: arg 'a': ..."), newline-separated, truncated
 * to errlen.  Nothing is printed unless o->print. */
int hg_scene_run(const hg_scene_opts *o, char *errbuf, size_t errlen);
/* Runs a scene's rounds o->repeat times per residency mode, interleaved on
 * fresh devices, as `hostgraph compare` does (o->rounds below 2 is
 * HG_SCENE_USAGE); the JSON report holds every mode's first report with the
 * spread of its later-rounds averages and its verdict against off.  Returns
 * as hg_scene_run. */
int hg_scene_compare(const hg_scene_opts *o, char *errbuf, size_t errlen);

/* ------------------------------------------------------------------- cases */

/* A scene's case: host buffers with deterministic contents, the args over
 * them, the callable, and the golden reference of every checked output. */
typedef struct hg_scene_case hg_scene_case;

/* Makes scene `scene`'s case from "KEY=VALUE" params (the rest default).
 * HG_ENOTFOUND for an unknown scene or key; HG_EINVAL or HG_ERANGE for a bad
 * value; the scene's own code if it cannot make the case.  errbuf (when not
 * NULL) gets a one-line message.  On failure *out is NULL. */
int hg_scene_case_open(const char *scene, const char *const *params, uint32_t nparams,
                       hg_scene_case **out, char *errbuf, size_t errlen);
/* Frees the case, its host buffers and goldens.  NULL is a no-op. */
void hg_scene_case_close(hg_scene_case *c);
/* The case's args (owned by the case; host buffers included) and their
 * number.  Pass them, or copies with another residency, to hg_runner_run. */
const hg_arg *hg_scene_case_args(const hg_scene_case *c);
uint32_t hg_scene_case_num_args(const hg_scene_case *c);
/* The scene's callable.  It keeps no private state: it finds its args by
 * name, so it runs over any args of the right names, shapes and dtypes. */
const hg_callable *hg_scene_case_callable(const hg_scene_case *c);
/* Compares the case's outputs, as they are now, with the golden reference.
 * Returns true if all match; msg (when not NULL) gets one line: the worst
 * errors, or the first mismatching output and element. */
bool hg_scene_case_check(const hg_scene_case *c, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif /* HOSTGRAPH_SCENES_H */
