/*
 * hostbuf.c: host buffers, the host memory tensors view.
 *
 * Invariants: an id is never reused in the process (a global atomic counter:
 * identity, not run state); the generation only grows, by one per write made
 * through the API, and the last written range is kept beside it.  Residency
 * keys freshness on (id, generation) sampled at bind, never on address + size.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hostgraph.h"
#include "tensor/checked.h"

struct hg_hostbuf {
    uint64_t id;
    uint64_t generation;
    size_t size;
    void *data;
    bool owned;
    size_t last_lo, last_hi;
};

static atomic_uint_fast64_t hostbuf_next_id = 1;

static int hostbuf_new(void *data, size_t bytes, bool owned, hg_hostbuf **out)
{
    hg_hostbuf *hb = calloc(1, sizeof *hb);
    if (hb == NULL)
        return HG_ENOMEM;
    hb->id = (uint64_t)atomic_fetch_add(&hostbuf_next_id, 1);
    hb->generation = 1;
    hb->size = bytes;
    hb->data = data;
    hb->owned = owned;
    *out = hb;
    return 0;
}

int hg_hostbuf_create(size_t bytes, hg_hostbuf **out)
{
    if (out == NULL)
        return HG_EINVAL;
    /* calloc(0) may return NULL; keep a real pointer so data is never NULL. */
    void *data = calloc(bytes ? bytes : 1, 1);
    if (data == NULL)
        return HG_ENOMEM;
    int rc = hostbuf_new(data, bytes, true, out);
    if (rc != 0)
        free(data);
    return rc;
}

int hg_hostbuf_wrap(void *data, size_t bytes, hg_hostbuf **out)
{
    if (out == NULL || (data == NULL && bytes != 0))
        return HG_EINVAL;
    return hostbuf_new(data, bytes, false, out);
}

void hg_hostbuf_destroy(hg_hostbuf *hb)
{
    if (hb == NULL)
        return;
    if (hb->owned)
        free(hb->data);
    free(hb);
}

uint64_t hg_hostbuf_id(const hg_hostbuf *hb)
{
    return hb ? hb->id : 0;
}

uint64_t hg_hostbuf_generation(const hg_hostbuf *hb)
{
    return hb ? hb->generation : 0;
}

size_t hg_hostbuf_size(const hg_hostbuf *hb)
{
    return hb ? hb->size : 0;
}

void *hg_hostbuf_data(const hg_hostbuf *hb)
{
    return hb ? hb->data : NULL;
}

int hg_hostbuf_mark_written(hg_hostbuf *hb, size_t offset, size_t bytes)
{
    size_t end;
    if (hb == NULL)
        return HG_EINVAL;
    if (!ck_add(offset, bytes, &end) || end > hb->size)
        return HG_ERANGE;
    hb->generation++;
    hb->last_lo = offset;
    hb->last_hi = end;
    return 0;
}

int hg_hostbuf_write(hg_hostbuf *hb, size_t offset, const void *src, size_t bytes)
{
    size_t end;
    if (hb == NULL || (src == NULL && bytes != 0))
        return HG_EINVAL;
    if (!ck_add(offset, bytes, &end) || end > hb->size)
        return HG_ERANGE;
    if (bytes != 0)
        memmove((char *)hb->data + offset, src, bytes);
    return hg_hostbuf_mark_written(hb, offset, bytes);
}

void hg_hostbuf_last_write(const hg_hostbuf *hb, size_t *lo, size_t *hi)
{
    if (lo)
        *lo = hb ? hb->last_lo : 0;
    if (hi)
        *hi = hb ? hb->last_hi : 0;
}
