/*
 * trace.c: hg_trace, spans in memory and their Chrome trace-event JSON.
 *
 * Spans are appended under one mutex (core threads record concurrently; a
 * trace is off by default, so the lock is off the hot path unless asked for).
 * Times are kept in ns from CLOCK_MONOTONIC and written relative to the
 * trace's creation, in microseconds, as the format wants.  Lanes: process 1
 * "host" has one thread, the run's stages; process 2 "device" has a thread per
 * core with a slice per task.
 *
 * Names.  A task span's kernel name is interned into the trace's own table
 * when the span is recorded (intern.h: O(len) expected, one copy per
 * distinct name), so the trace never reads a string its caller may have
 * freed, and 10^6 spans of one kernel hold its name once.  Host span names
 * are the runner's static stage names and are kept as pointers.
 */
#include "base/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/intern.h"
#include "base/json.h"
#include "base/outfile.h"

typedef struct trace_span {
    const char *name;
    uint64_t start_ns, end_ns;
    uint32_t core; /* UINT32_MAX for a host span */
    uint32_t run, task;
} trace_span;

struct hg_trace {
    pthread_mutex_t lock;
    uint64_t t0_ns;
    trace_span *spans;
    size_t nspans, cap;
    size_t nhost, ntask;
    uint32_t max_core_plus1;
    intern_table names; /* task span names: the trace's own copies */
};

#define HOST_LANE  UINT32_MAX
#define BUILD_LANE (UINT32_MAX - 1) /* the host's program builds, inside its stages */

int hg_trace_create(hg_trace **out)
{
    if (out == NULL)
        return HG_EINVAL;
    hg_trace *t = calloc(1, sizeof *t);
    if (t == NULL)
        return HG_ENOMEM;
    pthread_mutex_init(&t->lock, NULL);
    t->t0_ns = clock_now_ns();
    *out = t;
    return 0;
}

void hg_trace_destroy(hg_trace *t)
{
    if (t == NULL)
        return;
    pthread_mutex_destroy(&t->lock);
    intern_free(&t->names);
    free(t->spans);
    free(t);
}

/* Appends s; a task span's name is replaced by the trace's copy first. */
static int trace_append(hg_trace *t, trace_span s)
{
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    if (s.core < BUILD_LANE && (s.name = intern_get(&t->names, s.name)) == NULL) {
        rc = HG_ENOMEM;
        goto out;
    }
    if (t->nspans == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        trace_span *grown = realloc(t->spans, cap * sizeof *grown);
        if (grown == NULL) {
            rc = HG_ENOMEM;
            goto out;
        }
        t->spans = grown;
        t->cap = cap;
    }
    t->spans[t->nspans++] = s;
    if (s.core == HOST_LANE) {
        t->nhost++;
    } else if (s.core == BUILD_LANE) {
        /* counted apart: a stage's count stays five a run */
    } else {
        t->ntask++;
        if (s.core + 1 > t->max_core_plus1)
            t->max_core_plus1 = s.core + 1;
    }
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int trace_host_span(hg_trace *t, const char *name, uint32_t run, uint64_t start_ns, uint64_t end_ns)
{
    trace_span s = {name, start_ns, end_ns, HOST_LANE, run, 0};
    return trace_append(t, s);
}

int trace_build_span(hg_trace *t, const char *name, uint32_t run, uint64_t start_ns,
                     uint64_t end_ns)
{
    trace_span s = {name, start_ns, end_ns, BUILD_LANE, run, 0};
    return trace_append(t, s);
}

int trace_task_span(hg_trace *t, uint32_t core, const char *kernel, uint32_t run, uint32_t task,
                    uint64_t start_ns, uint64_t end_ns)
{
    trace_span s = {kernel, start_ns, end_ns, core, run, task};
    return trace_append(t, s);
}

size_t hg_trace_num_host_spans(const hg_trace *t)
{
    return t ? t->nhost : 0;
}

size_t hg_trace_num_task_spans(const hg_trace *t)
{
    return t ? t->ntask : 0;
}

size_t trace_num_names(const hg_trace *t)
{
    return t ? intern_count(&t->names) : 0;
}

static void write_lane_names(FILE *f, const hg_trace *t)
{
    fputs("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"tid\":0,"
          "\"args\":{\"name\":\"host\"}},\n",
          f);
    fputs("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":0,"
          "\"args\":{\"name\":\"stages\"}},\n",
          f);
    fputs("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":1,"
          "\"args\":{\"name\":\"program builds\"}},\n",
          f);
    fputs("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":2,\"tid\":0,"
          "\"args\":{\"name\":\"device\"}}",
          f);
    for (uint32_t c = 0; c < t->max_core_plus1; c++)
        fprintf(f,
                ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":2,\"tid\":%u,"
                "\"args\":{\"name\":\"core %u\"}}",
                c, c);
}

static void write_span(FILE *f, const hg_trace *t, const trace_span *s)
{
    double ts = (double)(s->start_ns - t->t0_ns) / 1000.0;
    double dur = (double)(s->end_ns - s->start_ns) / 1000.0;
    fputs(",\n{\"ph\":\"X\",\"name\":", f);
    json_write_string(f, s->name);
    if (s->core >= BUILD_LANE)
        fprintf(f,
                ",\"cat\":\"%s\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"run\":%u}}",
                s->core == HOST_LANE ? "stage" : "build", s->core == HOST_LANE ? 0 : 1, ts, dur,
                s->run);
    else
        fprintf(f,
                ",\"cat\":\"task\",\"pid\":2,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"run\":%u,\"task\":%u}}",
                s->core, ts, dur, s->run, s->task);
}

void trace_write(const hg_trace *t, FILE *f)
{
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    write_lane_names(f, t);
    for (size_t i = 0; i < t->nspans; i++)
        write_span(f, t, &t->spans[i]);
    fputs("\n]}\n", f);
}

/* Through an outfile: a failed write keeps the file that was at `path`. */
int hg_trace_write_json(const hg_trace *t, const char *path)
{
    if (t == NULL || path == NULL)
        return HG_EINVAL;
    outfile of;
    char why[256];
    if (outfile_open(&of, path, why, sizeof why) != 0)
        return HG_EIO;
    trace_write(t, of.f);
    return outfile_commit(&of, why, sizeof why) == 0 ? 0 : HG_EIO;
}
