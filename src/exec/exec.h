/*
 * exec.h: the scheduler.  Ready tasks (all predecessors done) go to device
 * cores of the kernel's type; a finished task releases its successors.  The
 * first kernel error stops dispatch, lets running tasks finish, and fails the
 * execution naming the task and kernel.
 */
#ifndef HG_EXEC_EXEC_H
#define HG_EXEC_EXEC_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/error.h"
#include "graph/graph.h"
#include "hostgraph.h"

/* A run's kernel counters (hg_kernel_count): kernels on several cores add
 * to them at once, hence atomic.  The runner zeroes them per run; a core
 * thread finds them through a thread-local pointer set around each task. */
typedef struct exec_counts {
    atomic_uint_least64_t v[HG_KCOUNT_MAX];
} exec_counts;

/* Executes a finalized graph on dev's cores.  Records a span per task into
 * `trace` when it is not NULL (`run` labels them).  Kernels get translated
 * pointers (device_translate) on the core threads.  Returns 0, HG_EKERNEL,
 * HG_ERANGE (an arg no longer translates), HG_ENOMEM, HG_EUNSUPPORTED (no
 * core of a task's type), HG_ELIMIT (too many task args) or HG_EINVAL (a
 * malformed task, or a graph that cannot progress). */
int exec_run(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run, hg_err *e);
/* exec_run that also stops, between tasks, once *cancel is true: no task is
 * taken after that, running ones finish, and it returns HG_ECANCELED.
 * cancel may be NULL (exec_run).  Kernels count into `counts` (NULL: they
 * count nothing). */
int exec_run_cancelable(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run,
                        const atomic_bool *cancel, exec_counts *counts, hg_err *e);
/* exec_run_cancelable whose staging copies (host steps on a queue device)
 * also count in *tally (the runner's counters; NULL: the device's only). */
int exec_run_counted(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run,
                     const atomic_bool *cancel, exec_counts *counts, hg_device_counters *tally,
                     hg_err *e);

/* Calls fn(kc) with hg_kernel_count adding to `counts` (NULL: to nothing)
 * for the call's duration, on the calling thread. */
int exec_call(hg_kernel_fn fn, const hg_kernel_ctx *kc, exec_counts *counts);

/* exec_run on a queue device (device_runs_queue: OpenCL): each task is
 * enqueued with its graph predecessors as its wait list once they are far
 * enough (enqueue.c: a kernel's host steps done, so nothing on the device
 * waits for the host), and the run waits once.  The lowest task whose
 * kernel set its status word (or whose command failed) fails the run with
 * HG_EKERNEL naming it.  Once *cancel (may be NULL) is true, no task is
 * enqueued and no host step starts; what the device already holds runs,
 * then it returns HG_ECANCELED.  With a trace, one span per task from the
 * device's own times. */
int exec_run_queue(hg_device *dev, const graph *g, hg_trace *trace, uint32_t run,
                   const atomic_bool *cancel, exec_counts *counts, hg_device_counters *tally,
                   hg_err *e);

/* Host steps on a queue device (hoststep.c): helper threads of one
 * exec_run_queue that stage each host step (wait for the tasks it depends
 * on, D2H of its args into host staging, its fn, H2D of what it wrote) and
 * then complete its event.  enqueue.c starts them (NULL when the graph has
 * no host step), posts each host step once the kernels it depends on are
 * launched and the host steps it depends on posted, learns of each step's
 * end (exec_hosts_next_done), and finishes them (every posted step done)
 * before the run's one wait.  Once *cancel (may be NULL) is true, a step
 * not yet started does not run. */
typedef struct exec_hosts exec_hosts;
int exec_hosts_start(hg_device *dev, const graph *g, const atomic_bool *cancel, exec_counts *counts,
                     hg_device_counters *tally, exec_hosts **out, hg_err *e);
void exec_hosts_post(exec_hosts *h, uint32_t task);
/* Blocks until a posted step ends that this call has not reported yet: its
 * task into *task, and *ok true if it ran and succeeded.  False when every
 * posted step was reported.  The posting thread only. */
bool exec_hosts_next_done(exec_hosts *h, uint32_t *task, bool *ok);
void exec_hosts_finish(exec_hosts *h);
/* The lowest failing host step (UINT32_MAX if none) and its error in *e;
 * each step's host-clock span into spans[2t], [2t+1] when spans is not
 * NULL.  After exec_hosts_finish. */
uint32_t exec_hosts_result(const exec_hosts *h, uint64_t *spans, hg_err *e);
/* The steps whose fn ran, and into *canceled those a cancel kept from
 * running.  After exec_hosts_finish. */
uint32_t exec_hosts_ran(const exec_hosts *h, uint32_t *canceled);
void exec_hosts_free(exec_hosts *h);

#endif
