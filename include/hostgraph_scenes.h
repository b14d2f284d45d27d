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

/* Number of scenes, numbered 0 .. count-1: the built-in ones first, then
 * those registered in this process (hg_scene_register, hg_scene_load), in
 * the order they came.  Unregistering one renumbers those after it. */
uint32_t hg_scene_count(void);
/* Scene i's name ("bgemm") and one-line description; NULL past the end. */
const char *hg_scene_name(uint32_t i);
const char *hg_scene_description(uint32_t i);
/* Where scene i was defined (hg_scene_def.file and .cls: the plugin's path,
 * a Python file and class); NULL for a built-in scene, one that gave none,
 * or past the end. */
const char *hg_scene_file(uint32_t i);
const char *hg_scene_class(uint32_t i);
/* Number of integer params scene i takes (0 past the end). */
uint32_t hg_scene_num_params(uint32_t i);

typedef struct hg_scene_param_info {
    const char *name;
    int64_t def, min, max;
    const char *def_name; /* the default's name for a named param ("tiny"), else NULL */
    const char *help;
} hg_scene_param_info;

/* Param `param` of scene `scene`; HG_ENOTFOUND past either end, HG_EINVAL
 * for a NULL out.  The strings are the definition's (a built-in scene's are
 * static; a registered one's live as long as its registration). */
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
 * NULL) means the command's default for every field.  It carries no size
 * or version (unlike hg_scene_def, which plugins hand in): a release that
 * grows it bumps the library's soname. */
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

/* -------------------------------------------------------- scene definition */

/*
 * A scene of your own.  One struct defines a scene, the built-in ones
 * included: its name, params, how to make a case, and what the scene runner
 * must know of its orchestration.  Register it in this process
 * (hg_scene_register), or put it in a shared object the command loads
 * (`hostgraph run|compare|list --scene-lib PATH`, or HG_SCENE_PATH): then it
 * gets everything the built-in scenes get (rounds, residency modes, --verify,
 * --replay, golden checks, compare, the JSON report, traces).
 *
 * Versioning: the struct starts with its own size and version, as the
 * definer compiled them (HG_SCENE_DEF_INIT fills both).  The library refuses
 * a definition of another version, naming both, and reads no field past the
 * size given, so fields added at the end in a later version keep older
 * plugins working at their version's behaviour.
 */
#define HG_SCENE_DEF_VERSION 1

/* A named value of a param ("preset=real" stands for value 2). */
typedef struct hg_scene_value {
    const char *name;
    int64_t value;
} hg_scene_value;

/* One integer param: its default and inclusive range. */
typedef struct hg_scene_param_def {
    const char *name; /* [a-z0-9_]+, unique within the scene */
    int64_t def, min, max;
    const char *help;  /* one line; "(0: the preset's ...)" marks a 0 that stands for a preset */
    const char *alias; /* a second accepted key, or NULL */
    /* Named values ending with a NULL name, or NULL for a plain integer.  A
     * param with names takes exactly those (and def is one of them). */
    const hg_scene_value *values;
} hg_scene_param_def;

/* make() fills an hg_scene_case (the cases hg_scene_case_open hands out
 * are the same objects), owned by the library. */
typedef struct hg_scene_def {
    uint32_t size;           /* sizeof(hg_scene_def) where it was compiled */
    uint32_t version;        /* HG_SCENE_DEF_VERSION where it was compiled */
    const char *name;        /* [A-Za-z0-9_.:-]+, unique among the scenes of the process */
    const char *description; /* one line */
    const hg_scene_param_def *params;
    uint32_t nparams; /* at most HG_SCENE_MAX_PARAMS */
    /* Fills an empty case from validated params (nparams of them, in the
     * table's order): its args (hg_scene_case_add_tensor, _add_scalar, with
     * deterministic contents, so every round and every run starts from the
     * same bytes), its golden (hg_scene_case_add_check: computed from the
     * inputs, never by the scene's kernels, never read back from an output)
     * and its callable (hg_scene_case_set_callable).  Returns 0, or a
     * negative HG_E* code, after hg_scene_case_fail says why (a builder
     * call that fails has said why already).  The case is destroyed on
     * failure, whatever make() added to it.  The scene runner takes
     * HG_EINVAL and HG_ERANGE for params that do not fit together (exit 2,
     * a usage error), any other code for a runtime error (exit 3).  make()
     * runs on the thread that asked for the case, once per case. */
    int (*make)(hg_scene_case *c, const int64_t *params, void *user);
    /* Frees what make() stored with hg_scene_case_set_state; NULL: nothing
     * to free.  Args, buffers and goldens are the library's. */
    void (*destroy)(hg_scene_case *c, void *user);
    /* The IN args the orchestration reads on the host (hg_orch_host_view),
     * NULL-terminated; NULL: none.  `--residency pin` passes every other IN
     * arg as a device view, which has no host view. */
    const char *const *host_reads;
    /* True if make() builds one rank's share under `run --tp N`
     * (hg_scene_case_tp); the command refuses --tp for other scenes. */
    bool splits;
    void *user; /* make's and destroy's last argument */
    /* Where it was defined, for reports and `list`: a file ("test_x.py",
     * "libscene_x.so") and, for a class-based definition, the class; NULL
     * when not known.  A plugin's file is filled in by the loader. */
    const char *file;
    const char *cls;
} hg_scene_def;

#define HG_SCENE_MAX_PARAMS 16
#define HG_SCENE_MAX_ARGS   32
#define HG_SCENE_MAX_CHECKS 8

/* Starts a definition: `hg_scene_def d = HG_SCENE_DEF_INIT;` then its fields. */
#define HG_SCENE_DEF_INIT                                                                          \
    {                                                                                              \
        .size = sizeof(hg_scene_def), .version = HG_SCENE_DEF_VERSION                              \
    }

/* Registers a definition in this process, as a built-in scene is: the
 * library copies the struct (not what it points to: the strings, tables and
 * user data must outlive the registration).  HG_EINVAL for a NULL def, a
 * version or size other than this library's (the message names both), a
 * missing name or make, or a bad param table (a bad or duplicate name, min >
 * max, a default outside the range or not among the names, too many params);
 * HG_EINVAL too for a name that is already registered.  errbuf (when not
 * NULL) gets one line naming the scene and what is wrong. */
int hg_scene_register(const hg_scene_def *def, char *errbuf, size_t errlen);
/* Removes a scene that hg_scene_register added.  HG_ENOTFOUND for another
 * name (a built-in one included); HG_EINVAL while a call of this library
 * runs or holds a case of it (hg_scene_case_open), which it names. */
int hg_scene_unregister(const char *name, char *errbuf, size_t errlen);

/* What a plugin exports: a function of this name and type returning its
 * definitions, NULL-terminated, valid while the object is loaded. */
#define HG_SCENE_PLUGIN_SYMBOL "hg_scene_plugin"
typedef const hg_scene_def *const *(*hg_scene_plugin_fn)(void);

/* Loads a plugin (dlopen) and registers every scene it defines; its file
 * is `path` for a definition that gives none.  The object stays loaded for
 * the life of the process.  HG_EIO when it cannot be opened, HG_ENOTFOUND
 * when it lacks HG_SCENE_PLUGIN_SYMBOL, else as hg_scene_register (and then
 * none of its scenes is registered); the message names the file.  Loading
 * the same file twice registers nothing the second time and returns 0.
 * Returns the number of scenes registered in *count (when not NULL). */
int hg_scene_load(const char *path, uint32_t *count, char *errbuf, size_t errlen);

/* ------------------------------------------------ making a case (make()) */

/* The calls that add to a case (_add_tensor, _add_scalar, _fill,
 * _add_check, _set_callable) work only while the case's make() runs: on a
 * case handed out they return HG_EINVAL and change nothing.  On a bad
 * argument they return HG_EINVAL (HG_ELIMIT past HG_SCENE_MAX_ARGS or
 * HG_SCENE_MAX_CHECKS, HG_ENOMEM without memory) and say why in the
 * message make()'s caller reports; an arg's name is copied, and a case
 * takes each name once. */
/* Appends a tensor arg over a new zeroed host buffer of a dense shape; its
 * index goes to *arg (when not NULL). */
int hg_scene_case_add_tensor(hg_scene_case *c, const char *name, hg_dir dir, hg_dtype dtype,
                             uint32_t ndims, const size_t *shape, uint32_t *arg);
/* Appends a SCALAR arg holding `value` (hostgraph.h's scalar bits). */
int hg_scene_case_add_scalar(hg_scene_case *c, const char *name, uint64_t value, uint32_t *arg);
/* The host bytes of tensor arg `arg`, dense from element 0, for make() to
 * fill; NULL for a scalar or an index past the end. */
void *hg_scene_case_data(hg_scene_case *c, uint32_t arg);
/* Fills tensor arg `arg` (f32, f16, bf16 or an integer dtype) with
 * deterministic values: element i is (h(seed, i) mod (2*span+1) - span) *
 * scale, h a fixed integer hash (small spans and power-of-two scales keep f32
 * sums exact). */
int hg_scene_case_fill(hg_scene_case *c, uint32_t arg, uint64_t seed, int span, double scale);
/* Declares tensor arg `arg` (an OUT or INOUT) checked after every round:
 * each element must be within atol + rtol * |golden| of *golden's, which
 * make() fills (one double per element, zeroed, owned by the case). */
int hg_scene_case_add_check(hg_scene_case *c, uint32_t arg, double rtol, double atol,
                            double **golden);
/* The case's callable (copied; what it points to must outlive the case). */
int hg_scene_case_set_callable(hg_scene_case *c, const hg_callable *callable);
/* Private state for the callable's user pointer and for destroy(). */
void hg_scene_case_set_state(hg_scene_case *c, void *state);
void *hg_scene_case_state(const hg_scene_case *c);
/* The params the case runs with: make() may write there the value it used
 * for a param whose 0 stands for a preset's, so reports say what ran. */
int64_t *hg_scene_case_params(hg_scene_case *c);
/* Under `run --tp N`: this rank's index and the number of ranks (0 and 1
 * for a whole case). */
void hg_scene_case_tp(const hg_scene_case *c, uint32_t *rank, uint32_t *size);
/* Says why make() fails and returns code (a negative HG_E*). */
int hg_scene_case_fail(hg_scene_case *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --------------------------------------------------------- the command */

/* Runs `hostgraph ARGS...` in this process, as the command does: argv[0]
 * is the program's name in messages, argv[1] the subcommand (run, compare,
 * list, help).  Its output goes to stdout and stderr; returns its exit code
 * (HG_SCENE_*).  --scene-lib and HG_SCENE_PATH load plugins as the command
 * does.  No signal is caught: Ctrl-C is the caller's, through `cancel`
 * (NULL: the call cannot be stopped).  --tp N for N > 1 needs the command
 * itself (MPI) and is refused here with HG_SCENE_USAGE (--tp 1, the
 * default, runs as without it). */
int hg_scene_command(int argc, const char *const *argv, hg_scene_cancel *cancel);

#ifdef __cplusplus
}
#endif
#endif /* HOSTGRAPH_SCENES_H */
