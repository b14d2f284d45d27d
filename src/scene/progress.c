/*
 * progress.c: a one-line progress display on stderr while a long round runs.
 *
 * A round of a real workload takes seconds; a silent terminal for that long
 * looks hung.  When the display is on (stderr is a terminal and the run is
 * not --quiet), a watcher thread wakes every PROGRESS_TICK_MS and, once the
 * current round has run longer than PROGRESS_AFTER_MS, rewrites one line:
 * "round k of N: <stage>, <seconds> s".  The line is erased when the round
 * ends, so the table and the summary never mix with it.  Reports and pipes
 * see none of this.  Phases outside a run that can take as long (making a
 * real case, checking golden) show the same way ("making the case, 9.2 s").
 *
 * Threading: the round loop writes the round number and its start time
 * (atomics); the watcher only reads them and hg_runner_stage, and takes the
 * `lock` around each stderr write so that erasing and drawing never
 * interleave.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "scene/scene.h"

#define PROGRESS_TICK_MS  200  /* redraw period: smooth enough, near-free */
#define PROGRESS_AFTER_MS 1000 /* rounds shorter than this never show */

struct scene_progress {
    FILE *err;
    const hg_runner *runner;
    uint32_t rounds;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;                   /* under lock */
    bool drawn;                  /* under lock: a line is on screen */
    atomic_uint round;           /* 0: between rounds */
    atomic_uint_fast64_t start;  /* the round's (or the phase's) start, ns */
    _Atomic(const char *) phase; /* "making the case", "checking golden"; NULL: the run */
};

static void erase(scene_progress *p)
{
    if (p->drawn) {
        fputs("\r\033[K", p->err);
        fflush(p->err);
        p->drawn = false;
    }
}

static void *progress_main(void *arg)
{
    scene_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += PROGRESS_TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->wake, &p->lock, &until);
        unsigned round = atomic_load(&p->round);
        const char *phase = atomic_load(&p->phase);
        uint64_t ran = clock_now_ns() - (uint64_t)atomic_load(&p->start);
        if (p->stop || (round == 0 && phase == NULL) || ran < PROGRESS_AFTER_MS * 1000000ull)
            continue;
        const char *stage = phase != NULL ? phase : hg_runner_stage(p->runner);
        if (round == 0)
            fprintf(p->err, "\r\033[Khostgraph: %s, %.1f s", phase, (double)ran / 1e9);
        else
            fprintf(p->err, "\r\033[Khostgraph: round %u of %u: %s, %.1f s", round, p->rounds,
                    stage ? stage : "between stages", (double)ran / 1e9);
        fflush(p->err);
        p->drawn = true;
    }
    erase(p);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

scene_progress *scene_progress_start(const scene_run_opts *o, const hg_runner *r)
{
    if (o->quiet || o->err == NULL || !isatty(fileno(o->err)))
        return NULL;
    scene_progress *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL; /* a display is not worth failing a run for */
    *p = (scene_progress){.err = o->err, .runner = r, .rounds = o->rounds};
    atomic_init(&p->round, 0);
    atomic_init(&p->start, 0);
    atomic_init(&p->phase, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

void scene_progress_round(scene_progress *p, uint32_t round)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    if (round == 0)
        erase(p); /* the round ended: its row comes next */
    atomic_store(&p->start, clock_now_ns());
    atomic_store(&p->round, round);
    pthread_mutex_unlock(&p->lock);
}

void scene_progress_phase(scene_progress *p, const char *phase)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    if (phase == NULL)
        erase(p);
    atomic_store(&p->start, clock_now_ns());
    atomic_store(&p->phase, phase);
    pthread_mutex_unlock(&p->lock);
}

void scene_progress_set_runner(scene_progress *p, const hg_runner *r)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->runner = r;
    pthread_mutex_unlock(&p->lock);
}

void scene_progress_stop(scene_progress *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
