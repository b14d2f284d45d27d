/*
 * registry.c: the table of scenes, their params, and the life of a case.
 *
 * Invariants: a case owns the host buffer of every tensor arg it holds and
 * the golden array of every check; scene_case_destroy frees exactly those
 * (and the scene's private state through scene->destroy).  A half-made case
 * is destroyed the same way, so make() can fail at any point without leaks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene/scene.h"
#include "tensor/checked.h"

/* The built-in scenes: an explicit table, because the library is static
 * (constructor registration in the scene files would be dropped when
 * nothing references them).  They are hg_scene_defs, as a plugin's are. */
static const scene *const builtin[] = {
    &scene_vector_add,
    &scene_bgemm,
    &scene_paged_attention,
    &scene_qwen3_decode,
};

#define BUILTIN_COUNT (uint32_t)(sizeof builtin / sizeof builtin[0])

/*
 * The scenes registered at run time (hg_scene_register, plugins): entries in
 * registration order.  An entry is never freed: an unregistered one moves to
 * `gone` (where it stays reachable), so a `const scene *` handed out earlier
 * never dangles, and a case made from it (refs) keeps it registered.
 * Lookups are linear: a process holds a few scenes, and a run looks its
 * scene up once.  reg_lock guards every field below and every entry's refs
 * and gone; it is a leaf lock (nothing is called while it is held).
 */
typedef struct scene_entry {
    hg_scene_def def; /* first: a registered scene * is its entry */
    uint32_t refs;    /* cases made from it and not yet destroyed */
    bool gone;        /* unregistered: found no more */
} scene_entry;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static scene_entry **reg, **gone;
static uint32_t nreg, capreg, ngone, capgone;

const scene *scene_at(uint32_t i)
{
    if (i < BUILTIN_COUNT)
        return builtin[i];
    pthread_mutex_lock(&reg_lock);
    const scene *s = i - BUILTIN_COUNT < nreg ? &reg[i - BUILTIN_COUNT]->def : NULL;
    pthread_mutex_unlock(&reg_lock);
    return s;
}

/* Under reg_lock. */
static const scene *find_locked(const char *name)
{
    for (uint32_t i = 0; i < BUILTIN_COUNT; i++) {
        if (strcmp(builtin[i]->name, name) == 0)
            return builtin[i];
    }
    for (uint32_t i = 0; i < nreg; i++) {
        if (strcmp(reg[i]->def.name, name) == 0)
            return &reg[i]->def;
    }
    return NULL;
}

const scene *scene_find(const char *name)
{
    if (name == NULL)
        return NULL;
    pthread_mutex_lock(&reg_lock);
    const scene *s = find_locked(name);
    pthread_mutex_unlock(&reg_lock);
    return s;
}

/* The entry a scene is, under reg_lock: NULL for a built-in scene (or a
 * test's own, never registered); they need no hold. */
static scene_entry *entry_locked(const scene *s)
{
    for (uint32_t i = 0; i < nreg; i++) {
        if (&reg[i]->def == s)
            return reg[i];
    }
    for (uint32_t i = 0; i < ngone; i++) {
        if (&gone[i]->def == s)
            return gone[i];
    }
    return NULL;
}

/* Takes a case's hold on a registered scene: false once it is unregistered. */
static bool scene_hold(const scene *s)
{
    pthread_mutex_lock(&reg_lock);
    scene_entry *e = entry_locked(s);
    bool live = e == NULL || !e->gone;
    if (e != NULL && live)
        e->refs++;
    pthread_mutex_unlock(&reg_lock);
    return live;
}

static void scene_unhold(const scene *s)
{
    pthread_mutex_lock(&reg_lock);
    scene_entry *e = entry_locked(s);
    if (e != NULL)
        e->refs--;
    pthread_mutex_unlock(&reg_lock);
}

static bool push(scene_entry ***list, uint32_t *n, uint32_t *cap, scene_entry *e)
{
    if (*n == *cap) {
        uint32_t ncap = *cap ? 2 * *cap : 8;
        scene_entry **grown = realloc(*list, ncap * sizeof *grown);
        if (grown == NULL)
            return false;
        *list = grown;
        *cap = ncap;
    }
    (*list)[(*n)++] = e;
    return true;
}

int scene_register_all(const hg_scene_def *const *defs, uint32_t n, const char *file, hg_err *err)
{
    scene_entry *made[64];
    if (n > 64)
        return err_set(err, HG_ELIMIT, "%s: %u scenes, at most 64 a call", file, n);
    for (uint32_t i = 0; i < n; i++) {
        if ((made[i] = calloc(1, sizeof *made[i])) == NULL) {
            for (uint32_t j = 0; j < i; j++)
                free(made[j]);
            return err_set(err, HG_ENOMEM, "out of host memory");
        }
        made[i]->def = *defs[i];
        if (made[i]->def.description == NULL)
            made[i]->def.description = "";
        if (made[i]->def.file == NULL)
            made[i]->def.file = file;
    }
    int rc = 0;
    pthread_mutex_lock(&reg_lock);
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        const char *name = made[i]->def.name;
        if (find_locked(name) != NULL)
            rc = err_set(err, HG_EINVAL, "scene '%s' is already registered%s%s", name,
                         file != NULL ? ": " : "", file != NULL ? file : "");
    }
    uint32_t added = 0;
    while (rc == 0 && added < n) {
        if (!push(&reg, &nreg, &capreg, made[added]))
            rc = err_set(err, HG_ENOMEM, "out of host memory");
        else
            added++;
    }
    if (rc != 0)
        nreg -= added; /* none of them, then */
    pthread_mutex_unlock(&reg_lock);
    for (uint32_t i = 0; rc != 0 && i < n; i++)
        free(made[i]);
    return rc;
}

int scene_unregister(const char *name, hg_err *err)
{
    if (name == NULL)
        return err_set(err, HG_EINVAL, "name: NULL");
    int rc = 0;
    pthread_mutex_lock(&reg_lock);
    uint32_t i = 0;
    while (i < nreg && strcmp(reg[i]->def.name, name) != 0)
        i++;
    scene_entry *e = i < nreg ? reg[i] : NULL;
    if (e == NULL)
        rc = err_set(err, HG_ENOTFOUND, "scene '%s' is not one hg_scene_register added", name);
    else if (e->refs > 0)
        rc = err_set(err, HG_EINVAL, "scene '%s' is in use: %u case%s made from it still open",
                     name, e->refs, e->refs == 1 ? "" : "s");
    else if (!push(&gone, &ngone, &capgone, e))
        rc = err_set(err, HG_ENOMEM, "out of host memory");
    if (rc == 0) {
        e->gone = true;
        memmove(&reg[i], &reg[i + 1], (nreg - i - 1) * sizeof reg[0]);
        nreg--;
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

/* Edit distance (insertions, deletions, substitutions) between a and b,
 * stopping at 9: names are short. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64)
        return 9;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const scene *scene_suggest(const char *name)
{
    const scene *best = NULL;
    size_t best_d = 3; /* at most two edits away, or a prefix of the name */
    const scene *s;
    for (uint32_t i = 0; name != NULL && *name != '\0' && (s = scene_at(i)) != NULL; i++) {
        const char *n = s->name;
        size_t d = strncmp(n, name, strlen(name)) == 0 ? 1 : edit_distance(name, n);
        if (d < best_d) {
            best = s;
            best_d = d;
        }
    }
    return best;
}

void scene_params_default(const scene *s, int64_t *params)
{
    for (uint32_t i = 0; i < s->nparams; i++)
        params[i] = s->params[i].def;
}

static bool key_is(const char *name, const char *key, size_t keylen)
{
    return name != NULL && strlen(name) == keylen && strncmp(name, key, keylen) == 0;
}

static int param_index(const scene *s, const char *key, size_t keylen)
{
    for (uint32_t i = 0; i < s->nparams; i++) {
        if (key_is(s->params[i].name, key, keylen) || key_is(s->params[i].alias, key, keylen))
            return (int)i;
    }
    return -1;
}

/* Decimal only: "1e6" or "0x10" in a param is far more likely a typo than
 * intent, and rejecting it keeps the accepted syntax one rule. */
static bool parse_int64(const char *text, int64_t *out)
{
    char *end = NULL;
    if (*text == '\0' || strchr(" \t\n+", *text) != NULL)
        return false;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0')
        return false;
    *out = (int64_t)v;
    return true;
}

bool scene_param_zero_is_preset(const scene_param *p)
{
    return p->values == NULL && p->min <= 0 && p->help != NULL &&
           strstr(p->help, "(0: the preset's") != NULL;
}

const char *scene_param_value_name(const scene_param *p, int64_t v)
{
    for (const scene_param_value *n = p->values; n != NULL && n->name != NULL; n++) {
        if (n->value == v)
            return n->name;
    }
    return NULL;
}

/* A named param's value: exactly one of its names, nothing else.  Accepting
 * the integers behind the names too would make "preset=1" a second spelling
 * that nothing documents. */
static int parse_named(const scene_param *p, const char *text, int64_t *out, hg_err *err)
{
    char names[256] = "";
    size_t len = 0;
    for (const scene_param_value *n = p->values; n->name != NULL; n++) {
        if (strcmp(n->name, text) == 0) {
            *out = n->value;
            return 0;
        }
        int w = snprintf(names + len, sizeof names - len, "%s%s", len > 0 ? ", " : "", n->name);
        if (w > 0 && (size_t)w < sizeof names - len)
            len += (size_t)w;
    }
    return err_set(err, HG_EINVAL, "param '%s': '%s' is not one of %s", p->name, text, names);
}

int scene_param_set(const scene *s, int64_t *params, const char *key_value, hg_err *err)
{
    const char *eq = strchr(key_value, '=');
    if (eq == NULL || eq == key_value)
        return err_set(err, HG_EINVAL, "param '%s': expected KEY=VALUE", key_value);
    size_t keylen = (size_t)(eq - key_value);
    int i = param_index(s, key_value, keylen);
    if (i < 0)
        return err_set(err, HG_ENOTFOUND, "scene '%s' has no param '%.*s'", s->name, (int)keylen,
                       key_value);
    const scene_param *p = &s->params[i];
    int64_t v;
    if (p->values != NULL) {
        int rc = parse_named(p, eq + 1, &v, err);
        if (rc != 0)
            return rc;
    } else if (!parse_int64(eq + 1, &v))
        return err_set(err, HG_EINVAL, "param '%s': '%s' is not an integer", p->name, eq + 1);
    if (v < p->min || v > p->max)
        return err_set(err, HG_ERANGE, "param '%s': %lld is outside [%lld, %lld]", p->name,
                       (long long)v, (long long)p->min, (long long)p->max);
    params[i] = v;
    return 0;
}

/* scenes/kernels/kernels.h's (not on the runner's include path): HG_KERNELS
 * names a path the CPU has, or is unset. */
int kern_env_check(char *msg, size_t len);

int scene_case_make(const scene *s, const int64_t *params, scene_case **out, hg_err *err)
{
    return scene_case_make_tp(s, params, NULL, out, err);
}

/* A made case's inputs were written in place (scene_case_data): their
 * generations move, as a write through the API would move them. */
static int mark_made(scene_case *c, hg_err *err)
{
    for (uint32_t i = 0; i < c->nargs; i++) {
        const hg_arg *a = &c->args[i];
        if (a->dir == HG_SCALAR)
            continue;
        int rc = hg_hostbuf_mark_written(a->tensor.host, 0, hg_hostbuf_size(a->tensor.host));
        if (rc != 0)
            return err_set(err, rc, "arg '%s': %s", a->name, hg_strerror(rc));
    }
    return 0;
}

int scene_case_make_tp(const scene *s, const int64_t *params, const scene_tp *tp, scene_case **out,
                       hg_err *err)
{
    hg_err local;
    if (err == NULL)
        err = &local;
    err_clear(err);
    *out = NULL;
    char kmsg[160];
    if (kern_env_check(kmsg, sizeof kmsg) != 0) /* before the case: a usage error */
        return err_set(err, HG_EINVAL, "%s", kmsg);
    if (scene_tp_on(tp) && !s->splits)
        return err_set(err, HG_EINVAL, "--tp %u: scene '%s' cannot split across ranks", tp->size,
                       s->name);
    for (uint32_t i = 0; i < s->nparams; i++) {
        const scene_param *p = &s->params[i];
        if (params[i] < p->min || params[i] > p->max)
            return err_set(err, HG_ERANGE, "param '%s': %lld is outside [%lld, %lld]", p->name,
                           (long long)params[i], (long long)p->min, (long long)p->max);
    }
    if (!scene_hold(s))
        return err_set(err, HG_ENOTFOUND, "scene '%s' was unregistered", s->name);
    scene_case *c = calloc(1, sizeof *c);
    if (c == NULL) {
        scene_unhold(s);
        return err_set(err, HG_ENOMEM, "scene '%s': out of host memory", s->name);
    }
    c->scene = s;
    c->tp = scene_tp_on(tp) ? tp : NULL;
    memcpy(c->params, params, s->nparams * sizeof params[0]);
    c->err = err;
    int rc = s->make(c, params, s->user);
    c->err = NULL;
    if (rc > 0) /* a make() that returns a positive number still failed */
        rc = HG_EINVAL;
    if (rc == 0)
        rc = mark_made(c, err);
    else if (*err->msg == '\0')
        err_set(err, rc, "scene '%s': make failed: %s", s->name, hg_strerror(rc));
    if (rc != 0) {
        scene_case_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

void scene_case_destroy(scene_case *c)
{
    if (c == NULL)
        return;
    if (c->scene->destroy != NULL)
        c->scene->destroy(c, c->scene->user);
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (c->args[i].dir != HG_SCALAR)
            hg_hostbuf_destroy(c->args[i].tensor.host);
        free(c->names[i]);
    }
    for (uint32_t i = 0; i < c->nchecks; i++)
        free(c->checks[i].golden);
    scene_unhold(c->scene);
    free(c);
}

int scene_case_add_tensor(scene_case *c, const char *name, hg_dir dir, hg_dtype dtype,
                          uint32_t ndims, const size_t *shape, uint32_t *arg, hg_err *err)
{
    if (c->nargs == SCENE_MAX_ARGS || ndims > HG_MAX_DIMS)
        return err_set(err, HG_ELIMIT, "arg '%s': scene case is full", name);
    size_t bytes = hg_dtype_size(dtype);
    for (uint32_t d = 0; d < ndims; d++) {
        if (!ck_mul(bytes, shape[d], &bytes))
            return err_set(err, HG_EOVERFLOW, "arg '%s': size overflows", name);
    }
    hg_hostbuf *hb = NULL;
    int rc = hg_hostbuf_create(bytes, &hb);
    if (rc != 0)
        return err_set(err, rc, "arg '%s': cannot allocate %zu host bytes", name, bytes);
    hg_arg *a = &c->args[c->nargs];
    rc = hg_tensor_host(&a->tensor, hb, dtype, ndims, shape);
    if (rc != 0) {
        hg_hostbuf_destroy(hb);
        return err_set(err, rc, "arg '%s': bad shape", name);
    }
    a->name = name;
    a->dir = dir;
    *arg = c->nargs++;
    return 0;
}

int scene_case_add_scalar(scene_case *c, const char *name, uint64_t value, hg_err *err)
{
    if (c->nargs == SCENE_MAX_ARGS)
        return err_set(err, HG_ELIMIT, "arg '%s': scene case is full", name);
    hg_arg *a = &c->args[c->nargs++];
    a->name = name;
    a->dir = HG_SCALAR;
    a->scalar = value;
    return 0;
}

void *scene_case_data(const scene_case *c, uint32_t arg)
{
    return hg_hostbuf_data(c->args[arg].tensor.host);
}

int scene_case_add_check(scene_case *c, uint32_t arg, double rtol, double atol, double **golden,
                         hg_err *err)
{
    const hg_arg *a = &c->args[arg];
    if (c->nchecks == SCENE_MAX_CHECKS)
        return err_set(err, HG_ELIMIT, "arg '%s': too many checked outputs", a->name);
    size_t numel = hg_hostbuf_size(a->tensor.host) / hg_dtype_size(a->tensor.dtype);
    scene_check *k = &c->checks[c->nchecks];
    k->golden = calloc(numel > 0 ? numel : 1, sizeof(double));
    if (k->golden == NULL)
        return err_set(err, HG_ENOMEM, "arg '%s': no host memory for golden", a->name);
    k->arg = arg;
    k->numel = numel;
    k->rtol = rtol;
    k->atol = atol;
    c->nchecks++;
    *golden = k->golden;
    return 0;
}
