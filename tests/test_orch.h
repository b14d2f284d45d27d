/*
 * test_orch.h: the orchestration most run tests need: one task of a given
 * kernel over run args 0 (read) and 1 (written, as its direction says).
 */
#ifndef HG_TEST_ORCH_H
#define HG_TEST_ORCH_H

#include "hostgraph.h"

/* Task args over the whole of run args 0 (IN) and 1 (its own direction). */
static inline void test_pair_args(hg_orch *o, hg_task_arg ta[2])
{
    const hg_arg *in, *out;
    hg_orch_arg(o, 0, &in);
    hg_orch_arg(o, 1, &out);
    ta[0] = (hg_task_arg){0, HG_IN, in->tensor};
    ta[1] = (hg_task_arg){1, out->dir, out->tensor};
}

/* Submits `kernel` over test_pair_args. */
static inline int test_submit_pair(hg_orch *o, const hg_kernel *kernel)
{
    hg_task_arg ta[2];
    test_pair_args(o, ta);
    hg_task_desc d = {kernel, ta, 2, NULL, 0, NULL, 0};
    return hg_task_submit(o, &d, NULL);
}

#endif
