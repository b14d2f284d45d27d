/*
 * kernels.h: the kernels the real-workload scenes share: a bf16-weight
 * projection (the decode step's hot spot) and the four steps of paged
 * attention, plus the matrix views they read and write.
 *
 * Tiled matrices.  A projection's output is cut into column tiles and each
 * task writes one.  The graph takes a strided view's whole extent, so for a
 * task's OUT view to be exactly the bytes it writes (and column tiles not to
 * serialise on false overlaps), tiles are stored one after another,
 * [ntiles][rows][tcols].  A kernel arg that reads such a matrix is a 3-D view
 * [ntiles, rows, tcols]; a plain row-major matrix is the 2-D [rows, cols], a
 * single row the 1-D [cols].  kern_mat reads any of them, f32 or bf16.
 *
 * Precision: bf16 values are widened exactly; f32 -> bf16 rounds to nearest
 * even.  Sums accumulate in f32.
 */
#ifndef HG_SCENES_KERNELS_KERNELS_H
#define HG_SCENES_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hostgraph.h"

/* ------------------------------------------------------------------ bf16 */

static inline float kern_bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even; NaN stays NaN (quiet). */
static inline uint16_t kern_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* e^x for x in [-87, 0], relative error ~2e-7: x = n ln2 + r with |r| <=
 * ln2 / 2, e^r by its degree-6 Taylor polynomial, 2^n through the exponent
 * bits.  Plain arithmetic with no branch, so a loop of it vectorizes (a
 * call to expf does not); a clamp in the same loop does not, since GCC 12
 * then folds the clamped lanes' constant into a branch. */
static inline float kern_exp_clamped(float x)
{
    union {
        uint32_t u;
        float f;
    } pow2;
    int n = (int)(x * 1.44269504f - 0.5f); /* round to nearest for x <= 0 */
    float r = x - (float)n * 0.693359375f + (float)n * 2.12194440e-4f;
    float p =
        1.0f +
        r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r / 720)))));
    pow2.u = (uint32_t)(n + 127) << 23;
    return p * pow2.f;
}

/* x, or -87 where x is below -87 or a NaN (e^-87 is still a normal float,
 * and the conversion to int stays in range), as the SIMD paths' max(x, -87)
 * takes it. */
static inline float kern_exp_floor(float x)
{
    return x >= -87.0f ? x : -87.0f;
}

/* e^x for x <= 0 (a softmax's scores minus their max). */
static inline float kern_exp_nonpositive(float x)
{
    return kern_exp_clamped(kern_exp_floor(x));
}

/* ------------------------------------------------------- tiled matrices */

typedef struct kern_mat {
    char *data;
    hg_dtype dtype; /* HG_F32 or HG_BF16 */
    size_t ntiles, rows, tcols;
    size_t s_tile, s_row, s_col; /* element strides */
} kern_mat;

/* Reads a kernel view as a tiled matrix; false for another dtype or dims. */
bool kern_mat_of(const hg_kview *v, kern_mat *m);

static inline size_t kern_mat_cols(const kern_mat *m)
{
    return m->ntiles * m->tcols;
}

/* Row r as cols floats into dst / from src (rounded for bf16). */
void kern_mat_get_row(const kern_mat *m, size_t r, float *dst);
/* Columns [c0, c0 + n) of row r into dst. */
void kern_mat_get_span(const kern_mat *m, size_t r, size_t c0, size_t n, float *dst);
void kern_mat_put_row(const kern_mat *m, size_t r, const float *src);

/* A dense row-major view of data (the last dim contiguous), and a direct
 * call of a kernel on views: how tests and benchmarks run one kernel outside
 * a graph. */
hg_kview kern_dense_view(void *data, hg_dtype dtype, uint32_t ndims, const size_t *shape);
int kern_call(const hg_kernel *k, const hg_kview *args, uint32_t nargs, const uint64_t *scalars,
              uint32_t nscalars);

/* ----------------------------------------------------------- projection */

/*
 * y[r][j] = sum_k bf16(x[r][k]) * w[j][k] for r < x->rows, j < n, with
 * f32 accumulation: activations are rounded to bf16 (as a bf16 model's
 * linear layers see them) on every path, so the paths differ only in the
 * order of f32 additions.  w is bf16 [n][k] with row stride ldw (k
 * contiguous, as nn.Linear stores weights); y is f32 with row stride ldy.
 * Allocates nothing (its scratch is up to ~140 KiB of stack).  Returns 0.
 */
int kern_proj(const kern_mat *x, const uint16_t *w, size_t n, size_t k, size_t ldw, float *y,
              size_t ldy);

/* The projection as a task (cube core).  Args: x (IN, tiled [rows x K]),
 * w (IN, bf16 [n, K] or [1, n, K], K contiguous), y (OUT, f32 [rows, n] or
 * [1, rows, n], rows contiguous).  Fails (1) on shapes that do not agree.
 * kern_proj_kernel's OpenCL slot takes an f32 x: an OpenCL kernel cannot
 * see a view's dtype, so a graph takes kern_proj_for(x's dtype), whose
 * slot takes that dtype (f32 or bf16; another has no slot, and an OpenCL
 * device refuses it at submit). */
extern const hg_kernel kern_proj_kernel;
const hg_kernel *kern_proj_for(hg_dtype x);

/* -------------------------------------------------------- bgemm's tiles */

/* bgemm's task functions (gemm.c), on every path.  GEMM: P = A x B; args
 * A (IN, f32 m x k), B (IN, k x n), P (OUT, m x n), rows of unit stride.
 * ADD: C += P; args P (IN), C (INOUT), the same shape.  Fail (1) on views
 * that do not agree. */
int kern_gemm_tile(const hg_kernel_ctx *ctx);
int kern_add_tile(const hg_kernel_ctx *ctx);

/* ------------------------------------------------------------- dispatch */

/* The code paths (dispatch.c): every kernel with a fast path has one per
 * level, and the level is chosen once for all of them. */
typedef enum kern_isa { KERN_PORTABLE, KERN_AVX2, KERN_AVX512BF16, KERN_ISA_COUNT } kern_isa;

/* The path the kernels take now: forced (kern_force), else HG_KERNELS
 * (portable, avx2 or avx512bf16) where the CPU has it, else the best the CPU
 * has.  A bad HG_KERNELS takes the portable path here; kern_env_check is what
 * refuses it. */
kern_isa kern_isa_now(void);
/* "portable", "avx2" or "avx512bf16" ("?" past them). */
const char *kern_isa_name(kern_isa p);
/* NULL when the CPU has path p, else the first cpuid feature it lacks, as
 * /proc/cpuinfo spells it ("avx2", "fma", "f16c", "avx512f", ...,
 * "avx512_bf16"). */
const char *kern_isa_missing(kern_isa p);
/* 0 when HG_KERNELS is unset or names a path the CPU has (the kernels then
 * take it, read again at each check); else 1 with a message in msg naming the
 * value and, for a path the CPU lacks, the missing feature.  The scene runner
 * calls it before it makes a case: a failure there is a usage error. */
int kern_env_check(char *msg, size_t len);

/* kern_isa_now() == KERN_AVX512BF16. */
bool kern_use_avx512bf16(void);
/* kern_isa_name(kern_isa_now()): the report's "kernels" field. */
const char *kern_path(void);
/* Tests and benchmarks: force path p (false, forcing nothing, when the CPU
 * lacks it), or go back to the environment and the CPU. */
bool kern_force(kern_isa p);
void kern_force_auto(void);
/* kern_force(KERN_PORTABLE) (true) or kern_force_auto() (false). */
void kern_force_portable(bool on);

/* -------------------------------------------------------- paged attention */

/*
 * One sequence's attention over its context is cut into chunks of whole
 * cache blocks; each chunk is three tasks, and a final merge combines them:
 *
 *   attn_qk      (cube)   scores[h][t] = scale * q[h] . K[t][h / group]
 *   attn_softmax (vector) m = max_t scores[h], p = exp(scores - m) in place,
 *                         l = sum_t p: the chunk's running max and sum
 *   attn_pv      (cube)   part[h] = sum_t p[h][t] V[t][h / group]
 *   attn_merge   (vector) out[h] = sum_c e^(m_c - M) part_c[h] / sum_c e^(m_c - M) l_c,
 *                         M = max_c m_c (the online-softmax combination)
 *
 * Cache blocks are [block_size, kv_heads, D] bf16 views (one task arg each,
 * since a sequence's blocks are scattered through the cache); tokens past the
 * chunk's count (a sequence's last block is partly filled) are not read.
 *
 * attn_qk args: q (IN, tiled, one row of H*D, f32 or bf16), the chunk's K
 *   blocks (IN), scores (OUT, f32 [H, ctok]); scalars: tokens, scale (f64 bits).
 * attn_softmax args: scores (INOUT), stats (OUT, f32 [H, 2]); scalar: tokens.
 * attn_pv args: probs (IN, f32 [H, ctok]), the chunk's V blocks (IN), part
 *   (OUT, f32 [H, D]); scalar: tokens.
 * attn_merge args: stats (IN, f32 [chunks, H, 2]), parts (IN, f32
 *   [chunks, H, D]), out (OUT, tiled, one row of H*D, f32 or bf16).
 */
#define KERN_ATTN_MAX_BLOCKS 8 /* K or V blocks per chunk task (16 task args) */

extern const hg_kernel kern_attn_qk;
extern const hg_kernel kern_attn_softmax;
extern const hg_kernel kern_attn_pv;
extern const hg_kernel kern_attn_merge;

/* QK and PV as a graph submits them.  An OpenCL kernel's params are fixed
 * and it cannot see a view's dtype, so their OpenCL slots come one per
 * count of cache blocks nb (1..KERN_ATTN_MAX_BLOCKS) and, for QK, per q
 * dtype (f32 or bf16): these pick the record (same name and host function
 * as kern_attn_qk and kern_attn_pv, whose own records have no OpenCL slot).
 * Outside those ranges they return the slotless record. */
const hg_kernel *kern_attn_qk_for(hg_dtype q, uint32_t nb);
const hg_kernel *kern_attn_pv_for(uint32_t nb);

/* The OpenCL program of the kernels above (opencl.c): OpenCL C 1.2 in
 * hostgraph.h's calling convention, one program for all of them. */
extern const char kern_cl_source[];

#endif
