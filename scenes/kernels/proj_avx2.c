/*
 * proj_avx2.c: the bf16 projection's AVX2 + FMA path (kern_proj takes it
 * when kern_isa_now() is KERN_AVX2).
 *
 * Without vdpbf16ps each weight is widened to f32 (a bf16 is an f32's top
 * half: vpunpck{l,h}wd with zero) and multiplied in f32 FMAs: 16 rows cost 16
 * multiply-adds per weight, two 8-lane FMAs per cycle make ~2 weight bytes
 * per cycle per core, so this path is bound by the FMA pipes, not memory.
 * Everything else in the loop costs only where it takes the FMAs' issue
 * slots, and bench/fma_mix measures which instructions do: on AMD Zen 3 a
 * 256-bit store takes 2 FMA slots, vhaddps 1.3-2.1, vpmovzxwd 1.3, a load
 * from L1 0.1-0.6, vpunpcklwd and vaddps next to none.  The kernel's shape:
 *
 *   - a chunk of weight rows goes in K blocks of P2_KBLOCK (1024) columns,
 *     and each K block in sub-blocks of P2_SUB (24) rows: the sub-block's
 *     piece (24 x 2 KiB) stays in L2 while 4 passes read it (with the
 *     prefetch below, 24 rows ran 1.01-1.03x 48 on Z3, 12 the same as 24);
 *   - a pass takes 4 of the 16 x rows (a quad) against every group of 3
 *     weight rows of the sub-block: 12 ymm accumulators, 3 weight vectors
 *     and one register that is first a zero and then x fill the 16
 *     registers.  Each 16 columns of a row are widened in the pass that
 *     uses them (one vpunpcklwd and one vpunpckhwd against a fresh zero,
 *     from L1 or L2), never stored: on Zen 3 the old first pass, which
 *     stored the widened rows for three passes to read back, ran at
 *     0.74-0.76 of the FMA rate against 0.90-0.99 for a pass that widens
 *     again (fma_mix);
 *   - x (16 rows, rounded to bf16 and widened back: exactly what the other
 *     paths multiply) is laid out per quad and 8 columns, the quad's 4 rows
 *     side by side ([quad][K / 8][4][8], 64 KiB; a quad's 16 KiB in L1 for a
 *     pass), each 16 columns in the order the unpacks leave the weights
 *     (P2_POS).  With the 4 rows 4 KiB apart instead, the same loop ran at
 *     0.50-0.55 of the FMA rate on Zen 3, all in L1 (0.82-0.97 side by
 *     side: fma_mix's last two rows);
 *   - a pass's loop over the block is one asm statement, so that its 12
 *     sums stay in registers (GCC spilled one and moved the others between
 *     registers);
 *   - the next sub-block's rows (the next K block's first, after the last)
 *     are prefetched into L2 a line of up to 3 rows per 32 columns, spread
 *     over all the passes' groups, so that they come from memory at the
 *     rate the passes use them.  Before, the first pass over a sub-block
 *     prefetched the group 2 ahead of itself: that pass asks 4 weight
 *     bytes per FMA pair where the whole kernel averages 1, so memory was
 *     busy a quarter of the time at 4 times the rate;
 *   - a pass's 12 sums go through a tree of unpacks and adds (not vhaddps)
 *     into acc[row][16], which goes to y once per chunk; where the K block
 *     has no tail, straight from the asm's registers (with a tail GCC
 *     stored the 12 sums to the stack and read them back for each step).
 *
 * On host Z3 (AMD EPYC, Zen 3, 2026-12-07) this took one thread from
 * 0.63-0.75 to 0.68-0.84 of the FMA ceiling with the weights in L3 (1.06-1.11x
 * the kernel before it, side by side in one process) and two threads from
 * DRAM 1.02-1.06x (docs/PERFORMANCE.md, "On host Z3").  The spread
 * prefetch, the sums from registers, x in one pass, 24-row sub-blocks and
 * two moving pointers then took one thread from DRAM from 0.80-0.82 to 0.88
 * of the FMA rate (best of 40 reps), and decode_bandwidth's 2-thread medians
 * from 0.62-0.68 to 0.68-0.77 ("Then the first pass's burst").
 *
 * The sums are f32 FMAs in another order than the portable path's: tests
 * compare both with a double reference, within the same stated bound.
 */
#include <stddef.h>
#include <string.h>

#include "paths.h"

#if KERN_HAVE_X86
#define P2_INLINE __attribute__((always_inline)) static inline
#define P2_ROWS   16
#define P2_KBLOCK 1024 /* columns: a quad of x is 16 KiB (512 and 2048 measured slower) */
#define P2_SUB    24   /* weight rows a K block's passes share: 48 KiB, in L2 */
#define P2_WROWS  3
#define P2_XR     4 /* x rows per pass: a quad */
#define P2_CHUNK  512
/* Where column c of a 16-column piece sits in x: the unpacks leave a
 * piece's columns 0-3 and 8-11 in one vector (lanes 0-7), 4-7 and 12-15 in
 * the other (lanes 8-15). */
#define P2_POS(c) ((c) < 4 ? (c) : (c) < 8 ? (c) + 4 : (c) < 12 ? (c)-4 : (c))

/* x row r of the quad at 8-column block xb (bytes: 128 a block) times the
 * 3 widened weight vectors (ymm12-14) into sums a0..a2. */
#define P2_XROW(xb, r, a0, a1, a2)                                                                 \
    "vmovaps " #xb "+" #r "(%[x]), %%ymm15\n\t"                                                    \
    "vfmadd231ps %%ymm12, %%ymm15, %[" #a0 "]\n\t"                                                 \
    "vfmadd231ps %%ymm13, %%ymm15, %[" #a1 "]\n\t"                                                 \
    "vfmadd231ps %%ymm14, %%ymm15, %[" #a2 "]\n\t"
/* The 16 bf16 at byte wo of the row at addr (w0, or w0 plus a row's offset
 * o1 or o2), one half widened against the zero in ymm15, into ymm`reg`. */
#define P2_UNPACK(unpack, wo, addr, reg) unpack " " #wo addr ", %%ymm15, %%ymm" #reg "\n\t"
/* 8 columns: the 3 rows' low (vpunpcklwd) or high half widened against a
 * zero made in ymm15 (vpxor: a zero idiom, no port), then the quad's 4 rows
 * at xb. */
#define P2_HALF(unpack, wo, xb)                                                                    \
    "vpxor %%xmm15, %%xmm15, %%xmm15\n\t" P2_UNPACK(unpack, wo, "(%[w0])", 12)                     \
        P2_UNPACK(unpack, wo, "(%[w0],%[o1])", 13) P2_UNPACK(unpack, wo, "(%[w0],%[o2])", 14)      \
            P2_XROW(xb, 0, a00, a10, a20) P2_XROW(xb, 32, a01, a11, a21)                           \
                P2_XROW(xb, 64, a02, a12, a22) P2_XROW(xb, 96, a03, a13, a23)
/* 32 columns, with the lines at w0 + p0, p1 and p2 prefetched (offsets
 * from the first row, so that a step moves two pointers), then the
 * pointers to the next 32. */
#define P2_PREFETCH(p) "prefetcht1 (%[w0],%[" #p "])\n\t"
#define P2_BODY                                                                                    \
    "" P2_PREFETCH(p0) P2_PREFETCH(p1) P2_PREFETCH(p2) P2_HALF("vpunpcklwd", 0, 0)                 \
        P2_HALF("vpunpckhwd", 0, 128) P2_HALF("vpunpcklwd", 32, 256)                               \
            P2_HALF("vpunpckhwd", 32, 384)
#define P2_NEXT "add $64, %[w0]\n\tadd $512, %[x]\n\t"
#define P2_SUMS(c)                                                                                 \
    [a00] c(a[0][0]), [a01] c(a[0][1]), [a02] c(a[0][2]), [a03] c(a[0][3]), [a10] c(a[1][0]),      \
        [a11] c(a[1][1]), [a12] c(a[1][2]), [a13] c(a[1][3]), [a20] c(a[2][0]), [a21] c(a[2][1]),  \
        [a22] c(a[2][2]), [a23] c(a[2][3])
#define P2_IN_OUT(v) "+x"(v)
#define P2_OUT(v)    "=&x"(v)
#define P2_ZERO(r)   "vxorps %x[" #r "], %x[" #r "], %x[" #r "]\n\t"
#define P2_ZEROS                                                                                   \
    "" P2_ZERO(a00) P2_ZERO(a01) P2_ZERO(a02) P2_ZERO(a03) P2_ZERO(a10) P2_ZERO(a11) P2_ZERO(a12)  \
        P2_ZERO(a13) P2_ZERO(a20) P2_ZERO(a21) P2_ZERO(a22) P2_ZERO(a23)

/* a += the 3 rows' 16 columns at r0.. times the quad's x at x0 (the 16
 * columns' 4 x 16 floats). */
KERN_AVX2_TARGET P2_INLINE void p2_step(__m256 a[P2_WROWS][P2_XR], const uint16_t *r0,
                                        const uint16_t *r1, const uint16_t *r2, const float *x0)
{
    __asm__(P2_HALF("vpunpcklwd", 0, 0) P2_HALF("vpunpckhwd", 0, 128)
            : P2_SUMS(P2_IN_OUT)
            : [w0] "r"(r0), [o1] "r"((r1 - r0) * 2), [o2] "r"((r2 - r0) * 2), [x] "r"(x0)
            : "xmm12", "xmm13", "xmm14", "xmm15", "memory");
}

/* a = the same over n32 x 32 columns (n32 > 0), prefetching a line from
 * each of pf[0..3) each 32 columns: one asm statement, so that the 12 sums
 * stay in registers. */
KERN_AVX2_TARGET P2_INLINE void p2_run(__m256 a[P2_WROWS][P2_XR], const uint16_t *r0,
                                       const uint16_t *r1, const uint16_t *r2, const float *x0,
                                       size_t n32, const uint16_t *const pf[P2_WROWS])
{
    __asm__(P2_ZEROS ".p2align 6\n\t1:\n\t" P2_BODY P2_NEXT "dec %[n]\n\tjnz 1b\n\t"
            : P2_SUMS(P2_OUT), [w0] "+r"(r0), [x] "+r"(x0), [n] "+r"(n32)
            : [o1] "r"((r1 - r0) * 2), [o2] "r"((r2 - r0) * 2), [p0] "r"((pf[0] - r0) * 2),
              [p1] "r"((pf[1] - r0) * 2), [p2] "r"((pf[2] - r0) * 2)
            : "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
}

/* The sums of a, b, c and d's lanes: unpacks and adds (on Zen 3 a vhaddps
 * takes 1.3-2.1 FMA slots, these next to none). */
KERN_AVX2_TARGET P2_INLINE __m128 p2_hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 ab = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    __m256 cd = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
    __m256 s = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xee));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/* One K block of a sub-block of weight rows. */
typedef struct p2_sub {
    const float *xf; /* [P2_ROWS / P2_XR][P2_KBLOCK / 8][P2_XR][8], zero past kb and nrows */
    size_t kb;
    const uint16_t *w;    /* the sub-block's first row at the K block */
    size_t n, ldw;        /* its rows (<= P2_SUB) */
    float *acc;           /* [n][P2_ROWS] */
    const uint16_t *next; /* the next sub-block's first row (to prefetch), or NULL */
    size_t next_n;        /* its rows */
} p2_sub;

/* A pass's sums of group j into acc (rows past n dropped).  Unrolled, with
 * constant indices, so that the sums stay in registers. */
KERN_AVX2_TARGET P2_INLINE void p2_add_sums(const p2_sub *b, size_t j, int p,
                                            __m256 a[P2_WROWS][P2_XR])
{
    float *dst = b->acc + j * P2_ROWS + P2_XR * (size_t)p;
#pragma GCC unroll 3
    for (int i = 0; i < P2_WROWS; i++) {
        if (j + (size_t)i < b->n) {
            float *d = dst + (size_t)i * P2_ROWS;
            _mm_storeu_ps(
                d, _mm_add_ps(_mm_loadu_ps(d), p2_hsum4(a[i][0], a[i][1], a[i][2], a[i][3])));
        }
    }
}

/* acc[j][4p .. 4p + 4) += x's quad p . weight row j over the block, for each
 * of the sub-block's rows, quad after quad.  Rows past n in the last group
 * repeat its first; their sums are dropped.  The last kb % 16 columns come
 * from a zero-padded copy, so w is not read past kb. */
KERN_AVX2_TARGET static void p2_sub_run(const p2_sub *b, int passes)
{
    uint16_t tail[P2_SUB][16] __attribute__((aligned(32)));
    size_t kfull = b->kb / 16 * 16, len = b->kb - kfull, k32 = kfull / 32 * 32;
    if (len != 0) {
        memset(tail, 0, sizeof tail);
        for (size_t i = 0; i < b->n; i++)
            memcpy(tail[i], b->w + i * b->ldw + kfull, len * sizeof(uint16_t));
    }
    /* the next sub-block's rows: a share prefetched in each group's pass */
    size_t groups = (b->n + P2_WROWS - 1) / P2_WROWS, gp = (size_t)passes * groups, f0 = 0;
    for (int p = 0; p < passes; p++) {
        const float *x0 = b->xf + (size_t)p * P2_KBLOCK * P2_XR;
        for (size_t j = 0; j < b->n; j += P2_WROWS) {
            size_t i1 = j + 1 < b->n ? j + 1 : j, i2 = j + 2 < b->n ? j + 2 : j;
            const uint16_t *r0 = b->w + j * b->ldw, *r1 = b->w + i1 * b->ldw,
                           *r2 = b->w + i2 * b->ldw;
            /* this group's share of the next sub-block's rows to prefetch
             * (0 to 3 of them; none: its own rows, already in cache) */
            size_t idx = (size_t)p * groups + j / P2_WROWS + 1;
            size_t f1 = b->next == NULL ? 0 : idx * b->next_n / gp;
            size_t m = f1 - f0 < P2_WROWS ? f1 - f0 : P2_WROWS; /* more: left to the hardware */
            const uint16_t *pf[P2_WROWS];
            for (size_t i = 0; i < P2_WROWS; i++)
                pf[i] = m == 0 ? r0 : b->next + (f0 + (i < m ? i : m - 1)) * b->ldw;
            f0 = f1;
            if (k32 == b->kb) { /* no tail: the sums stay in registers */
                __m256 a[P2_WROWS][P2_XR];
                p2_run(a, r0, r1, r2, x0, k32 / 32, pf);
                p2_add_sums(b, j, p, a);
                continue;
            }
            __m256 a[P2_WROWS][P2_XR];
            if (k32 != 0) {
                p2_run(a, r0, r1, r2, x0, k32 / 32, pf);
            } else {
                for (int i = 0; i < P2_WROWS; i++) {
                    for (int r = 0; r < P2_XR; r++)
                        a[i][r] = _mm256_setzero_ps();
                }
            }
            if (k32 < kfull)
                p2_step(a, r0 + k32, r1 + k32, r2 + k32, x0 + P2_XR * k32);
            if (len != 0)
                p2_step(a, tail[j], tail[i1], tail[i2], x0 + P2_XR * kfull);
            p2_add_sums(b, j, p, a);
        }
    }
}

/* f32 rounded to bf16 (nearest even, NaN stays a quiet NaN) and widened
 * back, 8 lanes: kern_f32_to_bf16's arithmetic. */
KERN_AVX2_TARGET P2_INLINE __m256 round_bf16(__m256 v)
{
    __m256i u = _mm256_castps_si256(v), top = _mm256_set1_epi32((int)0xffff0000u);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_or_si256(_mm256_and_si256(u, top), _mm256_set1_epi32(0x400000));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_and_si256(r, top), quiet, nan));
}

/* n16 x 16 floats at src, rounded, into xf's slots for one x row from q
 * on (8 columns a slot, slots P2_XR x 8 floats apart), each 16 columns in
 * P2_POS order (columns 4-7 and 8-11 change places). */
KERN_AVX2_TARGET static void xf_put16(const float *src, size_t n16, float *q)
{
    for (size_t g = 0; g < n16; g++, src += 16, q += 2 * P2_XR * 8) {
        __m256 lo = round_bf16(_mm256_loadu_ps(src)), hi = round_bf16(_mm256_loadu_ps(src + 8));
        _mm256_store_ps(q, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_store_ps(q + P2_XR * 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

/* x rows [r0, r0 + nrows), columns [k0, k0 + kb), rounded, into xf: per
 * quad and 8 columns the quad's 4 rows side by side, zero padded to 16 rows
 * and to a multiple of 16 columns, each 16 columns in P2_POS order.  An f32
 * row whose tiles hold whole 16s goes straight in; anything else (bf16,
 * strided, or pieces not in whole 16s) through a zero-padded row buffer. */
KERN_AVX2_TARGET static void load_xf(const kern_mat *x, size_t r0, size_t nrows, size_t k0,
                                     size_t kb, float *xf)
{
    size_t kpad = (kb + 15) / 16 * 16;
    bool direct = x->dtype == HG_F32 && x->s_col == 1 && kb % 16 == 0 && x->tcols % 16 == 0;
    float row[P2_KBLOCK] __attribute__((aligned(32)));
    for (size_t r = 0; r < P2_ROWS; r++) {
        float *q = xf + r / P2_XR * P2_KBLOCK * P2_XR + r % P2_XR * 8;
        if (r >= nrows) {
            for (size_t c = 0; c < kpad; c += 8)
                _mm256_store_ps(q + c * P2_XR, _mm256_setzero_ps());
            continue;
        }
        if (direct) { /* one tile's piece of the row at a time, whole 16s */
            for (size_t i = 0; i < kb;) {
                size_t c = k0 + i, off = c % x->tcols;
                size_t len = kb - i < x->tcols - off ? kb - i : x->tcols - off;
                xf_put16((const float *)x->data + (c / x->tcols) * x->s_tile + (r0 + r) * x->s_row +
                             off,
                         len / 16, q + i * P2_XR);
                i += len;
            }
            continue;
        }
        memset(row + kb, 0, (kpad - kb) * sizeof(float));
        kern_mat_get_span(x, r0 + r, k0, kb, row);
        xf_put16(row, kpad / 16, q);
    }
}

KERN_AVX2_TARGET void kern_proj_chunk_avx2(const kern_mat *x, size_t r0, size_t nrows,
                                           const uint16_t *w, size_t n, size_t k, size_t ldw,
                                           float *y, size_t ldy)
{
    float xf[P2_ROWS * P2_KBLOCK] __attribute__((aligned(32)));
    float acc[P2_CHUNK * P2_ROWS] __attribute__((aligned(32)));
    int passes = (int)((nrows + P2_XR - 1) / P2_XR); /* passes of padding rows only: skipped */
    memset(acc, 0, n * P2_ROWS * sizeof(float));
    for (size_t k0 = 0; k0 < k; k0 += P2_KBLOCK) {
        size_t kb = k - k0 < P2_KBLOCK ? k - k0 : P2_KBLOCK;
        load_xf(x, r0, nrows, k0, kb, xf);
        for (size_t j0 = 0; j0 < n; j0 += P2_SUB) {
            /* the next sub-block: of this K block, or the next K block's first */
            size_t j1 = j0 + P2_SUB;
            const uint16_t *nx = j1 < n               ? w + j1 * ldw + k0
                                 : k0 + P2_KBLOCK < k ? w + k0 + P2_KBLOCK
                                                      : NULL;
            size_t nn = j1 < n ? (n - j1 < P2_SUB ? n - j1 : P2_SUB) : n < P2_SUB ? n : P2_SUB;
            p2_sub b = {.xf = xf,
                        .kb = kb,
                        .w = w + j0 * ldw + k0,
                        .n = n - j0 < P2_SUB ? n - j0 : P2_SUB,
                        .ldw = ldw,
                        .acc = acc + j0 * P2_ROWS,
                        .next = nx,
                        .next_n = nn};
            p2_sub_run(&b, passes);
        }
    }
    for (size_t r = 0; r < nrows; r++) {
        for (size_t j = 0; j < n; j++)
            y[r * ldy + j] = acc[j * P2_ROWS + r];
    }
}
#endif
