/*
 * cancel.c: the scene runner's stop request (scene.h, scene_cancel).
 *
 * Requests come from another thread (the command's signal thread, a
 * binding's waiting thread); the rounds poll scene_cancel_requested between
 * rounds.  The runner pointer is read and used under the lock that attach
 * takes, so a second request cannot cancel a runner being closed.
 */
#include "scene/scene.h"

void scene_cancel_init(scene_cancel *c)
{
    pthread_mutex_init(&c->lock, NULL);
    c->requests = 0;
    c->runner = NULL;
}

void scene_cancel_destroy(scene_cancel *c)
{
    pthread_mutex_destroy(&c->lock);
}

uint32_t scene_cancel_request(scene_cancel *c)
{
    pthread_mutex_lock(&c->lock);
    uint32_t n = ++c->requests;
    if (n >= 2 && c->runner != NULL)
        hg_runner_cancel(c->runner); /* the second stops the round in flight */
    pthread_mutex_unlock(&c->lock);
    return n;
}

bool scene_cancel_requested(scene_cancel *c)
{
    if (c == NULL)
        return false;
    pthread_mutex_lock(&c->lock);
    bool requested = c->requests > 0;
    pthread_mutex_unlock(&c->lock);
    return requested;
}

void scene_cancel_attach(scene_cancel *c, hg_runner *r)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->lock);
    c->runner = r;
    if (r != NULL && c->requests >= 2)
        hg_runner_cancel(r);
    pthread_mutex_unlock(&c->lock);
}
