/*
 * model_kernel.h: the kernel of the random residency tests (the model test
 * and fuzz_residency).  Task scalar a is task arg a's direction.  K_MODEL
 * is the host slot alone; model_kernel(n) adds the OpenCL slot for a task
 * of n args (an OpenCL entry point has a fixed arity).
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

/* k_model in OpenCL C, on one work item (an INOUT is read into the sum
 * before any byte is written, so the work cannot be split).  The directions
 * are hostgraph.h's: HG_IN 1, HG_OUT 2, HG_INOUT 3. */
_Static_assert(HG_IN == 1 && HG_OUT == 2 && HG_INOUT == 3, "MODEL_CL's direction values");
static const char MODEL_CL[] =
    "uint model_sum(__global const uchar *p, hg_view v, ulong d)\n"
    "{\n"
    "    uint s = 0;\n"
    "    for (ulong j = 0; p != 0 && d != 2 && j < v.shape[0]; j++)\n"
    "        s += p[v.offset + j];\n"
    "    return s;\n"
    "}\n"
    "void model_write(__global uchar *p, hg_view v, ulong d, uint a, uint sum)\n"
    "{\n"
    "    for (ulong j = 0; p != 0 && d != 1 && j < v.shape[0]; j++) {\n"
    "        uchar val = (uchar)(sum + 31u * (uint)j + 17u * a);\n"
    "        p[v.offset + j] = d == 3 ? (uchar)(p[v.offset + j] + val) : val;\n"
    "    }\n"
    "}\n"
    "#define T(k) HG_TENSOR(uchar, x##k)\n"
    "#define S(k) model_sum(x##k, x##k##_v, d##k)\n"
    "#define W(k) model_write(x##k, x##k##_v, d##k, k, s)\n"
    "#define ONE if (get_global_id(0) != 0) return\n"
    "__kernel void model1(HG_STATUS_ARGS, T(0), ulong d0)\n"
    "{ ONE; uint s = S(0); W(0); }\n"
    "__kernel void model2(HG_STATUS_ARGS, T(0), T(1), ulong d0, ulong d1)\n"
    "{ ONE; uint s = S(0) + S(1); W(0); W(1); }\n"
    "__kernel void model3(HG_STATUS_ARGS, T(0), T(1), T(2), ulong d0, ulong d1, ulong d2)\n"
    "{ ONE; uint s = S(0) + S(1) + S(2); W(0); W(1); W(2); }\n"
    "__kernel void model4(HG_STATUS_ARGS, T(0), T(1), T(2), T(3), ulong d0, ulong d1,\n"
    "                     ulong d2, ulong d3)\n"
    "{ ONE; uint s = S(0) + S(1) + S(2) + S(3); W(0); W(1); W(2); W(3); }\n";

/* The model kernel for a task of nargs (1 to 4) args, both slots. */
static inline const hg_kernel *model_kernel(uint32_t nargs)
{
    static const hg_kernel k[4] = {
        {"model", k_model, HG_CORE_VECTOR, MODEL_CL, "model1"},
        {"model", k_model, HG_CORE_VECTOR, MODEL_CL, "model2"},
        {"model", k_model, HG_CORE_VECTOR, MODEL_CL, "model3"},
        {"model", k_model, HG_CORE_VECTOR, MODEL_CL, "model4"},
    };
    return nargs >= 1 && nargs <= 4 ? &k[nargs - 1] : &K_MODEL;
}

#endif
