/*
 * registry.c: the table of scenes, their params, and the life of a case.
 *
 * Invariants: a case owns the host buffer of every tensor arg it holds and
 * the golden array of every check; scene_case_destroy frees exactly those
 * (and the scene's private state through scene->destroy).  A half-made case
 * is destroyed the same way, so make() can fail at any point without leaks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene/scene.h"
#include "tensor/checked.h"

/* Explicit, because the library is static: constructor registration in the
 * scene files would be dropped when nothing references them. */
static const scene *const scene_table[] = {
    &scene_vector_add,
    &scene_bgemm,
    &scene_paged_attention,
    &scene_qwen3_decode,
};

#define SCENE_COUNT (sizeof scene_table / sizeof scene_table[0])

const scene *scene_at(uint32_t i)
{
    return i < SCENE_COUNT ? scene_table[i] : NULL;
}

const scene *scene_find(const char *name)
{
    for (uint32_t i = 0; name != NULL && i < SCENE_COUNT; i++) {
        if (strcmp(scene_table[i]->name, name) == 0)
            return scene_table[i];
    }
    return NULL;
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
    for (uint32_t i = 0; name != NULL && *name != '\0' && i < SCENE_COUNT; i++) {
        const char *n = scene_table[i]->name;
        size_t d = strncmp(n, name, strlen(name)) == 0 ? 1 : edit_distance(name, n);
        if (d < best_d) {
            best = scene_table[i];
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

int scene_case_make_tp(const scene *s, const int64_t *params, const scene_tp *tp, scene_case **out,
                       hg_err *err)
{
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
    scene_case *c = calloc(1, sizeof *c);
    if (c == NULL)
        return err_set(err, HG_ENOMEM, "scene '%s': out of host memory", s->name);
    c->scene = s;
    c->tp = scene_tp_on(tp) ? tp : NULL;
    memcpy(c->params, params, s->nparams * sizeof params[0]);
    int rc = s->make(params, c, err);
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
        c->scene->destroy(c);
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (c->args[i].dir != HG_SCALAR)
            hg_hostbuf_destroy(c->args[i].tensor.host);
    }
    for (uint32_t i = 0; i < c->nchecks; i++)
        free(c->checks[i].golden);
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
