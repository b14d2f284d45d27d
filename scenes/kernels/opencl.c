/*
 * opencl.c: the OpenCL slots of the shared workload kernels (kernels.h):
 * the projection and paged attention's four steps, one program (built once
 * per device), in hostgraph.h's calling convention.
 *
 * Each kernel computes what its host function does, with the same checks
 * (any item that finds the views disagree fails the task with code 1), the
 * same bf16 rounding points and f32 sums; sums run in plain order (the host
 * paths use 16 partial sums or AVX-512), so results differ only in the order
 * of f32 additions.  A work item per element of the first written arg:
 *
 *   proj_f32, proj_bf16    the item of y[0][j], j a multiple of 4, does
 *                          columns j..j+3 for every row (x f32 or bf16), in
 *                          4 x 4 float8 sums per 4 rows: a rounded x and a
 *                          widened w serve 4 sums each; the other items
 *                          return (work items are row-major, so the working
 *                          ones spread across work-groups and cores)
 *   attn_qk_{f32,bf16}_N   scores[h][t]: one dot over D (q f32 or bf16), in
 *                          float8 when q's head is contiguous and D a
 *                          multiple of 8
 *   attn_softmax           one item per row does the row (the row is read
 *                          whole and rewritten in place, so items of one row
 *                          cannot share it); the others return
 *   attn_pv_N              part[h][i]: a sum over the chunk's tokens
 *   attn_merge             out[h * D + i]: the online-softmax combination
 *
 * An OpenCL kernel's params are fixed, so QK and PV have one entry per count
 * N of cache blocks (1..KERN_ATTN_MAX_BLOCKS); the blocks go into a private
 * array of pointers that the shared body indexes like the host's blocks.
 */
#include "cl_helpers.h"
#include "kernels.h"

/* N block args, and filling bp[] / bv[] from them. */
#define CL_BLOCK_MACROS                                                                            \
    "#define KC_BLK1 HG_TENSOR(ushort, b0)\n"                                                      \
    "#define KC_BLK2 KC_BLK1, HG_TENSOR(ushort, b1)\n"                                             \
    "#define KC_BLK3 KC_BLK2, HG_TENSOR(ushort, b2)\n"                                             \
    "#define KC_BLK4 KC_BLK3, HG_TENSOR(ushort, b3)\n"                                             \
    "#define KC_BLK5 KC_BLK4, HG_TENSOR(ushort, b4)\n"                                             \
    "#define KC_BLK6 KC_BLK5, HG_TENSOR(ushort, b5)\n"                                             \
    "#define KC_BLK7 KC_BLK6, HG_TENSOR(ushort, b6)\n"                                             \
    "#define KC_BLK8 KC_BLK7, HG_TENSOR(ushort, b7)\n"                                             \
    "#define KC_FILL1 bp[0] = HG_PTR(b0); bv[0] = b0_v;\n"                                         \
    "#define KC_FILL2 KC_FILL1 bp[1] = HG_PTR(b1); bv[1] = b1_v;\n"                                \
    "#define KC_FILL3 KC_FILL2 bp[2] = HG_PTR(b2); bv[2] = b2_v;\n"                                \
    "#define KC_FILL4 KC_FILL3 bp[3] = HG_PTR(b3); bv[3] = b3_v;\n"                                \
    "#define KC_FILL5 KC_FILL4 bp[4] = HG_PTR(b4); bv[4] = b4_v;\n"                                \
    "#define KC_FILL6 KC_FILL5 bp[5] = HG_PTR(b5); bv[5] = b5_v;\n"                                \
    "#define KC_FILL7 KC_FILL6 bp[6] = HG_PTR(b6); bv[6] = b6_v;\n"                                \
    "#define KC_FILL8 KC_FILL7 bp[7] = HG_PTR(b7); bv[7] = b7_v;\n"

/* The one program: all the pieces below are one string literal, so a
 * kernel record can name it in a static initialiser. */
const char kern_cl_source[] = KERN_CL_HELPERS CL_BLOCK_MACROS
    /* the projection */
    "inline bool kc_as_matrix(hg_view v, ulong *rows, ulong *cols, ulong *ld) {\n"
    "    uint d = v.ndims;\n"
    "    if (d < 2 || d > 3 || (d == 3 && v.shape[0] != 1) || v.strides[d - 1] != 1)\n"
    "        return false;\n"
    "    *rows = v.shape[d - 2]; *cols = v.shape[d - 1]; *ld = v.strides[d - 2];\n"
    "    return true;\n"
    "}\n"
    "inline float8 kc_widen8(ushort8 b) { return as_float8(convert_uint8(b) << (uint8)(16)); }\n"
    "inline float8 kc_round8(float8 f) {\n"
    "    uint8 u = as_uint8(f);\n"
    "    uint8 r = (u + (uint8)(0x7fffu) + ((u >> (uint8)(16)) & (uint8)(1u))) & "
    "(uint8)(0xffff0000u);\n"
    "    uint8 q = (u & (uint8)(0xffff0000u)) | (uint8)(0x400000u);\n"
    "    return as_float8(select(r, q, (u & (uint8)(0x7fffffffu)) > (uint8)(0x7f800000u)));\n"
    "}\n"
    "inline void kc_proj(HG_STATUS_ARGS, __global const float *xf, __global const ushort *xb,\n"
    "                    hg_view x_v, __global const ushort *w, hg_view w_v, __global float *y,\n"
    "                    hg_view y_v) {\n"
    "    kc_mat xm;\n"
    "    ulong n, k, ldw, rows, ny, ldy;\n"
    "    if (!kc_mat_of(x_v, &xm) || !kc_as_matrix(w_v, &n, &k, &ldw) ||\n"
    "        !kc_as_matrix(y_v, &rows, &ny, &ldy) || kc_cols(&xm) != k || xm.rows != rows ||\n"
    "        ny != n) { HG_FAIL(1); return; }\n"
    "    ulong id = get_global_id(0);\n"
    "    if (id % (4 * rows) != 0)\n"
    "        return;\n"
    "    ulong j0 = id / rows;\n"
    "    uint nj = n - j0 < 4 ? (uint)(n - j0) : 4u;\n"
    "    __global const ushort *wr[4];\n"
    "    for (uint q = 0; q < 4; q++)\n"
    "        wr[q] = w + (j0 + (q < nj ? q : 0)) * ldw;\n"
    "    for (ulong r0 = 0; r0 < rows; r0 += 4) {\n"
    "        uint nr = rows - r0 < 4 ? (uint)(rows - r0) : 4u;\n"
    "        ulong xr[4];\n"
    "        float8 acc[16];\n"
    "        for (uint r = 0; r < 4; r++)\n"
    "            xr[r] = (r0 + (r < nr ? r : 0)) * xm.s_row;\n"
    "        for (uint a = 0; a < 16; a++)\n"
    "            acc[a] = (float8)(0.0f);\n"
    "        for (ulong t = 0, k0 = 0; t < xm.ntiles; t++, k0 += xm.tcols) {\n"
    "            ulong at = t * xm.s_tile, c = 0;\n"
    "            for (; xm.s_col == 1 && c + 8 <= xm.tcols; c += 8) {\n"
    "                float8 wv[4], xv[4];\n"
    "                for (uint q = 0; q < 4; q++)\n"
    "                    wv[q] = kc_widen8(vload8(0, wr[q] + k0 + c));\n"
    "                for (uint r = 0; r < 4; r++)\n"
    "                    xv[r] = xf != 0 ? kc_round8(vload8(0, xf + at + xr[r] + c))\n"
    "                                    : kc_widen8(vload8(0, xb + at + xr[r] + c));\n"
    "                for (uint r = 0; r < 4; r++)\n"
    "                    for (uint q = 0; q < 4; q++)\n"
    "                        acc[r * 4 + q] += xv[r] * wv[q];\n"
    "            }\n"
    "            for (; c < xm.tcols; c++) {\n"
    "                for (uint r = 0; r < 4; r++) {\n"
    "                    ulong xi = at + xr[r] + c * xm.s_col;\n"
    "                    float xv = xf != 0 ? kc_bf16_round(xf[xi]) : hg_bf16_to_f32(xb[xi]);\n"
    "                    for (uint q = 0; q < 4; q++)\n"
    "                        acc[r * 4 + q].s0 += xv * hg_bf16_to_f32(wr[q][k0 + c]);\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        for (uint r = 0; r < nr; r++) {\n"
    "            for (uint q = 0; q < nj; q++) {\n"
    "                float4 h = acc[r * 4 + q].lo + acc[r * 4 + q].hi;\n"
    "                y[(r0 + r) * ldy + j0 + q] = h.x + h.y + h.z + h.w;\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "__kernel void proj_f32(HG_STATUS_ARGS, HG_TENSOR(float, x), HG_TENSOR(ushort, w),\n"
    "                       HG_TENSOR(float, y)) {\n"
    "    kc_proj(hg_status, hg_task, HG_PTR(x), (__global const ushort *)0, x_v, HG_PTR(w), w_v,\n"
    "            HG_PTR(y), y_v);\n"
    "}\n"
    "__kernel void proj_bf16(HG_STATUS_ARGS, HG_TENSOR(ushort, x), HG_TENSOR(ushort, w),\n"
    "                        HG_TENSOR(float, y)) {\n"
    "    kc_proj(hg_status, hg_task, (__global const float *)0, HG_PTR(x), x_v, HG_PTR(w), w_v,\n"
    "            HG_PTR(y), y_v);\n"
    "}\n"
    /* what QK and PV share: the chunk's blocks and dense f32 views */
    "inline bool kc_blocks(const hg_view *bv, uint nb, ulong *bs, ulong *kvh, ulong *d) {\n"
    "    *bs = bv[0].shape[0]; *kvh = bv[0].shape[1]; *d = bv[0].shape[2];\n"
    "    for (uint i = 0; i < nb; i++) {\n"
    "        if (bv[i].ndims != 3 || bv[i].shape[0] != *bs || bv[i].shape[1] != *kvh ||\n"
    "            bv[i].shape[2] != *d || bv[i].strides[2] != 1 || bv[i].strides[1] != *d ||\n"
    "            bv[i].strides[0] != *kvh * *d)\n"
    "            return false;\n"
    "    }\n"
    "    return *bs > 0 && *kvh > 0 && *d > 0;\n"
    "}\n"
    "inline bool kc_dense(hg_view v, ulong rows, ulong cols) {\n"
    "    uint d = v.ndims;\n"
    "    return d >= 2 && d <= 3 && !(d == 3 && v.shape[0] != 1) && v.shape[d - 2] == rows &&\n"
    "           v.shape[d - 1] == cols && v.strides[d - 1] == 1 && v.strides[d - 2] == cols;\n"
    "}\n"
    /* QK */
    "inline void kc_qk(HG_STATUS_ARGS, __global const float *qf, __global const ushort *qb,\n"
    "                  hg_view q_v, __global const ushort *const *bp, const hg_view *bv,\n"
    "                  uint nb, __global float *s, hg_view s_v, ulong tokens, ulong scale) {\n"
    "    kc_mat qm;\n"
    "    ulong bs, kvh, d;\n"
    "    if (!kc_mat_of(q_v, &qm) || qm.rows != 1 || !kc_blocks(bv, nb, &bs, &kvh, &d)) {\n"
    "        HG_FAIL(1); return; }\n"
    "    ulong hd = kc_cols(&qm), hn = hd / d, ctok = s_v.ndims == 2 ? s_v.shape[1] : 0;\n"
    "    if (!kc_dense(s_v, hn, ctok) || hd % d != 0 || hn % kvh != 0 || tokens > ctok ||\n"
    "        tokens > nb * bs) { HG_FAIL(1); return; }\n"
    "    ulong id = get_global_id(0), h = id / ctok, t = id % ctok;\n"
    "    if (t >= tokens) { s[id] = -INFINITY; return; }\n"
    "    __global const ushort *k = bp[t / bs] + (t % bs) * kvh * d + h / (hn / kvh) * d;\n"
    "    ulong q0 = kc_at(&qm, 0, h * d);\n"
    "    bool one_tile = (h * d) % qm.tcols + d <= qm.tcols;\n"
    "    float dot = 0.0f;\n"
    "    if (one_tile && qm.s_col == 1 && d % 8 == 0) {\n"
    "        float8 acc = (float8)(0.0f);\n"
    "        for (ulong i = 0; i < d; i += 8)\n"
    "            acc += (qf != 0 ? vload8(0, qf + q0 + i) : kc_widen8(vload8(0, qb + q0 + i))) *\n"
    "                   kc_widen8(vload8(0, k + i));\n"
    "        float4 h4 = acc.lo + acc.hi;\n"
    "        dot = h4.x + h4.y + h4.z + h4.w;\n"
    "    } else {\n"
    "        for (ulong i = 0; i < d; i++) {\n"
    "            ulong qi = one_tile ? q0 + i * qm.s_col : kc_at(&qm, 0, h * d + i);\n"
    "            float qv = qf != 0 ? qf[qi] : hg_bf16_to_f32(qb[qi]);\n"
    "            dot += qv * hg_bf16_to_f32(k[i]);\n"
    "        }\n"
    "    }\n"
    "    s[id] = kc_f32_of(scale) * dot;\n"
    "}\n"
    "#define KC_QK(NAME, QT, N, QF, QB) __kernel void NAME##_##N(HG_STATUS_ARGS,"
    " HG_TENSOR(QT, q), KC_BLK##N, HG_TENSOR(float, s), ulong tokens, ulong scale) {"
    " __global const ushort *bp[N]; hg_view bv[N]; KC_FILL##N"
    " kc_qk(hg_status, hg_task, QF, QB, q_v, bp, bv, N, HG_PTR(s), s_v, tokens, scale); }\n"
    "#define KC_QK_F32(N) KC_QK(attn_qk_f32, float, N, HG_PTR(q), (__global const ushort *)0)\n"
    "#define KC_QK_BF16(N) KC_QK(attn_qk_bf16, ushort, N, (__global const float *)0, HG_PTR(q))\n"
    "KC_QK_F32(1) KC_QK_F32(2) KC_QK_F32(3) KC_QK_F32(4)\n"
    "KC_QK_F32(5) KC_QK_F32(6) KC_QK_F32(7) KC_QK_F32(8)\n"
    "KC_QK_BF16(1) KC_QK_BF16(2) KC_QK_BF16(3) KC_QK_BF16(4)\n"
    "KC_QK_BF16(5) KC_QK_BF16(6) KC_QK_BF16(7) KC_QK_BF16(8)\n"
    /* kern_exp_nonpositive (kernels.h) and softmax_row (attention.c) as C
     * has them (the same operations in the same order, so the same bits) */
    "inline float kc_exp_nonpositive(float x) {\n"
    "    x = x >= -87.0f ? x : -87.0f;\n"
    "    int n = (int)(x * 1.44269504f - 0.5f);\n"
    "    float r = x - (float)n * 0.693359375f + (float)n * 2.12194440e-4f;\n"
    "    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +\n"
    "              r * (1.0f / 120 + r / 720)))));\n"
    "    return p * as_float((uint)(n + 127) << 23);\n"
    "}\n"
    "__kernel void attn_softmax(HG_STATUS_ARGS, HG_TENSOR(float, s), HG_TENSOR(float, st),\n"
    "                           ulong tokens) {\n"
    "    if (s_v.ndims != 2) { HG_FAIL(1); return; }\n"
    "    ulong hn = s_v.shape[0], ctok = s_v.shape[1], id = get_global_id(0);\n"
    "    if (!kc_dense(s_v, hn, ctok) || !kc_dense(st_v, hn, 2) || tokens > ctok) {\n"
    "        HG_FAIL(1); return; }\n"
    "    if (id % ctok != 0)\n"
    "        return;\n"
    "    __global float *row = HG_PTR(s) + id;\n"
    "    float lane[16], mx = -INFINITY, sum = 0.0f;\n"
    "    ulong t = 0;\n"
    "    for (int k = 0; k < 16; k++) lane[k] = -INFINITY;\n"
    "    for (; t + 16 <= tokens; t += 16)\n"
    "        for (int k = 0; k < 16; k++) lane[k] = row[t + k] > lane[k] ? row[t + k] : lane[k];\n"
    "    for (int k = 0; k < 16; k++) mx = lane[k] > mx ? lane[k] : mx;\n"
    "    for (; t < tokens; t++) mx = row[t] > mx ? row[t] : mx;\n"
    "    for (t = 0; t < tokens; t++) row[t] = kc_exp_nonpositive(row[t] - mx);\n"
    "    for (int k = 0; k < 16; k++) lane[k] = 0.0f;\n"
    "    for (t = 0; t + 16 <= tokens; t += 16)\n"
    "        for (int k = 0; k < 16; k++) lane[k] += row[t + k];\n"
    "    for (int k = 0; k < 16; k++) sum += lane[k];\n"
    "    for (; t < tokens; t++) sum += row[t];\n"
    "    for (t = tokens; t < ctok; t++) row[t] = 0.0f;\n"
    "    HG_PTR(st)[2 * (id / ctok)] = mx;\n"
    "    HG_PTR(st)[2 * (id / ctok) + 1] = sum;\n"
    "}\n"
    /* PV and the merge */
    "inline void kc_pv(HG_STATUS_ARGS, __global const float *p, hg_view p_v,\n"
    "                  __global const ushort *const *bp, const hg_view *bv, uint nb,\n"
    "                  __global float *part, hg_view part_v, ulong tokens) {\n"
    "    ulong bs, kvh, d;\n"
    "    if (p_v.ndims != 2 || !kc_blocks(bv, nb, &bs, &kvh, &d)) { HG_FAIL(1); return; }\n"
    "    ulong hn = p_v.shape[0], ctok = p_v.shape[1];\n"
    "    if (!kc_dense(p_v, hn, ctok) || !kc_dense(part_v, hn, d) || hn % kvh != 0 ||\n"
    "        tokens > ctok || tokens > nb * bs) { HG_FAIL(1); return; }\n"
    "    ulong id = get_global_id(0), h = id / d, i = id % d, at = h / (hn / kvh) * d + i;\n"
    "    __global const float *ph = p + h * ctok;\n"
    "    float acc = 0.0f;\n"
    "    for (ulong b = 0, t = 0; t < tokens; b++) {\n"
    "        __global const ushort *vb = bp[b] + at;\n"
    "        for (ulong row = 0; row < bs && t < tokens; row++, t++)\n"
    "            acc += ph[t] * hg_bf16_to_f32(vb[row * kvh * d]);\n"
    "    }\n"
    "    part[id] = acc;\n"
    "}\n"
    "#define KC_PV(N) __kernel void attn_pv_##N(HG_STATUS_ARGS, HG_TENSOR(float, p), KC_BLK##N,"
    " HG_TENSOR(float, part), ulong tokens) {"
    " __global const ushort *bp[N]; hg_view bv[N]; KC_FILL##N"
    " kc_pv(hg_status, hg_task, HG_PTR(p), p_v, bp, bv, N, HG_PTR(part), part_v, tokens); }\n"
    "KC_PV(1) KC_PV(2) KC_PV(3) KC_PV(4) KC_PV(5) KC_PV(6) KC_PV(7) KC_PV(8)\n"
    "__kernel void attn_merge(HG_STATUS_ARGS, HG_TENSOR(float, st), HG_TENSOR(float, pv),\n"
    "                         HG_TENSOR(float, out)) {\n"
    "    kc_mat om;\n"
    "    if (st_v.ndims != 3 || pv_v.ndims != 3 || !kc_mat_of(out_v, &om) || om.rows != 1) {\n"
    "        HG_FAIL(1); return; }\n"
    "    ulong chunks = st_v.shape[0], hn = st_v.shape[1], d = pv_v.shape[2];\n"
    "    if (st_v.shape[2] != 2 || st_v.strides[2] != 1 || st_v.strides[1] != 2 ||\n"
    "        st_v.strides[0] != 2 * hn || pv_v.shape[0] != chunks || pv_v.shape[1] != hn ||\n"
    "        pv_v.strides[2] != 1 || pv_v.strides[1] != d || pv_v.strides[0] != hn * d ||\n"
    "        kc_cols(&om) != hn * d) { HG_FAIL(1); return; }\n"
    "    ulong r, c;\n"
    "    kc_rc(&om, get_global_id(0), &r, &c);\n"
    "    ulong h = c / d, i = c % d;\n"
    "    __global const float *stats = HG_PTR(st), *parts = HG_PTR(pv);\n"
    "    float m = -INFINITY, l = 0.0f, o = 0.0f;\n"
    "    for (ulong k = 0; k < chunks; k++)\n"
    "        m = stats[(k * hn + h) * 2] > m ? stats[(k * hn + h) * 2] : m;\n"
    "    for (ulong k = 0; k < chunks && m > -INFINITY; k++) {\n"
    "        float wc = exp(stats[(k * hn + h) * 2] - m);\n"
    "        l += wc * stats[(k * hn + h) * 2 + 1];\n"
    "        o += wc * parts[(k * hn + h) * d + i];\n"
    "    }\n"
    "    HG_PTR(out)[kc_at(&om, 0, c)] = o * (l > 0.0f ? 1.0f / l : 0.0f);\n"
    "}\n";
