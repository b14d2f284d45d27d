/*
 * scenes_consumer.c: an application that asks for the built-in scenes
 * (hostgraph_scenes.h, libhostgraph_scenes), as installed: it runs a scene
 * through the scene runner (JSON report to argv[1]) and a scene's case with
 * its own runner, and checks golden both ways.
 */
#include <stdio.h>

#include <hostgraph_scenes.h>

int main(int argc, char **argv)
{
    const char *params[] = {"n=5000", "tile=512"};
    char err[512];
    hg_scene_opts o = {.scene = "vector_add",
                       .params = params,
                       .nparams = 2,
                       .rounds = 2,
                       .residency = "all",
                       .json_path = argc > 1 ? argv[1] : NULL};
    int rc = hg_scene_run(&o, err, sizeof err);
    if (rc != HG_SCENE_OK) {
        fprintf(stderr, "scenes_consumer: exit %d: %s\n", rc, err);
        return 1;
    }
    hg_scene_case *c = NULL;
    hg_device *dev = NULL;
    hg_runner *run = NULL;
    if (hg_scene_case_open("vector_add", params, 2, &c, err, sizeof err) != 0 ||
        hg_device_open("sim", &dev, err, sizeof err) != 0 || hg_runner_open(dev, &run) != 0) {
        fprintf(stderr, "scenes_consumer: %s\n", err);
        return 1;
    }
    rc = hg_runner_run(run, hg_scene_case_callable(c), hg_scene_case_args(c),
                       hg_scene_case_num_args(c), NULL);
    char why[256];
    int pass = rc == 0 && hg_scene_case_check(c, why, sizeof why);
    printf("scenes_consumer: %u scenes; %s: %s\n", hg_scene_count(), hg_scene_name(0),
           rc != 0 ? hg_runner_errmsg(run) : why);
    hg_runner_close(run);
    hg_device_close(dev);
    hg_scene_case_close(c);
    return pass ? 0 : 1;
}
