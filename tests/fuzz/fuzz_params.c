/*
 * fuzz_params.c: the scene param parser ("KEY=VALUE", as --param takes it).
 *
 * The input picks a scene (or a name no scene has), then holds params
 * separated by newlines.  Promises checked: a scene name either finds a
 * scene or not, never crashes; each param is accepted or refused with
 * HG_ENOTFOUND, HG_EINVAL or HG_ERANGE and a message naming it; after every
 * call each param lies within its [min, max]; an accepted value printed
 * back (its name for a named param) is accepted again as the same value;
 * and small vector_add cases are made and freed from the params.
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "scene/scene.h"

/* Sets one param and checks what the parser promises. */
static void set_one(const scene *s, int64_t *params, const char *kv)
{
    hg_err err = {0};
    int rc = scene_param_set(s, params, kv, &err);
    if (rc != 0 && rc != HG_ENOTFOUND && rc != HG_EINVAL && rc != HG_ERANGE)
        fz_fail("'%s': rc %d", kv, rc);
    if (rc != 0 && err.msg[0] == '\0')
        fz_fail("'%s': refused (%d) without a message", kv, rc);
    for (uint32_t i = 0; i < s->nparams; i++)
        if (params[i] < s->params[i].min || params[i] > s->params[i].max)
            fz_fail("'%s': param '%s' is %" PRId64 ", outside [%" PRId64 ", %" PRId64 "]", kv,
                    s->params[i].name, params[i], s->params[i].min, s->params[i].max);
    if (rc != 0)
        return;
    /* Printed back, it parses to the same value. */
    size_t keylen = (size_t)(strchr(kv, '=') - kv);
    for (uint32_t i = 0; i < s->nparams; i++) {
        const scene_param *p = &s->params[i];
        bool named = strlen(p->name) == keylen && strncmp(p->name, kv, keylen) == 0;
        bool alias = p->alias && strlen(p->alias) == keylen && strncmp(p->alias, kv, keylen) == 0;
        if (!named && !alias)
            continue;
        char again[128];
        const char *vname = scene_param_value_name(p, params[i]);
        if (vname != NULL)
            snprintf(again, sizeof again, "%s=%s", p->name, vname);
        else
            snprintf(again, sizeof again, "%s=%" PRId64, p->name, params[i]);
        int64_t copy[SCENE_MAX_PARAMS];
        memcpy(copy, params, sizeof copy);
        if (scene_param_set(s, copy, again, &err) != 0 || copy[i] != params[i])
            fz_fail("'%s' gave %" PRId64 ", but '%s' is refused or differs: %s", kv, params[i],
                    again, err.msg);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[1024];
    if (size >= sizeof text)
        size = sizeof text - 1;
    if (size == 0)
        return 0;
    uint8_t pick = data[0];
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    const scene *s = scene_at(pick % 8);
    if (s == NULL) { /* a name, from the text's first line */
        char *nl = strchr(text, '\n');
        if (nl)
            *nl = '\0';
        s = scene_find(text);
        if (s == NULL || nl == NULL)
            return 0;
        memmove(text, nl + 1, strlen(nl + 1) + 1);
    }
    int64_t params[SCENE_MAX_PARAMS];
    scene_params_default(s, params);
    for (char *kv = text, *next; kv != NULL; kv = next) {
        next = strchr(kv, '\n');
        if (next)
            *next++ = '\0';
        set_one(s, params, kv);
    }
    if (s == &scene_vector_add && params[0] <= 4096) {
        hg_err err = {0};
        scene_case *c = NULL;
        int rc = scene_case_make(s, params, &c, &err);
        if ((rc == 0) != (c != NULL))
            fz_fail("vector_add n=%" PRId64 " tile=%" PRId64 ": rc %d", params[0], params[1], rc);
        scene_case_destroy(c);
    }
    return 0;
}
