/*
 * define.c: scenes of the user's own (include/hostgraph_scenes.h, "scene
 * definition"): checking a definition, registering it, loading a plugin,
 * and the builder a make() fills its case with.
 *
 * A definition is checked whole before anything is registered, and a
 * plugin's definitions are registered all or none (registry.c), so a bad
 * table never leaves half a plugin behind.  Plugins stay loaded for the life
 * of the process: their definitions, strings and code are what the registry
 * points into.  load_lock orders loads (it is taken before registry.c's
 * reg_lock, never after).
 */
#define _XOPEN_SOURCE 700 /* realpath, strdup */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene/scene.h"

/* Copies "what went wrong" into the caller's buffer (NULL: none). */
static int report(int rc, const hg_err *e, char *errbuf, size_t errlen)
{
    if (errbuf != NULL && errlen > 0)
        snprintf(errbuf, errlen, "%s", rc != 0 ? e->msg : "");
    return rc;
}

static bool name_ok(const char *s, const char *extra, size_t max)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  strchr(extra, ch) != NULL;
        if (!ok)
            return false;
    }
    return true;
}

static const char scene_name_extra[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ.:-";

/* Named values: a NULL-terminated list of distinct, well-formed names whose
 * values lie in the range, the default among them. */
static int check_values(const char *where, const hg_scene_param_def *p, hg_err *err)
{
    bool has_def = false;
    uint32_t n = 0;
    for (const hg_scene_value *v = p->values; v->name != NULL; v++, n++) {
        if (n == 256)
            return err_set(err, HG_EINVAL, "%s: param '%s': more than 256 names", where, p->name);
        if (!name_ok(v->name, "", 63))
            return err_set(err, HG_EINVAL, "%s: param '%s': value name '%s' is not [a-z0-9_]+",
                           where, p->name, v->name);
        if (v->value < p->min || v->value > p->max)
            return err_set(err, HG_EINVAL, "%s: param '%s': '%s' = %lld is outside [%lld, %lld]",
                           where, p->name, v->name, (long long)v->value, (long long)p->min,
                           (long long)p->max);
        for (const hg_scene_value *w = p->values; w != v; w++) {
            if (strcmp(w->name, v->name) == 0 || w->value == v->value)
                return err_set(err, HG_EINVAL, "%s: param '%s': '%s' and '%s' collide", where,
                               p->name, w->name, v->name);
        }
        has_def = has_def || v->value == p->def;
    }
    if (n == 0 || !has_def)
        return err_set(err, HG_EINVAL, "%s: param '%s': its default %lld is not one of its names",
                       where, p->name, (long long)p->def);
    return 0;
}

/* Whether key (a name or an alias) is taken by params [0, upto). */
static bool key_taken(const hg_scene_param_def *params, uint32_t upto, const char *key)
{
    for (uint32_t i = 0; i < upto; i++) {
        if (strcmp(params[i].name, key) == 0 ||
            (params[i].alias != NULL && strcmp(params[i].alias, key) == 0))
            return true;
    }
    return false;
}

static int check_param(const char *where, const hg_scene_param_def *params, uint32_t i, hg_err *err)
{
    const hg_scene_param_def *p = &params[i];
    if (!name_ok(p->name, "", 63))
        return err_set(err, HG_EINVAL, "%s: param %u: name '%s' is not [a-z0-9_]+ (1-63 bytes)",
                       where, i, p->name != NULL ? p->name : "(null)");
    if (p->alias != NULL && (!name_ok(p->alias, "", 63) || strcmp(p->alias, p->name) == 0))
        return err_set(err, HG_EINVAL, "%s: param '%s': alias '%s' is not a second [a-z0-9_]+ name",
                       where, p->name, p->alias);
    if (key_taken(params, i, p->name) || (p->alias != NULL && key_taken(params, i, p->alias)))
        return err_set(err, HG_EINVAL, "%s: param '%s': its name or alias is taken twice", where,
                       p->name);
    if (p->min > p->max)
        return err_set(err, HG_EINVAL, "%s: param '%s': min %lld > max %lld", where, p->name,
                       (long long)p->min, (long long)p->max);
    if (p->def < p->min || p->def > p->max)
        return err_set(err, HG_EINVAL, "%s: param '%s': default %lld is outside [%lld, %lld]",
                       where, p->name, (long long)p->def, (long long)p->min, (long long)p->max);
    return p->values != NULL ? check_values(where, p, err) : 0;
}

/* Checks a definition as the registry needs it.  `where` names it in
 * messages: the scene, and the plugin's file when loading one. */
static int check_def(const hg_scene_def *d, const char *file, hg_err *err)
{
    const char *in = file != NULL ? file : "hg_scene_register";
    if (d == NULL)
        return err_set(err, HG_EINVAL, "%s: def is NULL", in);
    if (d->version != HG_SCENE_DEF_VERSION)
        return err_set(err, HG_EINVAL,
                       "%s: scene definition version %u; this library reads version %u "
                       "(rebuild against this hostgraph_scenes.h)",
                       in, d->version, HG_SCENE_DEF_VERSION);
    if (d->size != sizeof(hg_scene_def))
        return err_set(err, HG_EINVAL,
                       "%s: scene definition of %u bytes; version %u's is %zu bytes (rebuild "
                       "against this hostgraph_scenes.h)",
                       in, d->size, HG_SCENE_DEF_VERSION, sizeof(hg_scene_def));
    if (!name_ok(d->name, scene_name_extra, 127))
        return err_set(err, HG_EINVAL, "%s: scene name '%s' is not [A-Za-z0-9_.:-]+ (1-127 bytes)",
                       in, d->name != NULL ? d->name : "(null)");
    char where[300];
    snprintf(where, sizeof where, "%s%sscene '%s'", file != NULL ? file : "",
             file != NULL ? ": " : "", d->name);
    if (d->make == NULL)
        return err_set(err, HG_EINVAL, "%s: make is NULL", where);
    if (d->nparams > HG_SCENE_MAX_PARAMS)
        return err_set(err, HG_EINVAL, "%s: %u params, at most %d", where, d->nparams,
                       HG_SCENE_MAX_PARAMS);
    if (d->nparams > 0 && d->params == NULL)
        return err_set(err, HG_EINVAL, "%s: %u params but params is NULL", where, d->nparams);
    for (uint32_t i = 0; i < d->nparams; i++) {
        int rc = check_param(where, d->params, i, err);
        if (rc != 0)
            return rc;
    }
    for (uint32_t i = 0; d->host_reads != NULL && d->host_reads[i] != NULL; i++) {
        if (i == HG_SCENE_MAX_ARGS || d->host_reads[i][0] == '\0')
            return err_set(err, HG_EINVAL, "%s: host_reads: more than %d names, or an empty one",
                           where, HG_SCENE_MAX_ARGS);
    }
    return 0;
}

int hg_scene_register(const hg_scene_def *def, char *errbuf, size_t errlen)
{
    hg_err e;
    err_clear(&e);
    int rc = check_def(def, NULL, &e);
    if (rc == 0)
        rc = scene_register_all(&def, 1, NULL, &e);
    return report(rc, &e, errbuf, errlen);
}

int hg_scene_unregister(const char *name, char *errbuf, size_t errlen)
{
    hg_err e;
    err_clear(&e);
    return report(scene_unregister(name, &e), &e, errbuf, errlen);
}

/* ------------------------------------------------------------------ plugins */

/* The plugins loaded so far, by real path: loading one again is a no-op.
 * Their handles stay open and their paths allocated until the process ends. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static char **loaded;
static uint32_t nloaded, caploaded;

static bool was_loaded(const char *real)
{
    for (uint32_t i = 0; i < nloaded; i++) {
        if (strcmp(loaded[i], real) == 0)
            return true;
    }
    return false;
}

static int note_loaded(char *real, hg_err *err)
{
    if (nloaded == caploaded) {
        uint32_t ncap = caploaded ? 2 * caploaded : 8;
        char **grown = realloc(loaded, ncap * sizeof *grown);
        if (grown == NULL)
            return err_set(err, HG_ENOMEM, "out of host memory");
        loaded = grown;
        caploaded = ncap;
    }
    loaded[nloaded++] = real;
    return 0;
}

/* Reads the plugin's NULL-terminated list: every definition checked, no
 * name twice within it.  The count goes to *n. */
static int plugin_defs(const char *path, const hg_scene_def *const *defs, uint32_t *n, hg_err *err)
{
    if (defs == NULL)
        return err_set(err, HG_EINVAL, "%s: %s() returned NULL (an empty list ends with NULL)",
                       path, HG_SCENE_PLUGIN_SYMBOL);
    uint32_t k = 0;
    for (; defs[k] != NULL; k++) {
        if (k == 64)
            return err_set(err, HG_ELIMIT, "%s: more than 64 scenes", path);
        int rc = check_def(defs[k], path, err);
        if (rc != 0)
            return rc;
        for (uint32_t j = 0; j < k; j++) {
            if (strcmp(defs[j]->name, defs[k]->name) == 0)
                return err_set(err, HG_EINVAL, "%s: scene '%s' is defined twice", path,
                               defs[k]->name);
        }
    }
    *n = k;
    return 0;
}

/* dlopen and register, under load_lock.  On success the handle and the
 * paths stay. */
static int load_locked(const char *path, char *real, uint32_t *count, hg_err *err)
{
    if (was_loaded(real))
        return 0;
    dlerror();
    /* The resolved path: dlopen would search the library path for a name
     * without a slash ("libscene_x.so"), not the directory it names. */
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return err_set(err, HG_EIO, "cannot load scene plugin '%s': %s", path, dlerror());
    hg_scene_plugin_fn fn = NULL;
    void *sym = dlsym(h, HG_SCENE_PLUGIN_SYMBOL);
    memcpy(&fn, &sym, sizeof fn); /* ISO C has no object-to-function cast */
    int rc = 0;
    uint32_t n = 0;
    char *file = NULL;
    if (fn == NULL)
        rc = err_set(err, HG_ENOTFOUND, "%s: no symbol '%s' (a scene plugin exports it)", path,
                     HG_SCENE_PLUGIN_SYMBOL);
    const hg_scene_def *const *defs = rc == 0 ? fn() : NULL;
    if (rc == 0)
        rc = plugin_defs(path, defs, &n, err);
    if (rc == 0 && (file = strdup(path)) == NULL)
        rc = err_set(err, HG_ENOMEM, "out of host memory");
    if (rc == 0)
        rc = scene_register_all(defs, n, file, err);
    if (rc == 0 && (rc = note_loaded(real, err)) != 0) {
        for (uint32_t i = 0; i < n; i++)
            scene_unregister(defs[i]->name, NULL);
    }
    if (rc != 0) {
        free(file);
        dlclose(h);
        return rc;
    }
    *count = n;
    return 0;
}

int hg_scene_load(const char *path, uint32_t *count, char *errbuf, size_t errlen)
{
    hg_err e;
    err_clear(&e);
    uint32_t n = 0;
    if (count != NULL)
        *count = 0;
    if (path == NULL || *path == '\0')
        return report(err_set(&e, HG_EINVAL, "path: NULL or empty"), &e, errbuf, errlen);
    char *real = realpath(path, NULL);
    if (real == NULL)
        return report(
            err_set(&e, HG_EIO, "cannot load scene plugin '%s': %s", path, strerror(errno)), &e,
            errbuf, errlen);
    pthread_mutex_lock(&load_lock);
    bool again = was_loaded(real);
    int rc = load_locked(path, real, &n, &e);
    pthread_mutex_unlock(&load_lock);
    if (rc != 0 || again)
        free(real);
    if (count != NULL)
        *count = n;
    return report(rc, &e, errbuf, errlen);
}

/* ------------------------------------------------------ the case builder */

/* The builder adds args and checks only while make() runs: a case handed
 * out is complete. */
static hg_err *making(hg_scene_case *c)
{
    return c != NULL ? c->err : NULL;
}

/* A new arg's name, checked (not empty, not the case's already) and
 * copied: the case frees it. */
static int copy_name(const hg_scene_case *c, const char *call, const char *name, hg_err *err,
                     char **out)
{
    if (name == NULL || *name == '\0')
        return err_set(err, HG_EINVAL, "%s: name is NULL or empty", call);
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (strcmp(c->args[i].name, name) == 0)
            return err_set(err, HG_EINVAL, "arg '%s': the case has one already", name);
    }
    if ((*out = strdup(name)) == NULL)
        return err_set(err, HG_ENOMEM, "arg '%s': out of host memory", name);
    return 0;
}

/* After the internal add (rc): the case keeps the copied name of arg
 * `index`, or it is freed. */
static int adopt_name(hg_scene_case *c, int rc, char *copy, uint32_t index, uint32_t *arg)
{
    if (rc != 0) {
        free(copy);
        return rc;
    }
    c->names[index] = copy;
    if (arg != NULL)
        *arg = index;
    return 0;
}

int hg_scene_case_add_tensor(hg_scene_case *c, const char *name, hg_dir dir, hg_dtype dtype,
                             uint32_t ndims, const size_t *shape, uint32_t *arg)
{
    hg_err *err = making(c);
    if (err == NULL)
        return HG_EINVAL; /* no make() in flight */
    if (dir != HG_IN && dir != HG_OUT && dir != HG_INOUT)
        return err_set(err, HG_EINVAL, "arg '%s': dir must be HG_IN, HG_OUT or HG_INOUT",
                       name != NULL ? name : "(null)");
    if (hg_dtype_size(dtype) == 0)
        return err_set(err, HG_EINVAL, "arg '%s': unknown dtype %d", name != NULL ? name : "(null)",
                       (int)dtype);
    if (ndims == 0 || ndims > HG_MAX_DIMS || shape == NULL)
        return err_set(err, HG_EINVAL, "arg '%s': ndims %u (1-%d) or shape NULL",
                       name != NULL ? name : "(null)", ndims, HG_MAX_DIMS);
    char *copy;
    int rc = copy_name(c, "hg_scene_case_add_tensor", name, err, &copy);
    if (rc != 0)
        return rc;
    uint32_t index = c->nargs;
    rc = scene_case_add_tensor(c, copy, dir, dtype, ndims, shape, &index, err);
    return adopt_name(c, rc, copy, index, arg);
}

int hg_scene_case_add_scalar(hg_scene_case *c, const char *name, uint64_t value, uint32_t *arg)
{
    hg_err *err = making(c);
    if (err == NULL)
        return HG_EINVAL; /* no make() in flight */
    char *copy;
    int rc = copy_name(c, "hg_scene_case_add_scalar", name, err, &copy);
    if (rc != 0)
        return rc;
    uint32_t index = c->nargs;
    rc = scene_case_add_scalar(c, copy, value, err);
    return adopt_name(c, rc, copy, index, arg);
}

void *hg_scene_case_data(hg_scene_case *c, uint32_t arg)
{
    if (c == NULL || arg >= c->nargs || c->args[arg].dir == HG_SCALAR)
        return NULL;
    return scene_case_data(c, arg);
}

/* A tensor arg of the case, or an error naming the call. */
static int tensor_arg(hg_scene_case *c, uint32_t arg, const char *call, hg_err *err)
{
    if (arg >= c->nargs)
        return err_set(err, HG_EINVAL, "%s: arg %u, the case has %u", call, arg, c->nargs);
    if (c->args[arg].dir == HG_SCALAR)
        return err_set(err, HG_EINVAL, "%s: arg '%s' is a scalar", call, c->args[arg].name);
    return 0;
}

int hg_scene_case_fill(hg_scene_case *c, uint32_t arg, uint64_t seed, int span, double scale)
{
    hg_err *err = making(c);
    if (err == NULL)
        return HG_EINVAL; /* no make() in flight */
    int rc = tensor_arg(c, arg, "hg_scene_case_fill", err);
    if (rc != 0)
        return rc;
    if (span < 0 || span > (1 << 30) || !isfinite(scale))
        return err_set(err, HG_EINVAL, "arg '%s': fill span %d (0-2^30) or scale %g",
                       c->args[arg].name, span, scale);
    return scene_fill(c, arg, seed, span, scale);
}

int hg_scene_case_add_check(hg_scene_case *c, uint32_t arg, double rtol, double atol,
                            double **golden)
{
    hg_err *err = making(c);
    if (err == NULL)
        return HG_EINVAL; /* no make() in flight */
    int rc = tensor_arg(c, arg, "hg_scene_case_add_check", err);
    if (rc != 0)
        return rc;
    const char *name = c->args[arg].name;
    if (c->args[arg].dir == HG_IN)
        return err_set(err, HG_EINVAL, "arg '%s': an IN arg is not an output to check", name);
    if (!(rtol >= 0.0) || !(atol >= 0.0) || !isfinite(rtol) || !isfinite(atol))
        return err_set(err, HG_EINVAL, "arg '%s': rtol %g and atol %g must be finite and >= 0",
                       name, rtol, atol);
    if (golden == NULL)
        return err_set(err, HG_EINVAL, "arg '%s': golden is NULL", name);
    for (uint32_t i = 0; i < c->nchecks; i++) {
        if (c->checks[i].arg == arg)
            return err_set(err, HG_EINVAL, "arg '%s' is checked already", name);
    }
    return scene_case_add_check(c, arg, rtol, atol, golden, err);
}

int hg_scene_case_set_callable(hg_scene_case *c, const hg_callable *callable)
{
    hg_err *err = making(c);
    if (err == NULL)
        return HG_EINVAL; /* no make() in flight */
    if (callable == NULL || callable->orchestrate == NULL)
        return err_set(err, HG_EINVAL,
                       "hg_scene_case_set_callable: callable or its "
                       "orchestrate is NULL");
    c->callable = *callable;
    return 0;
}

void hg_scene_case_set_state(hg_scene_case *c, void *state)
{
    if (c != NULL)
        c->state = state;
}

void *hg_scene_case_state(const hg_scene_case *c)
{
    return c != NULL ? c->state : NULL;
}

int64_t *hg_scene_case_params(hg_scene_case *c)
{
    return c != NULL ? c->params : NULL;
}

void hg_scene_case_tp(const hg_scene_case *c, uint32_t *rank, uint32_t *size)
{
    uint32_t r = 0, n = 1;
    if (c != NULL && c->tp != NULL) {
        r = c->tp->rank;
        n = c->tp->size;
    }
    if (rank != NULL)
        *rank = r;
    if (size != NULL)
        *size = n;
}

int hg_scene_case_fail(hg_scene_case *c, int code, const char *fmt, ...)
{
    if (code >= 0)
        code = HG_EINVAL; /* a failure is never 0 */
    if (c == NULL || c->err == NULL || fmt == NULL)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err->msg, sizeof c->err->msg, fmt, ap);
    va_end(ap);
    c->err->code = code;
    return code;
}
