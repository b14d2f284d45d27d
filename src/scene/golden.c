/*
 * golden.c: comparing a case's outputs with their golden references.
 *
 * The rule is numpy's allclose: |got - want| <= atol + rtol * |want|, and a
 * NaN never matches.  Outputs are dense host tensors from element 0, so
 * element i of the golden is element i of the host buffer.  A scene may add
 * its own check (scene_case.check) for outputs too large for a golden per
 * element; it runs after these and reports the same way.
 */
#include <math.h>

#include "scene/scene.h"

static double rel_err(double abs_err, double want)
{
    if (abs_err == 0.0)
        return 0.0;
    return want != 0.0 ? abs_err / fabs(want) : INFINITY;
}

/* Checks one output; fills res with its errors and first mismatch. */
static bool check_one(const scene_case *c, const scene_check *k, scene_check_result *res)
{
    const hg_tensor *t = &c->args[k->arg].tensor;
    const void *data = hg_hostbuf_data(t->host);
    res->output = c->args[k->arg].name;
    res->max_abs_err = 0.0;
    res->max_rel_err = 0.0;
    res->first_bad = SIZE_MAX;
    for (size_t i = 0; i < k->numel; i++) {
        double got = hg_dtype_load(t->dtype, data, i);
        double want = k->golden[i];
        double abs_err = fabs(got - want);
        bool ok = abs_err <= k->atol + k->rtol * fabs(want); /* false for NaN */
        if (isnan(abs_err))
            abs_err = INFINITY;
        if (abs_err > res->max_abs_err)
            res->max_abs_err = abs_err;
        double rel = rel_err(abs_err, want);
        if (rel > res->max_rel_err)
            res->max_rel_err = rel;
        if (!ok && res->first_bad == SIZE_MAX)
            res->first_bad = i;
    }
    return res->first_bad == SIZE_MAX;
}

/* Folds a passing output's errors into res: the worst over every output. */
static void note_pass(scene_check_result *res, const scene_check_result *one)
{
    res->output = one->output;
    res->max_abs_err = one->max_abs_err > res->max_abs_err ? one->max_abs_err : res->max_abs_err;
    res->max_rel_err = one->max_rel_err > res->max_rel_err ? one->max_rel_err : res->max_rel_err;
}

bool scene_case_check(const scene_case *c, scene_check_result *res)
{
    res->pass = true;
    res->output = "";
    res->max_abs_err = 0.0;
    res->max_rel_err = 0.0;
    res->first_bad = SIZE_MAX;
    scene_check_result one;
    for (uint32_t i = 0; i < c->nchecks; i++) {
        if (!check_one(c, &c->checks[i], &one)) {
            *res = one;
            res->pass = false;
            return false;
        }
        note_pass(res, &one);
    }
    if (c->check != NULL) {
        one = (scene_check_result){.pass = true, .output = "", .first_bad = SIZE_MAX};
        if (!c->check(c, &one)) {
            *res = one;
            res->pass = false;
            return false;
        }
        note_pass(res, &one);
    }
    return true;
}
