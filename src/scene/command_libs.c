/*
 * command_libs.c: the plugins a command loads (command.h, scene_libs_load):
 * HG_SCENE_PATH's files, then --scene-lib's, each through hg_scene_load,
 * before the scene name is looked up, so a plugin's scenes are found as the
 * built-in ones are.  A plugin stays loaded for the life of the process;
 * loading it again (another call, the same file twice) registers nothing.
 * Nothing here is static: HG_SCENE_PATH is read afresh by every call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene/command.h"

/* hg_scene_load, a failure's line naming where the file came from (`from`:
 * the flag or the variable) and the file (hg_scene_load's message names it;
 * if it ever did not, the path is added). */
static int load_one(const char *from, const char *path, char *msg, size_t len)
{
    char why[1024] = "";
    int rc = hg_scene_load(path, NULL, why, sizeof why);
    if (rc == 0)
        return 0;
    if (strstr(why, path) != NULL)
        snprintf(msg, len, "%s: %s", from, why);
    else
        snprintf(msg, len, "%s '%s': %s", from, path, *why != '\0' ? why : hg_strerror(rc));
    return rc;
}

int scene_libs_load(const scene_libs *libs, char *msg, size_t len)
{
    const char *env = getenv("HG_SCENE_PATH");
    while (env != NULL && *env != '\0') {
        size_t n = strcspn(env, ":");
        char path[4096];
        if (n >= sizeof path) {
            snprintf(msg, len, "HG_SCENE_PATH: an entry is longer than %zu bytes", sizeof path - 1);
            return HG_ELIMIT;
        }
        memcpy(path, env, n);
        path[n] = '\0';
        int rc = n > 0 ? load_one("HG_SCENE_PATH", path, msg, len) : 0;
        if (rc != 0)
            return rc;
        env += n + (env[n] == ':');
    }
    for (uint32_t i = 0; i < libs->n; i++) {
        int rc = load_one("--scene-lib", libs->paths[i], msg, len);
        if (rc != 0)
            return rc;
    }
    return 0;
}
