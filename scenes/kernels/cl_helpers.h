/*
 * cl_helpers.h: the OpenCL C text every workload program starts with
 * (KERN_CL_HELPERS, a string literal to paste in front of a program's own
 * text), so the OpenCL kernels read views as the host kernels do.
 *
 *   kc_mat       kernels.h's kern_mat for a 1-, 2- or 3-D view: ntiles,
 *                rows, tcols and element strides; kc_mat_of fails (false)
 *                on other dims, as kern_mat_of does.
 *   kc_at        the element index of (row, col) in such a matrix.
 *   kc_rc        the (row, col) of the element whose row-major index in the
 *                view is id: the work item's own element (hostgraph.h's
 *                work size is one item per element of the first written
 *                arg, in row-major order).
 *   kc_f32_of    a scalar's f64 bits as the float C's (float) cast gives
 *                (round to nearest even, normal range), without cl_khr_fp64
 *                (a GPU may lack it).
 *   kc_bf16_round  an f32 rounded to bf16 and widened back (what a
 *                projection does to its input).
 *
 * FP_CONTRACT is off, as in the host build (no -ffp-contract), so a * b + c
 * rounds twice on both: the paths differ only where their sum orders do.
 */
#ifndef HG_SCENES_KERNELS_CL_HELPERS_H
#define HG_SCENES_KERNELS_CL_HELPERS_H

#define KERN_CL_HELPERS                                                                            \
    "#pragma OPENCL FP_CONTRACT OFF\n"                                                             \
    "typedef struct kc_mat { ulong ntiles, rows, tcols, s_tile, s_row, s_col; } kc_mat;\n"         \
    "inline bool kc_mat_of(hg_view v, kc_mat *m) {\n"                                              \
    "    if (v.ndims == 1) { *m = (kc_mat){1, 1, v.shape[0], 0, 0, v.strides[0]}; return true; "   \
    "}\n"                                                                                          \
    "    if (v.ndims == 2) { *m = (kc_mat){1, v.shape[0], v.shape[1], 0, v.strides[0],\n"          \
    "                                      v.strides[1]}; return true; }\n"                        \
    "    if (v.ndims == 3) { *m = (kc_mat){v.shape[0], v.shape[1], v.shape[2], v.strides[0],\n"    \
    "                                      v.strides[1], v.strides[2]}; return true; }\n"          \
    "    return false;\n"                                                                          \
    "}\n"                                                                                          \
    "inline ulong kc_cols(const kc_mat *m) { return m->ntiles * m->tcols; }\n"                     \
    "inline ulong kc_at(const kc_mat *m, ulong r, ulong c) {\n"                                    \
    "    return (c / m->tcols) * m->s_tile + r * m->s_row + (c % m->tcols) * m->s_col;\n"          \
    "}\n"                                                                                          \
    "inline void kc_rc(const kc_mat *m, ulong id, ulong *r, ulong *c) {\n"                         \
    "    ulong tc = m->tcols;\n"                                                                   \
    "    *r = (id / tc) % m->rows;\n"                                                              \
    "    *c = id / (tc * m->rows) * tc + id % tc;\n"                                               \
    "}\n"                                                                                          \
    "inline float kc_f32_of(ulong b) {\n"                                                          \
    "    uint sign = (uint)(b >> 63) << 31;\n"                                                     \
    "    int e = (int)((b >> 52) & 0x7ffUL) - 1023;\n"                                             \
    "    ulong m = b & 0xfffffffffffffUL, rem = m & 0x1fffffffUL;\n"                               \
    "    if (e > 127) return as_float(sign | 0x7f800000u);\n"                                      \
    "    if (e < -126) return as_float(sign);\n"                                                   \
    "    uint mt = (uint)(m >> 29);\n"                                                             \
    "    if (rem > 0x10000000UL || (rem == 0x10000000UL && (mt & 1u))) mt++;\n"                    \
    "    return as_float(sign | (((uint)(e + 127) << 23) + mt));\n"                                \
    "}\n"                                                                                          \
    "inline float kc_bf16_round(float f) { return hg_bf16_to_f32(hg_f32_to_bf16(f)); }\n"

#endif
