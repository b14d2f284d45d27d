/* A plugin built against another version of the scene definition: the
 * loader must refuse it, naming both versions and this file. */
#include "hostgraph_scenes.h"

static int make(hg_scene_case *c, const int64_t *params, void *user)
{
    (void)c;
    (void)params;
    (void)user;
    return 0;
}

static const hg_scene_def def = {
    .size = sizeof(hg_scene_def), .version = 99, .name = "from_the_future", .make = make};

const hg_scene_def *const *hg_scene_plugin(void)
{
    static const hg_scene_def *const defs[] = {&def, NULL};
    return defs;
}
