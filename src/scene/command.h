/*
 * command.h: the `hostgraph` command's one parser and dispatcher, inside
 * the scene library (command.c).  hg_scene_command runs it in the caller's
 * process; tools/hostgraph.c's main() runs it too, and adds only what needs
 * the whole process: the signal thread (which requests `cancel`) and
 * `run --tp N` over MPI (the tp hooks below).
 *
 * Invariant: a call keeps its state on its own stack; nothing static is
 * written, so calls may follow each other or run at once on several
 * threads, each with its own cancel.
 */
#ifndef HG_SCENE_COMMAND_H
#define HG_SCENE_COMMAND_H

#include <stddef.h>
#include <stdint.h>

#include "hostgraph_scenes.h"
#include "scene/scene.h"

/* `run --tp N` with N > 1: what only the command itself (MPI) can do. */
typedef struct scene_command_tp {
    /* Runs o's rounds as one rank of an MPI job of `ranks` ranks (the
     * scene splits: checked before); returns a SCENE_EXIT_* code. */
    int (*run)(void *user, scene_run_opts *o, uint32_t ranks);
    /* The MPI library's name ("Open MPI v4.1.4") into out, for the error
     * of a scene that cannot split; NULL: "none". */
    void (*library)(char *out, size_t len);
    void *user; /* run's first argument */
} scene_command_tp;

typedef struct scene_command_host {
    hg_scene_cancel *cancel; /* NULL: the call cannot be stopped */
    uint64_t start_ns;       /* when the command started (clock_now_ns); 0: now */
    /* NULL: --tp N > 1 is a usage error, "--tp N: " then tp_refusal,
     * found while the flags are parsed. */
    const scene_command_tp *tp;
    const char *tp_refusal;
} scene_command_host;

/* Runs `hostgraph ARGS...` (argv[0] the name in messages, argv[1] the
 * subcommand) with host's cancel and --tp; returns the exit code. */
int scene_command_main(int argc, const char *const *argv, const scene_command_host *host);

/* The --scene-lib paths of one call, in their order. */
#define SCENE_COMMAND_MAX_LIBS 32
typedef struct scene_libs {
    const char *paths[SCENE_COMMAND_MAX_LIBS];
    uint32_t n;
} scene_libs;

/* Loads the plugins of HG_SCENE_PATH (colon-separated files, empty entries
 * skipped), then libs' (command_libs.c): 0, or the first failure's code
 * with one line in msg naming where the file came from and the file. */
int scene_libs_load(const scene_libs *libs, char *msg, size_t len);

/* The texts (command_text.c): the usage, `list --help`, and what `run
 * --help` and `--help` say of run's and compare's flags. */
extern const char scene_command_usage[];
extern const char scene_command_list_help[];
extern const char scene_command_run_help[];

#endif
