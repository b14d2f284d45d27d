/*
 * mat.c: tiled matrix views for kernels (kernels.h describes the layout).
 * A kernel copies a row out to a dense float array, computes there, and
 * copies the result back: the copies are small beside the work per row.
 * Also dense views and direct kernel calls, for tests and benchmarks.
 */
#include "kernels.h"

bool kern_mat_of(const hg_kview *v, kern_mat *m)
{
    if (v->dtype != HG_F32 && v->dtype != HG_BF16)
        return false;
    switch (v->ndims) {
    case 1:
        *m = (kern_mat){v->data, v->dtype, 1, 1, v->shape[0], 0, 0, v->strides[0]};
        return true;
    case 2:
        *m = (kern_mat){v->data,       v->dtype,     1, v->shape[0], v->shape[1], 0,
                        v->strides[0], v->strides[1]};
        return true;
    case 3:
        *m = (kern_mat){v->data,     v->dtype,      v->shape[0],   v->shape[1],
                        v->shape[2], v->strides[0], v->strides[1], v->strides[2]};
        return true;
    default:
        return false;
    }
}

void kern_mat_get_row(const kern_mat *m, size_t r, float *dst)
{
    for (size_t t = 0; t < m->ntiles; t++) {
        size_t base = t * m->s_tile + r * m->s_row;
        float *out = dst + t * m->tcols;
        if (m->dtype == HG_F32) {
            const float *src = (const float *)m->data + base;
            for (size_t c = 0; c < m->tcols; c++)
                out[c] = src[c * m->s_col];
        } else {
            const uint16_t *src = (const uint16_t *)m->data + base;
            for (size_t c = 0; c < m->tcols; c++)
                out[c] = kern_bf16_to_f32(src[c * m->s_col]);
        }
    }
}

void kern_mat_get_span(const kern_mat *m, size_t r, size_t c0, size_t n, float *dst)
{
    for (size_t i = 0; i < n;) {
        size_t c = c0 + i, t = c / m->tcols, in_tile = m->tcols - c % m->tcols;
        size_t len = n - i < in_tile ? n - i : in_tile;
        size_t base = t * m->s_tile + r * m->s_row + (c % m->tcols) * m->s_col;
        if (m->dtype == HG_F32) {
            const float *src = (const float *)m->data + base;
            for (size_t j = 0; j < len; j++)
                dst[i + j] = src[j * m->s_col];
        } else {
            const uint16_t *src = (const uint16_t *)m->data + base;
            for (size_t j = 0; j < len; j++)
                dst[i + j] = kern_bf16_to_f32(src[j * m->s_col]);
        }
        i += len;
    }
}

void kern_mat_put_row(const kern_mat *m, size_t r, const float *src)
{
    for (size_t t = 0; t < m->ntiles; t++) {
        size_t base = t * m->s_tile + r * m->s_row;
        const float *in = src + t * m->tcols;
        if (m->dtype == HG_F32) {
            float *dst = (float *)m->data + base;
            for (size_t c = 0; c < m->tcols; c++)
                dst[c * m->s_col] = in[c];
        } else {
            uint16_t *dst = (uint16_t *)m->data + base;
            for (size_t c = 0; c < m->tcols; c++)
                dst[c * m->s_col] = kern_f32_to_bf16(in[c]);
        }
    }
}

hg_kview kern_dense_view(void *data, hg_dtype dtype, uint32_t ndims, const size_t *shape)
{
    hg_kview v = {data, dtype, ndims, {0}, {0}};
    size_t stride = 1;
    for (uint32_t i = ndims; i-- > 0;) {
        v.shape[i] = shape[i];
        v.strides[i] = stride;
        stride *= shape[i];
    }
    return v;
}

int kern_call(const hg_kernel *k, const hg_kview *args, uint32_t nargs, const uint64_t *scalars,
              uint32_t nscalars)
{
    hg_kernel_ctx ctx = {args, nargs, scalars, nscalars, 0, k->core};
    return k->fn(&ctx);
}
