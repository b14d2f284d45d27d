/*
 * locks.c: the device layer's lock calls (backend.h), which count the locks
 * each thread holds, and the lock order of the device layer.
 *
 * Lock order.  Where two locks nest, the one higher in this list is taken
 * first; a thread never waits for a lock higher up while holding one below.
 *   1. hostbuf_watch_lock (tensor/hostbuf.c, process-wide): held by
 *      hg_hostbuf_destroy while it frees the buffer's resident copies in
 *      every runner (device_free, so it takes 3 and 4 below).
 *   2. A device's turn: the sim's dispatch_lock, OpenCL's run_lock.  One run
 *      holds it from the start of its execution to its end (on OpenCL,
 *      queue_begin to queue_end; while it holds it, it takes 3 per launch
 *      and its host steps take 3 and 4 for their copies).  Nothing else
 *      waits for it: no allocation, free, copy, fill, host step or
 *      completion takes it, so a run holds up only the next run's turn,
 *      as the header's sharing clause says.
 *   3. A backend's own locks: its allocation table's read-write lock, and
 *      OpenCL's prog_lock (programs, taken at orchestration, never under
 *      the table lock).  The table lock is held only around a lookup or a
 *      change of the table and the enqueue of the commands that use what
 *      was looked up: a launch sets its kernel's args and enqueues it
 *      under the read lock, then lets go (OpenCL itself keeps a cl_mem
 *      that an enqueued command uses until that command is done, so a free
 *      never waits for a run).  A copy also waits for its transfer-queue
 *      commands under it; that queue holds nothing that waits for a run's
 *      commands or for the host, so that wait ends on its own.
 *   4. dev->lock (device.c: counters, faults, the capacity reservation): a
 *      leaf.  No backend is called while it is held, and no other lock is
 *      taken under it.
 * 3 and 4 never nest: device.c takes dev->lock before or after a backend
 * call, never around one (a free: the backend's free, then the count).
 * The backends register no completion callbacks, and a host step's helper
 * takes only 3 and 4, for its copies; no thread holds 3 or 4 across a wait
 * for a run's commands or host steps.  So nothing a run waits for (its
 * commands, its host steps) ever waits, through a lock, for the run.
 */
#include <pthread.h>

#include "device/backend.h"

/* Locks this thread holds, device.c's and the backends' together. */
static _Thread_local unsigned device_lock_depth;

void device_mutex_lock(pthread_mutex_t *m)
{
    pthread_mutex_lock(m);
    device_lock_depth++;
}

void device_mutex_unlock(pthread_mutex_t *m)
{
    device_lock_depth--;
    pthread_mutex_unlock(m);
}

void device_rwlock_rdlock(pthread_rwlock_t *l)
{
    pthread_rwlock_rdlock(l);
    device_lock_depth++;
}

void device_rwlock_wrlock(pthread_rwlock_t *l)
{
    pthread_rwlock_wrlock(l);
    device_lock_depth++;
}

void device_rwlock_unlock(pthread_rwlock_t *l)
{
    device_lock_depth--;
    pthread_rwlock_unlock(l);
}

unsigned device_locks_held(void)
{
    return device_lock_depth;
}
