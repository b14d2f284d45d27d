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

scene_check_result scene_check_start(const char *output)
{
    return (scene_check_result){
        .pass = true, .output = output, .first_bad = SIZE_MAX, .worst = SIZE_MAX};
}

void scene_check_note(scene_check_result *res, size_t i, double got, double want, double rtol,
                      double atol)
{
    double abs_err = fabs(got - want);
    double tol = atol + rtol * fabs(want);
    bool ok = abs_err <= tol; /* false for NaN */
    if (isnan(abs_err))
        abs_err = INFINITY;
    if (abs_err > res->max_abs_err)
        res->max_abs_err = abs_err;
    double rel = rel_err(abs_err, want);
    if (rel > res->max_rel_err)
        res->max_rel_err = rel;
    if (!ok && i < res->first_bad)
        res->first_bad = i;
    double score = abs_err == 0.0 ? 0.0 : tol > 0.0 ? abs_err / tol : INFINITY;
    if (isnan(got - want))
        score = INFINITY;
    if (res->worst == SIZE_MAX || score > res->worst_score) {
        res->worst = i;
        res->worst_got = got;
        res->worst_want = want;
        res->worst_score = score;
    }
}

void scene_check_describe(const scene_check_result *res, char *out, size_t len)
{
    int n = snprintf(out, len,
                     "golden mismatch in output '%s': max abs err %g, max rel err %g, first "
                     "mismatch at index %zu",
                     res->output, res->max_abs_err, res->max_rel_err, res->first_bad);
    if (res->worst != SIZE_MAX && n >= 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, "; worst at index %zu: got %.9g, want %.9g", res->worst,
                 res->worst_got, res->worst_want);
}

/* Checks one output; fills res with its errors, first mismatch and worst
 * element. */
static bool check_one(const scene_case *c, const scene_check *k, scene_check_result *res)
{
    const hg_tensor *t = &c->args[k->arg].tensor;
    const void *data = hg_hostbuf_data(t->host);
    *res = scene_check_start(c->args[k->arg].name);
    for (size_t i = 0; i < k->numel; i++)
        scene_check_note(res, i, hg_dtype_load(t->dtype, data, i), k->golden[i], k->rtol, k->atol);
    return res->first_bad == SIZE_MAX;
}

/* Folds a passing output's errors into res: the worst over every output. */
static void note_pass(scene_check_result *res, const scene_check_result *one)
{
    res->output = one->output;
    res->max_abs_err = one->max_abs_err > res->max_abs_err ? one->max_abs_err : res->max_abs_err;
    res->max_rel_err = one->max_rel_err > res->max_rel_err ? one->max_rel_err : res->max_rel_err;
    if (one->worst != SIZE_MAX && (res->worst == SIZE_MAX || one->worst_score > res->worst_score)) {
        res->worst = one->worst;
        res->worst_got = one->worst_got;
        res->worst_want = one->worst_want;
        res->worst_score = one->worst_score;
    }
}

bool scene_case_check(const scene_case *c, scene_check_result *res)
{
    *res = scene_check_start("");
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
        one = scene_check_start("");
        if (!c->check(c, &one)) {
            *res = one;
            res->pass = false;
            return false;
        }
        note_pass(res, &one);
    }
    return true;
}
