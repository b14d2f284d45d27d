/*
 * gemm_cl.h: the OpenCL C text of the tile GEMM and ADD that bgemm's
 * OpenCL slot runs (KERN_CL_GEMM, a string literal), shared word for word
 * with the StarPU peer (bench/peers/starpu_bgemm.c), so that the two
 * runtimes are compared on the same kernels.  Only the cores live here;
 * each side wraps them in __kernel entry points of its own calling
 * convention (bgemm.c: hostgraph.h's; the peer: plain buffers and ulongs).
 *
 *   kc_gemm   P = A x B (m x k times k x n, row-major, any leading
 *             dimensions): each working item computes one KC_MR x KC_NR
 *             (16 x 16) block of P in 16 float16 accumulators, k unrolled
 *             by 4: per k step one float16 load of B's row and 16
 *             broadcasts of A.  The blocks are spread evenly over the
 *             launch (item id = block x stride; the other items return at
 *             once), so every work-group, hence every core, gets its share
 *             whatever local size the OpenCL runtime picks.  A block cut by
 *             P's last rows repeats a valid row and drops its results; one
 *             cut by the last columns goes element by element (a float16
 *             load there would read past B's row, and past its buffer on
 *             the last row).
 *   kc_add    C += P: each item of the first m does one row, 16 lanes at a
 *             time (one item per element did a 64-bit division each and
 *             cost 5x more on PoCL).
 *
 * Both expect a launch of at least m x n items (hostgraph gives one per
 * element of P or C).  Why this shape, and the variants measured against
 * it, are in docs/ARCHITECTURE.md ("OpenCL kernels").  bgemm's inputs are
 * exact in f32, so the sum order (fma, blocked) changes no result.
 */
#ifndef HG_SCENES_KERNELS_GEMM_CL_H
#define HG_SCENES_KERNELS_GEMM_CL_H

#define KERN_CL_GEMM                                                                               \
    "#define KC_MR 16\n"                                                                           \
    "#define KC_NR 16\n"                                                                           \
    "#define KC_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \\\n"                              \
    "                   X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)\n"                           \
    "#define KC_DECL(i) float16 c##i = 0; \\\n"                                                    \
    "    __global const float *a##i = a + min((ulong)(i), mr - 1) * lda;\n"                        \
    "#define KC_FMA(i) c##i = fma((float16)(a##i[kx]), bv, c##i);\n"                               \
    "#define KC_STEP(x) { ulong kx = (x); float16 bv = vload16(0, b + kx * ldb); KC_ROWS(KC_FMA) " \
    "}\n"                                                                                          \
    "#define KC_STORE(i) if ((i) < mr) vstore16(c##i, 0, p + (i) * ldp);\n"                        \
    "inline void kc_block(__global const float *a, ulong lda, __global const float *b,\n"          \
    "                     ulong ldb, ulong k, __global float *p, ulong ldp, ulong mr) {\n"         \
    "    KC_ROWS(KC_DECL)\n"                                                                       \
    "    ulong kk = 0;\n"                                                                          \
    "    for (; kk + 4 <= k; kk += 4) {\n"                                                         \
    "        KC_STEP(kk) KC_STEP(kk + 1) KC_STEP(kk + 2) KC_STEP(kk + 3)\n"                        \
    "    }\n"                                                                                      \
    "    for (; kk < k; kk++)\n"                                                                   \
    "        KC_STEP(kk)\n"                                                                        \
    "    KC_ROWS(KC_STORE)\n"                                                                      \
    "}\n"                                                                                          \
    "inline void kc_block_narrow(__global const float *a, ulong lda, __global const float *b,\n"   \
    "                            ulong ldb, ulong k, __global float *p, ulong ldp, ulong mr,\n"    \
    "                            ulong nc) {\n"                                                    \
    "    for (ulong r = 0; r < mr; r++)\n"                                                         \
    "        for (ulong c = 0; c < nc; c++) {\n"                                                   \
    "            float s = 0.0f;\n"                                                                \
    "            for (ulong kk = 0; kk < k; kk++)\n"                                               \
    "                s = fma(a[r * lda + kk], b[kk * ldb + c], s);\n"                              \
    "            p[r * ldp + c] = s;\n"                                                            \
    "        }\n"                                                                                  \
    "}\n"                                                                                          \
    "inline void kc_gemm(__global const float *a, ulong lda, __global const float *b, ulong "      \
    "ldb,\n"                                                                                       \
    "                    __global float *p, ulong ldp, ulong m, ulong n, ulong k) {\n"             \
    "    ulong bn = (n + KC_NR - 1) / KC_NR, nblocks = (m + KC_MR - 1) / KC_MR * bn;\n"            \
    "    ulong stride = max(get_global_size(0) / max(nblocks, (ulong)1), (ulong)1);\n"             \
    "    ulong id = get_global_id(0), blk = id / stride;\n"                                        \
    "    if (id % stride != 0 || blk >= nblocks)\n"                                                \
    "        return;\n"                                                                            \
    "    ulong r0 = blk / bn * KC_MR, c0 = blk % bn * KC_NR;\n"                                    \
    "    ulong mr = min((ulong)KC_MR, m - r0), nc = min((ulong)KC_NR, n - c0);\n"                  \
    "    a += r0 * lda;\n"                                                                         \
    "    b += c0;\n"                                                                               \
    "    p += r0 * ldp + c0;\n"                                                                    \
    "    if (nc == KC_NR)\n"                                                                       \
    "        kc_block(a, lda, b, ldb, k, p, ldp, mr);\n"                                           \
    "    else\n"                                                                                   \
    "        kc_block_narrow(a, lda, b, ldb, k, p, ldp, mr, nc);\n"                                \
    "}\n"                                                                                          \
    "inline void kc_add(__global const float *p, ulong ldp, __global float *c, ulong ldc,\n"       \
    "                   ulong m, ulong n) {\n"                                                     \
    "    ulong r = get_global_id(0), col = 0;\n"                                                   \
    "    if (r >= m)\n"                                                                            \
    "        return;\n"                                                                            \
    "    p += r * ldp;\n"                                                                          \
    "    c += r * ldc;\n"                                                                          \
    "    for (; col + 16 <= n; col += 16)\n"                                                       \
    "        vstore16(vload16(0, c + col) + vload16(0, p + col), 0, c + col);\n"                   \
    "    for (; col < n; col++)\n"                                                                 \
    "        c[col] += p[col];\n"                                                                  \
    "}\n"

#endif
