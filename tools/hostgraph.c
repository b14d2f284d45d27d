/*
 * hostgraph.c: the `hostgraph` command's main().  The parsing, the help and
 * every subcommand live in the scene library (src/scene/command.c, the same
 * code hg_scene_command runs in a caller's process); this file adds only
 * what needs the whole process: SIGINT and SIGTERM, taken on a thread of
 * their own, and `run --tp N` (N > 1) over MPI.  Exit codes: command.c's.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "scene/command.h"
#ifdef HG_HAVE_MPI
#include <mpi.h>

#include "hostgraph_tp.h"
#endif

/* SIGINT and SIGTERM are blocked in every thread (the device's core threads
 * inherit the mask) and taken here, by sigwait, on a thread of their own:
 * no handler runs in the middle of a table line or of a runner's close.  The
 * first asks the rounds to stop after the current one; the second cancels
 * the run in flight (between rounds, making the case or checking golden, the
 * command stops at its next check): both are hg_scene_cancel_request's.  A
 * third exits at once, without reports: the command's own, so counted here. */
typedef struct signal_watch {
    sigset_t set;
    hg_scene_cancel *cancel;
    uint32_t requests; /* the signal thread's alone */
    atomic_bool mute;  /* --tp, rank > 0: rank 0 says it */
} signal_watch;

/* Says at once, on stderr, what the key just did: a stop that waits for a
 * round (or for the case being made) must not look like an ignored key.
 * On a terminal the line first clears a progress line it would run into. */
static void acknowledge(const signal_watch *w, int sig, uint32_t n)
{
    const char *key = sig == SIGINT ? "Ctrl-C" : "SIGTERM";
    if (atomic_load(&w->mute) || n >= 3)
        return;
    fprintf(stderr, "%shostgraph: ", isatty(STDERR_FILENO) ? "\r\033[K" : "");
    if (n == 1)
        fprintf(stderr,
                "interrupted (%s): stopping before the next round; %s again stops the round in "
                "flight\n",
                key, key);
    else
        fprintf(stderr,
                "interrupted again (%s): stopping the round in flight; once more exits at once, "
                "without reports\n",
                key);
}

static void *watch_signals(void *arg)
{
    signal_watch *w = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&w->set, &sig) != 0)
            continue;
        uint32_t n = ++w->requests;
        if (n >= 3)
            _exit(HG_SCENE_INTERRUPTED);
        hg_scene_cancel_request(w->cancel);
        acknowledge(w, sig, n);
    }
    return NULL;
}

/* Starts the signal thread; false (signals keep their default action) if it
 * cannot. */
static bool catch_signals(signal_watch *w, hg_scene_cancel *cancel)
{
    pthread_t thread;
    w->cancel = cancel;
    sigemptyset(&w->set);
    sigaddset(&w->set, SIGINT);
    sigaddset(&w->set, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &w->set, NULL) != 0)
        return false;
    if (pthread_create(&thread, NULL, watch_signals, w) != 0) {
        pthread_sigmask(SIG_UNBLOCK, &w->set, NULL);
        return false;
    }
    pthread_detach(thread);
    return true;
}

#ifdef HG_HAVE_MPI
/* The MPI library the command was built with, up to its first comma
 * ("Open MPI v4.1.4"), or "none".  MPI_Get_library_version may be called
 * before MPI_Init (MPI 3.0), so this initialises nothing. */
static void mpi_library(char *out, size_t len)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (MPI_Get_library_version(version, &n) == MPI_SUCCESS) {
        version[strcspn(version, ",\n")] = '\0';
        snprintf(out, len, "%s", version);
        return;
    }
    snprintf(out, len, "none");
}

/* --tp N > 1, after command.c parsed the flags and checked that the scene
 * splits: MPI is initialised here and only here (after the signal thread
 * started, so MPI's threads inherit the blocked signals).  Rank 0 prints
 * and writes the reports; the other ranks print only their own errors. */
static int run_tp(void *user, scene_run_opts *o, uint32_t ranks)
{
    signal_watch *watch = user;
    static tp_job job; /* the ranks' callbacks point into it during the run */
    int rc = tp_job_begin(&job, ranks, stderr);
    if (rc != SCENE_EXIT_OK)
        return rc;
    FILE *devnull = NULL;
    o->tp = &job.tp;
    if (job.tp.rank != 0) {
        atomic_store(&watch->mute, true);
        devnull = fopen("/dev/null", "w");
        o->out = devnull != NULL ? devnull : o->out;
        o->quiet = true;
        o->json_path = o->trace_path = NULL;
    }
    rc = scene_run(o);
    tp_job_end(&job);
    if (devnull != NULL)
        fclose(devnull);
    return rc;
}
#endif

/* Whether the subcommand runs rounds: only those take signals and a
 * line-buffered table. */
static bool runs_rounds(int argc, char **argv)
{
    return argc > 1 && (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "compare") == 0);
}

int main(int argc, char **argv)
{
    static signal_watch watch; /* the signal thread's: it outlives main's frame */
    hg_scene_cancel *cancel = NULL;
    scene_command_host host = {
        .start_ns = clock_now_ns(),
        .tp_refusal = "MPI was not built in (reconfigure with Open MPI installed: Debian "
                      "openmpi-bin libopenmpi-dev); only --tp 1 runs"};
#ifdef HG_HAVE_MPI
    const scene_command_tp tp = {.run = run_tp, .library = mpi_library, .user = &watch};
    host.tp = &tp;
#endif
    if (runs_rounds(argc, argv)) {
        if (hg_scene_cancel_create(&cancel) == 0 && catch_signals(&watch, cancel))
            host.cancel = cancel; /* the signal thread's until the process exits */
        else
            hg_scene_cancel_destroy(cancel);
        /* A table into a pipe or a file goes out a line at a time: an
         * interrupted or killed command never leaves half a row. */
        if (!isatty(fileno(stdout)))
            setvbuf(stdout, NULL, _IOLBF, 0);
    }
    /* Messages say "hostgraph", however the command was started. */
    static char name[] = "hostgraph";
    argv[0] = name;
    return scene_command_main(argc, (const char *const *)argv, &host);
}
