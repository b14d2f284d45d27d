/*
 * one_arg.h: the OpenCL run tests' fixture: a device (backend[:keys]), a
 * runner, and one INOUT arg "x" of n int32 elements in a host buffer.
 */
#ifndef HG_TEST_ONE_ARG_H
#define HG_TEST_ONE_ARG_H

#include <string.h>

#include "test_device.h"

typedef struct test_one_arg {
    hg_device *dev;
    hg_runner *r;
    hg_hostbuf *hb;
    hg_arg arg;
} test_one_arg;

/* False (the cause printed by test_backend_open, or a failed call) if any
 * part cannot be made; test_one_arg_close frees what was. */
static inline bool test_one_arg_open(test_one_arg *f, const char *backend, const char *keys,
                                     size_t n)
{
    bool skipped;
    memset(f, 0, sizeof *f);
    f->dev = test_backend_open(backend, keys, &skipped);
    if (f->dev == NULL || hg_runner_open(f->dev, &f->r) != 0 ||
        hg_hostbuf_create(n * sizeof(int32_t), &f->hb) != 0)
        return false;
    f->arg = (hg_arg){.name = "x", .dir = HG_INOUT};
    return hg_tensor_host(&f->arg.tensor, f->hb, HG_I32, 1, &n) == 0;
}

static inline void test_one_arg_close(test_one_arg *f)
{
    hg_runner_close(f->r);
    hg_hostbuf_destroy(f->hb);
    hg_device_close(f->dev);
}

#endif
