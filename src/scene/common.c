/*
 * common.c: what every scene shares: deterministic input contents, tile
 * views, and finding the run's args by name inside an orchestration.  Values depend only on (seed,
 * index), never on rand() or the platform, so every machine builds the same case and the same
 * golden.
 */
#include "scene/scene.h"

/* splitmix64's finalizer: a cheap, well-mixed hash of the element index. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int scene_fill(scene_case *c, uint32_t arg, uint64_t seed, int span, double scale)
{
    const hg_tensor *t = &c->args[arg].tensor;
    size_t bytes = hg_hostbuf_size(t->host);
    size_t numel = bytes / hg_dtype_size(t->dtype);
    void *data = hg_hostbuf_data(t->host);
    uint64_t base = mix64(seed);
    uint64_t modulus = 2 * (uint64_t)span + 1;
    for (size_t i = 0; i < numel; i++) {
        int64_t v = (int64_t)(mix64(base ^ (uint64_t)i) % modulus) - span;
        hg_dtype_store(t->dtype, data, i, (double)v * scale);
    }
    /* Written in place: tell the buffer, so its generation moves. */
    return hg_hostbuf_mark_written(t->host, 0, bytes);
}

int scene_tile_2d(const hg_tensor *t, size_t row, size_t col, size_t rows, size_t cols,
                  hg_tensor *out)
{
    hg_tensor rows_view;
    int rc = hg_tensor_slice(t, 0, row, rows, &rows_view);
    if (rc != 0)
        return rc;
    return hg_tensor_slice(&rows_view, 1, col, cols, out);
}

int scene_orch_lookup(hg_orch *o, const char *const *names, uint32_t n, uint32_t *idx,
                      const hg_arg **args)
{
    for (uint32_t i = 0; i < n; i++) {
        int found = hg_orch_find_arg(o, names[i]);
        if (found < 0)
            return found;
        idx[i] = (uint32_t)found;
        int rc = hg_orch_arg(o, idx[i], &args[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}
