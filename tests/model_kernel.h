/*
 * model_kernel.h: the kernel of the random residency tests (the model test
 * and fuzz_residency).  Task scalar a is task arg a's direction.
 */
#ifndef HG_MODEL_KERNEL_H
#define HG_MODEL_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "hostgraph.h"

/* Every written arg's byte j becomes s + 31 j + 17 a (+ its old value for
 * INOUT), s the byte sum of every read arg: any stale input shows. */
static int k_model(const hg_kernel_ctx *ctx)
{
    uint32_t sum = 0;
    for (uint32_t a = 0; a < ctx->nargs; a++) {
        if (ctx->scalars[a] == HG_OUT)
            continue;
        const unsigned char *p = ctx->args[a].data;
        for (size_t j = 0; j < ctx->args[a].shape[0]; j++)
            sum += p[j];
    }
    for (uint32_t a = 0; a < ctx->nargs; a++) {
        if (ctx->scalars[a] == HG_IN)
            continue;
        unsigned char *p = ctx->args[a].data;
        for (size_t j = 0; j < ctx->args[a].shape[0]; j++) {
            unsigned char v = (unsigned char)(sum + 31u * j + 17u * a);
            p[j] = ctx->scalars[a] == HG_INOUT ? (unsigned char)(p[j] + v) : v;
        }
    }
    return 0;
}
static const hg_kernel K_MODEL = {"model", k_model, HG_CORE_VECTOR, NULL, NULL};

#endif
