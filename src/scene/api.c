/*
 * api.c: the scenes' public entry (include/hostgraph_scenes.h), for the
 * bindings and for applications: the registry, the scene runner with its
 * JSON report, and a scene's case to run with the caller's own runner.
 *
 * It only translates: "KEY=VALUE" params and mode names into a
 * scene_run_opts, the runner's error lines (written to a FILE) into the
 * caller's buffer.  The scene runner and the registry do the work, so the
 * command and these calls cannot drift apart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostgraph_scenes.h"
#include "scene/scene.h"

struct hg_scene_cancel {
    scene_cancel c;
};

int hg_scene_cancel_create(hg_scene_cancel **out)
{
    if (out == NULL)
        return HG_EINVAL;
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return HG_ENOMEM;
    scene_cancel_init(&(*out)->c);
    return 0;
}

void hg_scene_cancel_destroy(hg_scene_cancel *c)
{
    if (c == NULL)
        return;
    scene_cancel_destroy(&c->c);
    free(c);
}

void hg_scene_cancel_request(hg_scene_cancel *c)
{
    if (c != NULL)
        scene_cancel_request(&c->c);
}

/* ---------------------------------------------------------------- registry */

uint32_t hg_scene_count(void)
{
    uint32_t n = 0;
    while (scene_at(n) != NULL)
        n++;
    return n;
}

const char *hg_scene_name(uint32_t i)
{
    const scene *s = scene_at(i);
    return s != NULL ? s->name : NULL;
}

const char *hg_scene_description(uint32_t i)
{
    const scene *s = scene_at(i);
    return s != NULL ? s->description : NULL;
}

const char *hg_scene_file(uint32_t i)
{
    const scene *s = scene_at(i);
    return s != NULL ? s->file : NULL;
}

const char *hg_scene_class(uint32_t i)
{
    const scene *s = scene_at(i);
    return s != NULL ? s->cls : NULL;
}

uint32_t hg_scene_num_params(uint32_t i)
{
    const scene *s = scene_at(i);
    return s != NULL ? s->nparams : 0;
}

int hg_scene_param(uint32_t scene_index, uint32_t param, hg_scene_param_info *out)
{
    const scene *s = scene_at(scene_index);
    if (out == NULL)
        return HG_EINVAL;
    if (s == NULL || param >= s->nparams)
        return HG_ENOTFOUND;
    const scene_param *p = &s->params[param];
    *out = (hg_scene_param_info){.name = p->name,
                                 .def = p->def,
                                 .min = p->min,
                                 .max = p->max,
                                 .def_name = scene_param_value_name(p, p->def),
                                 .help = p->help};
    return 0;
}

/* Copies what the runner wrote to `err` into errbuf, without the final
 * newline.  Closes err and frees its text. */
static void take_messages(FILE *err, char **text, size_t *len, char *errbuf, size_t errlen)
{
    fclose(err);
    size_t n = *text != NULL ? *len : 0;
    while (n > 0 && (*text)[n - 1] == '\n')
        n--;
    if (errbuf != NULL && errlen > 0) {
        if (n >= errlen)
            n = errlen - 1;
        if (n > 0)
            memcpy(errbuf, *text, n);
        errbuf[n] = '\0';
    }
    free(*text);
}

/* Sets up the scene and its params from o; HG_SCENE_USAGE after a line on err. */
static int make_run_opts(const hg_scene_opts *o, bool compare, scene_run_opts *ro, FILE *err)
{
    ro->scene = scene_find(o->scene);
    if (ro->scene == NULL) {
        fprintf(err, "hostgraph: unknown scene '%s'\n", o->scene != NULL ? o->scene : "(null)");
        return HG_SCENE_USAGE;
    }
    scene_params_default(ro->scene, ro->params);
    for (uint32_t i = 0; i < o->nparams; i++) {
        hg_err e;
        err_clear(&e);
        const char *kv = o->params != NULL ? o->params[i] : NULL;
        if (kv == NULL || scene_param_set(ro->scene, ro->params, kv, &e) != 0) {
            fprintf(err, "hostgraph: %s\n", kv == NULL ? "a NULL param" : e.msg);
            return HG_SCENE_USAGE;
        }
    }
    if (o->residency != NULL && scene_residency_parse(o->residency, &ro->residency) != 0) {
        fprintf(err, "hostgraph: residency '%s': want off, pin, in or all\n", o->residency);
        return HG_SCENE_USAGE;
    }
    ro->rounds = o->rounds > 0 ? o->rounds : compare ? SCENE_COMPARE_ROUNDS : 1;
    ro->repeat = o->repeat > 0 ? o->repeat : compare ? SCENE_COMPARE_REPEAT : 1;
    ro->warmup = o->warmup;
    ro->cancel = o->cancel != NULL ? &o->cancel->c : NULL;
    ro->verify = o->verify;
    ro->replay = o->replay;
    ro->skip_golden = o->skip_golden;
    ro->device_spec = o->device;
    ro->json_path = o->json_path;
    ro->trace_path = o->trace_path;
    ro->quiet = false;
    return HG_SCENE_OK;
}

/* Runs the command `compare` or not with o, its error lines into errbuf. */
static int scene_command(const hg_scene_opts *o, bool compare, char *errbuf, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (o == NULL)
        return HG_SCENE_USAGE;
    FILE *err = open_memstream(&text, &len);
    FILE *out = o->print ? stdout : fopen("/dev/null", "w");
    if (err == NULL || out == NULL) {
        if (err != NULL)
            take_messages(err, &text, &len, NULL, 0);
        if (out != NULL && out != stdout)
            fclose(out);
        if (errbuf != NULL && errlen > 0)
            snprintf(errbuf, errlen, "hostgraph: cannot open a stream");
        return HG_SCENE_RUNTIME;
    }
    scene_run_opts ro = {.out = out, .err = err};
    int rc = make_run_opts(o, compare, &ro, err);
    if (rc == HG_SCENE_OK)
        rc = compare ? scene_compare(&ro, o->svg_path) : scene_run(&ro);
    if (out == stdout)
        fflush(stdout);
    else
        fclose(out);
    take_messages(err, &text, &len, errbuf, errlen);
    return rc;
}

int hg_scene_run(const hg_scene_opts *o, char *errbuf, size_t errlen)
{
    return scene_command(o, false, errbuf, errlen);
}

int hg_scene_compare(const hg_scene_opts *o, char *errbuf, size_t errlen)
{
    return scene_command(o, true, errbuf, errlen);
}

/* ------------------------------------------------------------------- cases */

int hg_scene_case_open(const char *name, const char *const *params, uint32_t nparams,
                       hg_scene_case **out, char *errbuf, size_t errlen)
{
    hg_err e;
    err_clear(&e);
    if (out == NULL)
        return HG_EINVAL;
    *out = NULL;
    const scene *s = scene_find(name);
    int64_t values[SCENE_MAX_PARAMS];
    int rc = 0;
    if (s == NULL) {
        rc = err_set(&e, HG_ENOTFOUND, "unknown scene '%s'", name != NULL ? name : "(null)");
    } else {
        scene_params_default(s, values);
        for (uint32_t i = 0; rc == 0 && i < nparams; i++) {
            const char *kv = params != NULL ? params[i] : NULL;
            rc = kv == NULL ? err_set(&e, HG_EINVAL, "a NULL param")
                            : scene_param_set(s, values, kv, &e);
        }
    }
    scene_case *hc = NULL;
    if (rc == 0 && (rc = scene_case_make(s, values, &hc, &e)) != 0 && *e.msg == '\0')
        err_set(&e, rc, "scene '%s': %s", s->name, hg_strerror(rc));
    if (rc != 0) {
        if (errbuf != NULL && errlen > 0)
            snprintf(errbuf, errlen, "%s", *e.msg ? e.msg : hg_strerror(rc));
        return rc;
    }
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    *out = hc;
    return 0;
}

void hg_scene_case_close(hg_scene_case *c)
{
    scene_case_destroy(c);
}

const hg_arg *hg_scene_case_args(const hg_scene_case *c)
{
    return c != NULL ? c->args : NULL;
}

uint32_t hg_scene_case_num_args(const hg_scene_case *c)
{
    return c != NULL ? c->nargs : 0;
}

const hg_callable *hg_scene_case_callable(const hg_scene_case *c)
{
    return c != NULL ? &c->callable : NULL;
}

bool hg_scene_case_check(const hg_scene_case *c, char *msg, size_t msglen)
{
    scene_check_result res;
    if (c == NULL) {
        if (msg != NULL && msglen > 0)
            snprintf(msg, msglen, "no case");
        return false;
    }
    bool pass = scene_case_check(c, &res);
    if (msg == NULL || msglen == 0)
        return pass;
    if (pass)
        snprintf(msg, msglen, "pass: max abs err %g, max rel err %g", res.max_abs_err,
                 res.max_rel_err);
    else
        scene_check_describe(&res, msg, msglen);
    return pass;
}
