/* A plugin of two scenes, the second with a bad param table (min > max):
 * the loader must register neither and name the file, scene and param. */
#include "hostgraph_scenes.h"

static int make(hg_scene_case *c, const int64_t *params, void *user)
{
    (void)c;
    (void)params;
    (void)user;
    return 0;
}

static const hg_scene_param_def bad[] = {{"n", 4, 8, 2, "elements", NULL, NULL}};

static const hg_scene_def good_def = {
    .size = sizeof(hg_scene_def), .version = HG_SCENE_DEF_VERSION, .name = "fine", .make = make};
static const hg_scene_def bad_def = {.size = sizeof(hg_scene_def),
                                     .version = HG_SCENE_DEF_VERSION,
                                     .name = "upside_down",
                                     .params = bad,
                                     .nparams = 1,
                                     .make = make};

const hg_scene_def *const *hg_scene_plugin(void)
{
    static const hg_scene_def *const defs[] = {&good_def, &bad_def, NULL};
    return defs;
}
