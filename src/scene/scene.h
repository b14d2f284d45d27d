/*
 * scene.h: scenes (named workloads with a golden reference) and the scene
 * runner that runs one for N rounds and reports where time and bytes went.
 *
 * A scene makes a case from its integer params: host buffers with
 * deterministic contents, the run's args, the callable, and the golden value
 * of every checked output, computed with plain loops in double (never by the
 * scene's kernels).  The case owns everything it points to; scene_case_destroy
 * frees it all.
 *
 * The registry is an explicit table (registry.c): the library is static, so
 * constructor registration would be dropped by the linker.
 */
#ifndef HG_SCENE_SCENE_H
#define HG_SCENE_SCENE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "base/outfile.h"
#include "hostgraph.h"
#include "hostgraph_scenes.h"

/* A scene is its public definition (include/hostgraph_scenes.h): the
 * built-in scenes fill an hg_scene_def as a plugin does, and the runner
 * reads nothing else.  The case behind hg_scene_case is scene_case. */
#define SCENE_MAX_PARAMS HG_SCENE_MAX_PARAMS
#define SCENE_MAX_ARGS   HG_SCENE_MAX_ARGS
#define SCENE_MAX_CHECKS HG_SCENE_MAX_CHECKS

typedef hg_scene_value scene_param_value;
typedef hg_scene_param_def scene_param;
typedef hg_scene_def scene;
typedef struct hg_scene_case scene_case;

/* True if 0 stands for "the preset's value" (the convention: the param's
 * help says "(0: the preset's ...)"), so `list` shows it as "preset". */
bool scene_param_zero_is_preset(const scene_param *p);
/* The name of value v of param p, or NULL when p has no name for it. */
const char *scene_param_value_name(const scene_param *p, int64_t v);

/* One checked output: arg `arg` of the case (a dense host tensor from element
 * 0) must match golden[i] within atol + rtol * |golden[i]| everywhere. */
typedef struct scene_check {
    uint32_t arg;
    double *golden; /* numel entries, owned by the case */
    size_t numel;
    double rtol, atol;
} scene_check;

typedef struct scene_tp scene_tp;
typedef struct scene_check_result scene_check_result;

/* A scene's own check of outputs too large for a golden per element (a KV
 * cache of which a step writes a few rows): fills res as scene_case_check
 * does for one output and returns res->pass. */
typedef bool (*scene_check_fn)(const scene_case *c, scene_check_result *res);

struct hg_scene_case {
    const scene *scene;
    int64_t params[SCENE_MAX_PARAMS]; /* as resolved by make(): what runs */
    hg_arg args[SCENE_MAX_ARGS];
    uint32_t nargs;
    hg_callable callable;
    scene_check checks[SCENE_MAX_CHECKS];
    uint32_t nchecks;
    scene_check_fn check; /* run by scene_case_check after the checks; NULL: none */
    void *state;          /* scene-private, freed by scene->destroy */
    /* The tensor-parallel job this case is one rank's share of (set before
     * make() by scene_case_make_tp); NULL: the whole case. */
    const scene_tp *tp;
    /* While make() runs: where hg_scene_case_fail and the builder's errors
     * go (NULL otherwise: the builder then refuses to add args or checks). */
    hg_err *err;
    /* The arg names the public builder copied (freed with the case); a
     * built-in scene's static names are not copied. */
    char *names[SCENE_MAX_ARGS];
};

/* The hg_err of a case whose make() runs: for the built-in scenes' make,
 * which report through the internal helpers below. */
static inline hg_err *scene_case_err(scene_case *c)
{
    return c->err;
}

/* ---------------------------------------------------------------- registry */

/* The scenes, one per file under scenes/, listed in registry.c's table. */
extern const scene scene_vector_add;
extern const scene scene_bgemm;
extern const scene scene_paged_attention;
extern const scene scene_qwen3_decode;

/* The scene called `name`, or NULL. */
const scene *scene_find(const char *name);
/* The scene whose name is closest to a misspelt `name` (two edits at most,
 * or one that starts with it), or NULL. */
const scene *scene_suggest(const char *name);
/* The i-th registered scene, or NULL past the end (for `hostgraph list`). */
const scene *scene_at(uint32_t i);

/* Registers n checked definitions (define.c checked them), all or none:
 * HG_EINVAL naming the scene when a name is taken (file, when not NULL,
 * names the plugin and becomes the file of those that give none; it must
 * outlive the process).  The structs are copied. */
int scene_register_all(const hg_scene_def *const *defs, uint32_t n, const char *file, hg_err *err);
/* Removes a registered scene: HG_ENOTFOUND for a built-in or unknown name,
 * HG_EINVAL while a case made from it is open. */
int scene_unregister(const char *name, hg_err *err);

/* Writes every param's default into params[0..nparams). */
void scene_params_default(const scene *s, int64_t *params);
/* Applies one "KEY=VALUE" (VALUE a decimal integer, or one of the param's
 * names when it has them).  HG_ENOTFOUND for an unknown key, HG_EINVAL for a
 * malformed pair or number or an unknown name (the message lists the names),
 * HG_ERANGE for a value outside [min, max]; the message names the key and the
 * value. */
int scene_param_set(const scene *s, int64_t *params, const char *key_value, hg_err *err);

/* ------------------------------------------------------------------ cases */

/* Makes a case from params (all nparams of them; each checked against its
 * range first).  On failure *out is NULL and nothing leaks. */
int scene_case_make(const scene *s, const int64_t *params, scene_case **out, hg_err *err);
/* The same, as rank tp->rank of a tensor-parallel job of tp->size ranks
 * (tp NULL or of size 1: the whole case): the scene's make() builds that
 * rank's share; HG_EINVAL naming --tp when the scene cannot split (or not
 * into tp->size shares).  tp must outlive the case. */
int scene_case_make_tp(const scene *s, const int64_t *params, const scene_tp *tp, scene_case **out,
                       hg_err *err);
/* Frees the case, its host buffers and goldens.  NULL is a no-op. */
void scene_case_destroy(scene_case *c);

/* Appends a tensor arg over a new zeroed host buffer of a dense shape; its
 * index goes to *arg.  For scenes' make(). */
int scene_case_add_tensor(scene_case *c, const char *name, hg_dir dir, hg_dtype dtype,
                          uint32_t ndims, const size_t *shape, uint32_t *arg, hg_err *err);
/* Appends a SCALAR arg holding `value`. */
int scene_case_add_scalar(scene_case *c, const char *name, uint64_t value, hg_err *err);
/* The host bytes of tensor arg `arg` (as created by scene_case_add_tensor). */
void *scene_case_data(const scene_case *c, uint32_t arg);
/* Declares arg `arg` checked and returns its zeroed golden array in *golden
 * (one double per element) for make() to fill. */
int scene_case_add_check(scene_case *c, uint32_t arg, double rtol, double atol, double **golden,
                         hg_err *err);

/* Fills arg `arg` with deterministic values: element i is
 * (h(seed, i) mod (2*span+1) - span) * scale, h a fixed integer hash.  Small
 * spans and power-of-two scales keep f32 sums exact.  Bumps the generation. */
int scene_fill(scene_case *c, uint32_t arg, uint64_t seed, int span, double scale);

/* A rows x cols tile of a 2-D view starting at (row, col). */
int scene_tile_2d(const hg_tensor *t, size_t row, size_t col, size_t rows, size_t cols,
                  hg_tensor *out);

/* Inside an orchestration: finds the run args called names[0..n) and writes
 * their indices and descriptions.  HG_ENOTFOUND if one is missing. */
int scene_orch_lookup(hg_orch *o, const char *const *names, uint32_t n, uint32_t *idx,
                      const hg_arg **args);

/* ------------------------------------------------------------ golden check */

struct scene_check_result {
    bool pass;
    const char *output; /* the first failing output's arg name, else the last checked */
    double max_abs_err, max_rel_err; /* of the failing output; if all pass, the worst of all */
    size_t first_bad;                /* first mismatching element; SIZE_MAX if none */
    /* The worst element of that output: the one furthest outside its
     * tolerance (|got - want| / (atol + rtol |want|), NaN the worst of all),
     * its value and its golden; worst SIZE_MAX when nothing was compared. */
    size_t worst;
    double worst_got, worst_want, worst_score;
};

/* An empty result (pass, nothing compared) for output `output`. */
scene_check_result scene_check_start(const char *output);
/* Folds element i (got against want, within atol + rtol |want|) into res:
 * its errors, first mismatch and worst element. */
void scene_check_note(scene_check_result *res, size_t i, double got, double want, double rtol,
                      double atol);
/* One line for a failed res: "golden mismatch in output 'x': max abs err
 * .., max rel err .., first mismatch at index i; worst at index j: got g,
 * want w". */
void scene_check_describe(const scene_check_result *res, char *out, size_t len);

/* Compares every checked output with its golden, then runs the case's own
 * check (c->check) if it has one.  Returns res->pass.  A NaN in an output is
 * a mismatch. */
bool scene_case_check(const scene_case *c, scene_check_result *res);

/* ------------------------------------------------------------ scene runner */

/* Residency of args across rounds (modes.c):
 *   OFF  every round stages every arg;
 *   PIN  the reference design's explicit path: before the rounds, every
 *        non-empty IN the orchestration does not read on the host
 *        (scene.host_reads) is copied once into a user device buffer and
 *        passed as a device view every round; freed after the rounds;
 *   IN   every non-empty IN arg is HG_RESIDENT;
 *   ALL  every non-empty IN and INOUT arg is HG_RESIDENT. */
typedef enum scene_residency {
    SCENE_RESIDENCY_OFF = 0,
    SCENE_RESIDENCY_PIN,
    SCENE_RESIDENCY_IN,
    SCENE_RESIDENCY_ALL,
    SCENE_RESIDENCY_COUNT
} scene_residency;

/* HG_EINVAL for any name but the known ones. */
int scene_residency_parse(const char *name, scene_residency *out);
const char *scene_residency_name(scene_residency r);

/* Called after each round's golden check, with the case's outputs as that
 * round left them (tests compare rounds; benchmarks collect stats). */
typedef void (*scene_round_fn)(void *user, uint32_t round, const scene_case *c,
                               const hg_run_stats *stats);

/* A stop request for the scene runner (the command's SIGINT and SIGTERM, a
 * binding's Ctrl-C).  The first request stops the rounds after the one in
 * flight; the second also cancels that round's run (hg_runner_cancel).  The
 * rounds done are reported, with "interrupted": true.  Requests come from
 * another thread: the runner in flight is kept under the lock, so a cancel
 * never reaches a runner that is being closed. */
typedef struct scene_cancel {
    pthread_mutex_t lock;
    uint32_t requests;
    hg_runner *runner; /* the runner whose rounds are in flight, or NULL */
} scene_cancel;

void scene_cancel_init(scene_cancel *c);
void scene_cancel_destroy(scene_cancel *c);
/* Returns the number of requests so far, this one included. */
uint32_t scene_cancel_request(scene_cancel *c);
/* True once a request came (NULL: never). */
bool scene_cancel_requested(scene_cancel *c);
/* Makes r the runner a second request cancels (NULL: none).  Attaching after
 * two requests cancels r at once. */
void scene_cancel_attach(scene_cancel *c, hg_runner *r);

/* ------------------------------------------------------- tensor parallel */

/*
 * One rank of a tensor-parallel job (`run --tp N` under mpirun): what the
 * scene runner and a splitting scene need from the ranks' communicator.  The
 * scene library knows nothing of MPI: the command fills these in over
 * libhostgraph_mpi (tools/hostgraph_tp.c).  Every call but allreduce is
 * collective: every rank makes it, in the same order, between runs, from
 * the thread that runs the rounds.  Each returns 0 or a negative HG_E*
 * code (err, where given, says why).
 */
struct scene_tp {
    uint32_t rank, size;
    /* This rank's index among the ranks on its host (what `{rank}` in
     * --device stands for: one device each on a host of several). */
    uint32_t local_rank;
    void *user; /* the callbacks' first argument */
    /* Attaches runner r to the ranks (their failure agreement and
     * allreduces); detach undoes it before r closes. */
    int (*attach)(void *user, hg_runner *r, hg_err *err);
    void (*detach)(void *user);
    /* From an orchestration of the attached runner: an allreduce task that
     * sums `view` of run arg `arg` over the ranks (hg_mpi_allreduce). */
    int (*allreduce)(void *user, hg_orch *o, uint32_t arg, const hg_tensor *view);
    /* out[i] = the minimum of in[i] over the ranks, i < n. */
    int (*agree_min)(void *user, const int64_t *in, int64_t *out, uint32_t n);
    /* Rank 0's out gets every rank's `bytes` of in, rank after rank. */
    int (*gather)(void *user, const void *in, size_t bytes, void *out);
};

/* True when tp splits the work (not NULL, more than one rank). */
static inline bool scene_tp_on(const scene_tp *tp)
{
    return tp != NULL && tp->size > 1;
}

typedef struct scene_run_opts {
    const scene *scene;
    int64_t params[SCENE_MAX_PARAMS];
    uint32_t rounds; /* >= 1 */
    scene_residency residency;
    bool verify; /* hg_runner_set_verify: catch host writes that bypassed the API */
    bool replay; /* hg_runner_set_replay: later rounds replay the first's graph */
    bool skip_golden;
    const char *device_spec; /* NULL: "sim" */
    const char *json_path;   /* NULL: no JSON report */
    const char *trace_path;  /* NULL: no trace */
    bool quiet;              /* print only the summary */
    uint64_t start_ns;       /* when the command started (overall_ms); 0: at scene_run_case */
    FILE *out;               /* table and summary */
    FILE *err;               /* error lines */
    scene_round_fn on_round; /* NULL: none */
    void *on_round_user;
    scene_cancel *cancel; /* NULL: the rounds cannot be stopped early */
    uint32_t repeat;      /* times the rounds run, each on a new runner (0: once) */
    uint32_t warmup;      /* unreported rounds before them */
    /* This process is one rank of a tensor-parallel job (NULL: none): the
     * case is made as its share, every runner is attached, the ranks agree
     * after each setup step and at each round's end (golden verdicts and
     * stop requests), and rank 0 reports every rank's rounds (tp.c). */
    const scene_tp *tp;
} scene_run_opts;

/* --device with {rank} (first occurrence) replaced by this rank's index on
 * its host under --tp (`opencl:device={rank}`: one GPU per rank); as given
 * otherwise ("sim" when none).  HG_ELIMIT when it does not fit n bytes. */
#define SCENE_SPEC_MAX 512
int scene_device_spec_for_rank(const scene_run_opts *o, char *out, size_t n);

/* ------------------------------------------------------------ spread.c */

#define SCENE_MAX_REPEAT 100
/* compare's defaults: enough later rounds for an average, enough repeats for
 * a spread. */
#define SCENE_COMPARE_ROUNDS 5
#define SCENE_COMPARE_REPEAT 3

/* Repeated measurements of one number: the median and the min-max spread
 * (NaN and n 0 when none). */
typedef struct scene_spread {
    double median, min, max;
    uint32_t n;
} scene_spread;

/* The spread of values[0..n) (NaNs skipped; at most SCENE_MAX_REPEAT). */
scene_spread scene_spread_of(const double *values, uint32_t n);
/* The fewest samples a side that a verdict is given from. */
#define SCENE_VERDICT_MIN_REPEAT 3
/* "faster" or "slower" when mode's spread lies apart below or above off's,
 * "within noise" when they overlap; NULL (no verdict) when either side has
 * fewer than SCENE_VERDICT_MIN_REPEAT samples. */
const char *scene_verdict(const scene_spread *mode, const scene_spread *off);

/* Process exit codes of `hostgraph run`. */
enum {
    SCENE_EXIT_OK = 0,
    SCENE_EXIT_GOLDEN = 1,
    SCENE_EXIT_USAGE = 2,
    SCENE_EXIT_RUNTIME = 3,
    SCENE_EXIT_INTERRUPTED = 130 /* stopped by o->cancel: 128 + SIGINT, as shells say */
};

/* The exit code of a --device that hg_device_open refused with rc: a usage
 * error (2) when the spec is malformed (HG_EINVAL: an unknown key, a bad
 * value) or names what this machine does not have (HG_ENOTFOUND: an OpenCL
 * platform or device index past the last, no OpenCL platform at all), as a
 * sim spec's bad value is; a runtime error (3) when the device exists but
 * cannot start (memory, the driver). */
int scene_device_open_exit(int rc);
/* SCENE_EXIT_USAGE with why in msg when the scene runner refuses a
 * --device the library would open: the sim's cube= without vector= (or the
 * reverse), which gives it no core of the other type; else 0. */
int scene_device_spec_check(const char *spec, char *msg, size_t len);

/* Checks the output paths, opens the device, makes the case and runs it
 * (scene_run_case).  Returns a SCENE_EXIT_* code; a runtime error is one line
 * on o->err. */
int scene_run(const scene_run_opts *o);
/* Runs an already made case on an open device for o->rounds rounds: restores
 * OUT/INOUT host buffers to their initial contents before each round, runs,
 * checks golden, prints a row; then the summary, the trace and the JSON.
 * Before any round, a json_path or trace_path that cannot be written (its
 * directory missing, a directory itself, not writable, or both the same) is
 * SCENE_EXIT_USAGE with one line naming the flag, the path and the OS error;
 * nothing is created.  A report that fails to write after the rounds keeps
 * the file that was there (scene_outputs). */
int scene_run_case(const scene_run_opts *o, hg_device *dev, scene_case *c);

/* progress.c: a progress line on stderr while a round runs longer than a
 * second, only when stderr is a terminal and the run is not quiet (NULL
 * otherwise: every call takes NULL).  round 0 says "between rounds". */
typedef struct scene_progress scene_progress;
scene_progress *scene_progress_start(const scene_run_opts *o, const hg_runner *r);
void scene_progress_round(scene_progress *p, uint32_t round);
/* A phase outside a run (a static string: "making the case", "checking
 * golden"), shown like a long round, with the round when one is set; NULL
 * ends it.  r may be NULL at start (no runner yet) and set later. */
void scene_progress_phase(scene_progress *p, const char *phase);
void scene_progress_set_runner(scene_progress *p, const hg_runner *r);
void scene_progress_stop(scene_progress *p);

/* The bytes of every OUT/INOUT arg of a case, indexed like its args: what
 * each round (and each compared mode) starts from. */
typedef struct scene_snapshot {
    void *bytes[SCENE_MAX_ARGS];
    /* The ranges the last noted run copied back, per arg. */
    hg_range *changed[SCENE_MAX_ARGS];
    size_t nchanged[SCENE_MAX_ARGS], cap_changed[SCENE_MAX_ARGS];
    bool noted; /* a run was noted: restore only what changed */
} scene_snapshot;

int scene_snapshot_take(scene_snapshot *s, const scene_case *c);
/* Writes them back whole through hg_hostbuf_write (generations move on). */
int scene_snapshot_restore(const scene_snapshot *s, scene_case *c);
/* Notes which ranges run r just copied back (hg_runner_copied_back). */
int scene_snapshot_note_run(scene_snapshot *s, const scene_case *c, const hg_runner *r);
/* Writes back only the ranges noted since the last restore (all of it when
 * no run was noted yet), each through hg_hostbuf_write. */
int scene_snapshot_restore_changed(scene_snapshot *s, scene_case *c);
void scene_snapshot_free(scene_snapshot *s);

/* The report files of one command (--json, --trace, --svg), opened before
 * anything runs: a regular file is written to a temporary file beside it
 * and renamed into place when complete (base/outfile.h). */
typedef struct scene_outputs {
    outfile json, trace, svg; /* .f NULL when not asked for */
} scene_outputs;

/* Opens the paths given (NULL: none).  0, or SCENE_EXIT_USAGE after one line
 * on err naming the flag, the path and the OS error (or two flags naming one
 * path); then nothing is left open or created. */
int scene_outputs_open(scene_outputs *so, FILE *err, const char *json, const char *trace,
                       const char *svg);
/* Publishes one opened file: 0, or SCENE_EXIT_RUNTIME after one line naming
 * the flag, the path and the OS error (the old file stays untouched). */
int scene_output_commit(outfile *of, FILE *err, const char *flag, const char *path);
/* Drops every file not yet committed, creating nothing. */
void scene_outputs_abort(scene_outputs *so);

/* ------------------------------------------------------------ modes.c */

/* The args a mode runs the case with, and what pinning cost. */
typedef struct scene_mode_args {
    hg_arg args[SCENE_MAX_ARGS];
    hg_devaddr pinned[SCENE_MAX_ARGS];  /* PIN: user device buffers to free, 0 if none */
    uint64_t setup_ns, setup_h2d_bytes; /* PIN's one-time upload */
} scene_mode_args;

/* Fills m from the case's args for `mode` (PIN allocates and uploads; the
 * message of a failure goes to err).  Undo with scene_mode_release. */
int scene_mode_prepare(scene_mode_args *m, const scene_case *c, scene_residency mode,
                       hg_device *dev, hg_err *err);
void scene_mode_release(scene_mode_args *m, hg_device *dev);

/* True if the scene's orchestration reads arg `name` on the host. */
bool scene_reads_on_host(const scene *s, const char *name);

/* ------------------------------------------------------------ compare.c */

/* `hostgraph compare`: after o->warmup (at least 1) unreported rounds, runs
 * the case o->repeat times per residency mode (off, pin, in, all),
 * interleaved mode by mode, each run on a fresh device of o->device_spec, in
 * one process, and prints a row per mode against off: the median later-round
 * average, its min-max spread and a verdict (faster, slower, within noise);
 * writes o->json_path (every mode's first report, with the spread and the
 * verdict) and svg_path (per-round wall time per mode) when set.  o->rounds
 * below 2 is SCENE_EXIT_USAGE.  Returns a SCENE_EXIT_* code: 1 if any mode
 * failed golden. */
int scene_compare(const scene_run_opts *o, const char *svg_path);

#endif
