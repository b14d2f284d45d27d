/*
 * trace.h: the internal side of hg_trace.  The runner records host stage
 * spans; the scheduler records a span per task on the core that ran it.
 * Recording is thread-safe (core threads record concurrently).
 */
#ifndef HG_BASE_TRACE_H
#define HG_BASE_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "hostgraph.h"

/* A host stage span: `name` must be a static string ("bind", ...). */
int trace_host_span(hg_trace *t, const char *name, uint32_t run, uint64_t start_ns,
                    uint64_t end_ns);
/* A program build inside a host stage (a queue device's kernel built at
 * submit): `name` static; on a host lane of its own ("program builds"),
 * counted in neither hg_trace_num_host_spans nor _task_spans. */
int trace_build_span(hg_trace *t, const char *name, uint32_t run, uint64_t start_ns,
                     uint64_t end_ns);
/* A task span on device core `core`.  The trace keeps its own copy of
 * `kernel` (interned: one per distinct name), so it need live only for the
 * call.  HG_ENOMEM (the span is not recorded) if host memory ran out. */
int trace_task_span(hg_trace *t, uint32_t core, const char *kernel, uint32_t run, uint32_t task,
                    uint64_t start_ns, uint64_t end_ns);
/* Distinct task span names the trace holds: for tests. */
size_t trace_num_names(const hg_trace *t);
/* Writes the Chrome trace-event JSON to f (hg_trace_write_json's content). */
void trace_write(const hg_trace *t, FILE *f);

#endif
