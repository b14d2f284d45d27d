/* A shared object that is no scene plugin: it lacks hg_scene_plugin. */
int not_a_scene_plugin(void);

int not_a_scene_plugin(void)
{
    return 1;
}
