/*
 * attention_avx2.c: attention's AVX2 + FMA paths (QK, softmax, PV), taken
 * when kern_isa_now() is KERN_AVX2.  K and V rows are bf16; sums are f32
 * FMAs.
 *
 *   QK: two tokens at a time, each kv head's two rows against up to 5 heads
 *       of its group: one q vector loaded serves both tokens' FMAs, 10
 *       accumulators (on host X, Intel, 2026-12-03, 0.52 of the FMA ceiling
 *       with K in cache against 0.48 for one token at a time).  With 5
 *       heads (Qwen3's pass) or 3 (the rest of a group of 8) and D a
 *       multiple of 16 the loop is one asm statement (qk_asm) that reads 16
 *       dims of a row in one 32-byte load and splits them without a
 *       shuffle, as PV does (below), against q laid out per 16 dims as the
 *       8 even then the 8 odd; other passes take 8
 *       dims at a time in order (vpmovzxwd + shift, which costs Zen 3 1.3
 *       FMA slots: bench/fma_mix).  q is laid out per pass and read through
 *       one pointer with constant offsets.  The two tokens come one from
 *       each half of the chunk, so that each half's rows are read in order:
 *       the hardware prefetchers follow two such streams, where two
 *       adjacent tokens' rows (the two halves of one 4 KiB page, read in
 *       turn) they did not.  In a 1-layer qwen3_decode step (preset=real,
 *       --device sim:cores=2, host X, 2026-12-03) QK's tasks took 9.8-10.5
 *       ms against 14.6-15.1 with adjacent tokens; with no software prefetch
 *       at all, in a one-thread harness, K came at 8.6-9.9 GB/s against
 *       6.7-7.0.  A pass's two sums of a head are folded into one vector
 *       (an unpack and an add: 4 partial sums of each token) and stored to
 *       a stack tile; 8 token pairs of a head are then reduced at once
 *       (unpacks, adds, two 128-bit swaps) to 8 scores of each half, stored
 *       as two row pieces, not one hadd tree per dot product with scattered
 *       stores (on host X, 2026-12-02, that reduction and its latency cost a
 *       third of QK).  The asm loop, the folded store and the unpack tree in
 *       place of vhaddps took QK 1.08x with K in L2 on one thread and 1.12x
 *       from DRAM on two (host Z3, AMD Zen 3, 2026-12-07, both versions in
 *       one process, order swapped every rep); without the fold 1.05x
 *       and 0.99x.  A group of 5 (Qwen3's) takes its one pass per kv head
 *       without the dispatch on head counts: 5% fewer instructions, 1.02x.
 *   PV: a block of A2_TB tokens at a time: per slab of 16 dims, up to 5
 *       heads accumulate in 10 registers over the block's tokens, in token
 *       order as the portable loop adds.  A row is read 16 bf16 (one 32-byte
 *       load) at a time and split without a shuffle: a 32-bit lane holds two
 *       bf16, so (lane << 16) is the even one as f32 and (lane & 0xffff0000)
 *       the odd one; part is laid out to match (per 16 dims, the 8 even then
 *       the 8 odd; a tail of 8 dims stays in order and is widened as 8) and
 *       goes back to dims in order at the end.  The token loop is unrolled
 *       over the whole block: 4 times took PV 1.12x with V in cache on host
 *       X (2026-12-03), 16 times 1.07-1.09x over 4 with V in L2 and
 *       1.03-1.09x from DRAM on two threads on host Z3 (2026-12-07).  A
 *       pass's addresses are set once per block (pv_pass: each head's
 *       weights, part's rows, V's offset; D = 128 has an instance with
 *       part's rows at constant offsets), and a whole block's token loop
 *       has no test a token: a token is 10 FMAs, 5 broadcasts, a row
 *       pointer, a load, a shift and an and.  With the addresses formed in
 *       each slab GCC spent a lea a head per token and ~50 instructions a
 *       slab: PV ran 25% more instructions (callgrind, a 512-token chunk);
 *       now 1.22-1.28x with V in L2, 1.26x from DRAM on one thread and
 *       1.25-1.31x on two (host Z3, 2026-12-07, both versions in one
 *       process, medians of 40-60 pairs, the same bits).
 *   QK takes D = 128 (Qwen3's head size) through its own instance, whose
 *       loops' bounds are constants: on host X (2026-12-03) QK with K in L2
 *       went from 0.57-0.61 to 0.60-0.67 of the FMA ceiling on one thread,
 *       and from DRAM on two from 36.3-37.8 to 38.2-39.3 GB/s (K and V's
 *       bytes, as decode_bandwidth counts them).
 *   Prefetch: QK's rows A2_AHEAD tokens on in each half (into L2: 3-4%
 *       faster than into L1 with the halves; 3 tokens on measured better
 *       than 2 or 4 on host X, 8 slower), each kv head's piece of both rows
 *       before that kv head's sums, and PV's next A2_TB tokens (into L2,
 *       those in the same cache block as the first: their rows are
 *       contiguous), a few lines between every pass rather than at once: a
 *       burst of 32 prefetches waits on the L1's fill buffers, and with
 *       them K and V came at ~8 GB/s a thread against ~12 spread out.
 *       PV's share before each slab (8 lines at Qwen3's shape) is 8
 *       prefetches at constant offsets from a pointer in a register; as a
 *       loop that tested the end at each line and kept the pointer in
 *       memory it cost PV 10% more instructions (callgrind, two 512-token
 *       chunks: 1,696,888 against 1,519,290) and ran 0.86-0.93x from DRAM on
 *       one and two threads with the scores in cache, 0.93-0.99x with K and
 *       V in L2 (host Z3, 2026-12-07, both in one process, the same bits,
 *       built -O2 and -O3).  In the 1-layer step (trace, sim:cores=2, eight
 *       alternations) PV's tasks took 9.0 core-ms a round against 9.8, and
 *       QK's beside them 11.1 against 10.6: the two share the memory.
 *   softmax: the portable arithmetic lane for lane (16 lanes as two
 *       vectors, exp in the same operations), so the same bits; the exps
 *       go two groups of 16 (four vectors) at a time, step by step across
 *       the four, so that their long dependent chains overlap
 *       (exp8_nonpositive).
 *
 * QK and PV sum in another order (and with fused multiply-adds) than the
 * portable loops: tests hold both to the same stated bound.
 */
#include <math.h>
#include <string.h>

#include "paths.h"

#if KERN_HAVE_X86
#define A2_INLINE  __attribute__((always_inline)) static inline
#define A2_QK_MAXH 5    /* heads per QK pass: 10 accumulators (two tokens) */
#define A2_QK_TB   16   /* QK's tokens per batch of sums: 8 from each half */
#define A2_QK_QMAX 8192 /* floats of q (heads x D) QK lays out on its stack */
#define A2_QK_HMAX 64   /* heads QK sums on its stack: 32 KiB */
#define A2_PV_MAXH 5    /* heads per PV pass: 10 accumulators, 2 V vectors, 1 weight */
/* PV's tokens per block (and so how far ahead it prefetches): with K and V
 * from DRAM on host X (2026-12-03) PV alone read V at 20-22 GB/s with 16,
 * 17.5 with 32, 15 with 64 (8 and 24: 18-19). */
#define A2_TB 16
_Static_assert(A2_TB == 16, "pv_slab's unroll pragma is A2_TB's value");
#define A2_AHEAD 3 /* QK prefetches the rows this many tokens on, into L2 */

/* Token t's row (kv head 0). */
A2_INLINE const uint16_t *token_row(const chunk_blocks *cb, size_t t)
{
    const hg_kview *b = &cb->blocks[t / cb->block_size];
    return (const uint16_t *)b->data + (t % cb->block_size) * b->strides[0];
}

/* The rows of tokens [t, t + n) (all in the chunk) into out, with one
 * division: a 64-bit div takes 10-20 cycles on Zen 3, and PV took one a
 * token. */
A2_INLINE void rows_at(const chunk_blocks *cb, size_t t, size_t n, const uint16_t **out)
{
    const hg_kview *b = &cb->blocks[t / cb->block_size];
    for (size_t i = 0, o = t % cb->block_size; i < n; i++) {
        out[i] = (const uint16_t *)b->data + o * b->strides[0];
        if (++o == cb->block_size)
            b++, o = 0;
    }
}

/* Calls `call(n)` with the constant n = nh (1..max), so that each instance
 * keeps its sums in registers. */
#define A2_BY_NH(nh, call)                                                                         \
    switch (nh) {                                                                                  \
    case 1:                                                                                        \
        call(1);                                                                                   \
        break;                                                                                     \
    case 2:                                                                                        \
        call(2);                                                                                   \
        break;                                                                                     \
    case 3:                                                                                        \
        call(3);                                                                                   \
        break;                                                                                     \
    case 4:                                                                                        \
        call(4);                                                                                   \
        break;                                                                                     \
    case 5:                                                                                        \
        call(5);                                                                                   \
        break;                                                                                     \
    case 6:                                                                                        \
        call(6);                                                                                   \
        break;                                                                                     \
    case 7:                                                                                        \
        call(7);                                                                                   \
        break;                                                                                     \
    default:                                                                                       \
        call(8);                                                                                   \
        break;                                                                                     \
    }

/* A run of bytes to prefetch a few lines at a time, between FMAs (a burst
 * of prefetches waits for the L1's fill buffers). */
typedef struct a2_pf {
    const char *p, *end;
} a2_pf;

/* The next `lines` lines of f into L2 (the last step may ask a few lines
 * past its end: a prefetch never faults); 8 lines, PV's share a slab at
 * Qwen3's shape, as 8 prefetches at constant offsets. */
KERN_AVX2_TARGET A2_INLINE void pf_step(a2_pf *f, size_t lines)
{
    const char *p = f->p;
    if (p >= f->end)
        return;
    if (lines == 8) {
#pragma GCC unroll 8
        for (size_t i = 0; i < 8; i++)
            _mm_prefetch(p + 64 * i, _MM_HINT_T1);
    } else {
        for (size_t i = 0; i < lines; i++)
            _mm_prefetch(p + 64 * i, _MM_HINT_T1);
    }
    f->p = p + 64 * lines;
}

/* ------------------------------------------------------------------- QK */

/* 16 floats as the 8 even then the 8 odd (src and dst do not overlap). */
A2_INLINE void even_odd16(const float *src, float *dst)
{
    for (size_t i = 0; i < 8; i++) {
        dst[i] = src[2 * i];
        dst[8 + i] = src[2 * i + 1];
    }
}

/* Whether a pass of nh heads takes qk_asm's loop (else qk_heads' 8-dim
 * steps). */
#define A2_QK_ASM(nh, d) (((nh) == A2_QK_MAXH || (nh) == 3) && (d) >= 16 && (d) % 16 == 0)
_Static_assert(A2_QK_MAXH == 5, "qk_asm's loops take 5 heads (QK5_HALF) or 3");

/* QK's q, laid out per pass (the nh heads from h0 of one kv head), so that
 * the loop reads q through one pointer and constant offsets: for qk_asm, per
 * 16 dims each head's 8 even then 8 odd dims, the heads side by side
 * ([c / 16][nh][16]); for qk_heads, the heads' 8 dims from c side by side
 * ([c / 8][nh][8]). */
KERN_AVX2_TARGET static void qk_layout(const float *q, size_t kv_heads, size_t group, size_t d,
                                       float *dst)
{
    for (size_t g = 0; g < kv_heads; g++) {
        for (size_t h0 = g * group; h0 < (g + 1) * group; h0 += A2_QK_MAXH) {
            size_t left = (g + 1) * group - h0, nh = left < A2_QK_MAXH ? left : A2_QK_MAXH;
            size_t step = A2_QK_ASM(nh, d) ? 16 : 8;
            for (size_t c = 0; c < d; c += step) {
                for (size_t h = 0; h < nh; h++, dst += step) {
                    if (step == 16)
                        even_odd16(q + (h0 + h) * d + c, dst);
                    else
                        memcpy(dst, q + (h0 + h) * d + c, 8 * sizeof(float));
                }
            }
        }
    }
}

/* n rows of d in place, per 16 dims the 8 even then the 8 odd (a tail of 8
 * stays): PV's part in the order its loop accumulates; unpermute16 undoes
 * it. */
KERN_AVX2_TARGET static void permute16(float *x, size_t n, size_t d)
{
    for (size_t h = 0; h < n; h++) {
        for (size_t c = 0; c + 16 <= d; c += 16) {
            float t[16];
            even_odd16(x + h * d + c, t);
            memcpy(x + h * d + c, t, sizeof t);
        }
    }
}

/* nh (5 or 3) heads against two rows, n steps of 16 dims, into a[nh] and
 * b[nh]: one asm loop, so that the sums, the rows' vectors, q and the mask
 * stay in registers (GCC, given the same in C, kept a row on the stack).  A
 * row's 16 dims are one 32-byte load, split without a shuffle: a 32-bit
 * lane holds two bf16, (lane << 16) the even one as f32, (lane & 0xffff0000)
 * the odd one, against q's even and odd dims (qk_layout: head h's at 64 h
 * and 64 h + 32 bytes of a step).  The odd halves are loaded again with the
 * vpand (an L1 hit) rather than kept: two registers fewer.  A group of 8
 * takes a pass of 5 and one of 3: the 3 in this loop ran 0.77 of the FMA
 * rate (pass and fold, in L1) against 0.68-0.69 in the 8-dim C loop, and QK
 * at a group of 8 1.04-1.05x with K in L2 on one thread and 1.03-1.04x from
 * DRAM on two (host Z3, 2026-12-07, both in one process;
 * docs/PERFORMANCE.md, "Then, near midnight"). */
#define QK_HEAD(qo, h)                                                                             \
    "vmovaps " #h "*64+" #qo "(%[q]), %%ymm12\n\t"                                                 \
    "vfmadd231ps %%ymm12, %%ymm10, %[a" #h "]\n\t"                                                 \
    "vfmadd231ps %%ymm12, %%ymm11, %[b" #h "]\n\t"
#define QK5_HALF(qo) QK_HEAD(qo, 0) QK_HEAD(qo, 1) QK_HEAD(qo, 2) QK_HEAD(qo, 3) QK_HEAD(qo, 4)
#define QK3_HALF(qo) QK_HEAD(qo, 0) QK_HEAD(qo, 1) QK_HEAD(qo, 2)

/* 16 dims: the rows' even halves (shifted) against q's even dims, their
 * odd halves (masked with ymm13) against q's odd dims, then the pointers to
 * the next 16 (q: `qstep` bytes, 64 a head). */
#define QK_EVEN                                                                                    \
    "vmovdqu (%[k0]), %%ymm10\n\t"                                                                 \
    "vmovdqu (%[k1]), %%ymm11\n\t"                                                                 \
    "vpslld $16, %%ymm10, %%ymm10\n\t"                                                             \
    "vpslld $16, %%ymm11, %%ymm11\n\t"
#define QK_ODD                                                                                     \
    "vpand (%[k0]), %%ymm13, %%ymm10\n\t"                                                          \
    "vpand (%[k1]), %%ymm13, %%ymm11\n\t"
#define QK_NEXT(qstep)                                                                             \
    "add $32, %[k0]\n\t"                                                                           \
    "add $32, %[k1]\n\t"                                                                           \
    "add $" #qstep ", %[q]\n\t"
/* The loop starts a 64-byte line: where the code around it left it
 * unaligned, QK at Qwen3's group ran 0.93-0.94x from DRAM on two threads
 * (host Z3, 2026-12-07, side by side). */
#define QK_LOOP(half, qstep)                                                                       \
    "vmovdqa %[top], %%ymm13\n\t"                                                                  \
    ".p2align 6\n\t1:\n\t" QK_EVEN half(0) QK_ODD half(32) QK_NEXT(qstep) "dec %[n]\n\tjnz 1b\n\t"
/* Both loops' operands: a 3-head pass leaves a3, a4, b3 and b4 alone. */
#define QK_OPERANDS                                                                                \
    : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), [a4] "+x"(a4), [b0] "+x"(b0),   \
      [b1] "+x"(b1), [b2] "+x"(b2), [b3] "+x"(b3), [b4] "+x"(b4), [q] "+r"(q), [k0] "+r"(k0),     \
      [k1] "+r"(k1), [n] "+r"(n)                                                                   \
    : [top] "m"(top)                                                                               \
    : "xmm10", "xmm11", "xmm12", "xmm13", "cc", "memory"

/* n > 0 steps (A2_QK_ASM). */
KERN_AVX2_TARGET A2_INLINE void qk_asm(const float *q, const uint16_t *k0, const uint16_t *k1,
                                       size_t n, int nh, __m256 *a, __m256 *b)
{
    static const uint32_t top[8]
        __attribute__((aligned(32))) = {0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u,
                                        0xffff0000u, 0xffff0000u, 0xffff0000u, 0xffff0000u};
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0;
    if (nh == 5)
        __asm__(QK_LOOP(QK5_HALF, 320) QK_OPERANDS);
    else
        __asm__(QK_LOOP(QK3_HALF, 192) QK_OPERANDS);
    a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3, a[4] = a4;
    b[0] = b0, b[1] = b1, b[2] = b2, b[3] = b3, b[4] = b4;
}

/* q[h] . k0 and q[h] . k1 for the pass's nh heads, 8 dims at a time in
 * order (each row widened with vpmovzxwd + shift): one q vector loaded
 * serves both rows' FMAs. */
KERN_AVX2_TARGET A2_INLINE void qk_heads(const float *q, const uint16_t *k0, const uint16_t *k1,
                                         size_t d, int nh, __m256 *a, __m256 *b)
{
#pragma GCC unroll 5
    for (int h = 0; h < A2_QK_MAXH; h++)
        a[h] = b[h] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (size_t c = 0; c < d; c += 8, q += 8 * nh) {
        __m256 v0 = kern_widen8(k0 + c), v1 = kern_widen8(k1 + c);
#pragma GCC unroll 5
        for (int h = 0; h < nh; h++) {
            __m256 qv = _mm256_load_ps(q + 8 * h);
            a[h] = _mm256_fmadd_ps(qv, v0, a[h]);
            b[h] = _mm256_fmadd_ps(qv, v1, b[h]);
        }
    }
}

/* The pass's sums for token pair i (rows k0 and k1) into ps: per head one
 * vector, the two rows' 8 partial sums folded to 4 each by an unpack and an
 * add ([a0+a2, b0+b2, a1+a3, b1+b3 | a4+a6, ...]): half the stores of
 * keeping both (a 256-bit store costs Zen 3 two FMA slots; bench/fma_mix). */
KERN_AVX2_TARGET A2_INLINE void qk_pass(const float *q, const uint16_t *k0, const uint16_t *k1,
                                        size_t d, int nh, float *ps)
{
    __m256 a[A2_QK_MAXH], b[A2_QK_MAXH];
    if (A2_QK_ASM(nh, d))
        qk_asm(q, k0, k1, d / 16, nh, a, b);
    else
        qk_heads(q, k0, k1, d, nh, a, b);
#pragma GCC unroll 5
    for (int h = 0; h < nh; h++) {
        __m256 f = _mm256_add_ps(_mm256_unpacklo_ps(a[h], b[h]), _mm256_unpackhi_ps(a[h], b[h]));
        _mm256_store_ps(ps + (size_t)h * 8 * (A2_QK_TB / 2), f);
    }
}

#define A2_QK(n)                                                                                   \
    qk_pass(qp + h0 * d, k, k1, d, (n) < A2_QK_MAXH ? (n) : A2_QK_MAXH,                            \
            ps + (h0 * (A2_QK_TB / 2) + i) * 8)

/* 8 token pairs' folded sums (qk_pass) of one head, ps[8][8], to the 8
 * scores of each half: unpacks and adds to [A0, B0, A1, B1 | A2, B2, A3,
 * B3] for pairs 0-3 and 4-7, then A's and B's apart (vhaddps, two shuffles
 * and an add in one, costs Zen 3 more than the three). */
KERN_AVX2_TARGET A2_INLINE void qk_fold8(const float *ps, __m256 *sa, __m256 *sb)
{
    __m256 s[4];
    for (int i = 0; i < 4; i++) {
        __m256d x = _mm256_load_pd((const double *)(ps + 16 * i));
        __m256d y = _mm256_load_pd((const double *)(ps + 16 * i + 8));
        s[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                             _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
    }
    __m256 f03 = _mm256_add_ps(_mm256_permute2f128_ps(s[0], s[1], 0x20),
                               _mm256_permute2f128_ps(s[0], s[1], 0x31));
    __m256 f47 = _mm256_add_ps(_mm256_permute2f128_ps(s[2], s[3], 0x20),
                               _mm256_permute2f128_ps(s[2], s[3], 0x31));
    /* lane pairs [A0 A1, A4 A5, A2 A3, A6 A7] back in order */
    *sa = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(f03, f47, _MM_SHUFFLE(2, 0, 2, 0))), 0xd8));
    *sb = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(f03, f47, _MM_SHUFFLE(3, 1, 3, 1))), 0xd8));
}

/* n (<= 8) scores from s to dst. */
KERN_AVX2_TARGET A2_INLINE void qk_put(float *dst, __m256 s, size_t n)
{
    if (n == 8) {
        _mm256_storeu_ps(dst, s);
        return;
    }
    float tmp[8] __attribute__((aligned(32)));
    _mm256_store_ps(tmp, s);
    for (size_t i = 0; i < n; i++)
        dst[i] = tmp[i];
}

/* five: a group of 5 (Qwen3's), one asm pass a kv head without the
 * dispatch on head counts; a constant in each instance. */
KERN_AVX2_TARGET A2_INLINE bool qk_run(const chunk_job *j, size_t d, bool five)
{
    const chunk_blocks *cb = j->cb;
    size_t heads = cb->kv_heads * j->group;
    if (d % 8 != 0 || heads * d > A2_QK_QMAX || heads > A2_QK_HMAX)
        return false;
    float qp[A2_QK_QMAX] __attribute__((aligned(32)));
    float ps[A2_QK_HMAX * (A2_QK_TB / 2) * 8] __attribute__((aligned(32)));
    qk_layout(j->q, cb->kv_heads, j->group, d, qp);
    /* a last batch of fewer than 8 pairs sums stale lanes, then drops them:
     * zeroed, they are never uninitialized stack (or a slow denormal) */
    memset(ps, 0, heads * (A2_QK_TB / 2) * 8 * sizeof(float));
    __m256 scale = _mm256_set1_ps(j->scale);
    /* two tokens at a time, one from each half of the chunk: each half's
     * rows are read in order, a stream the hardware prefetchers follow */
    size_t half = (j->tokens + 15) / 16 * 8;
    for (size_t a0 = 0; a0 < half; a0 += 8) {
        size_t b0 = half + a0;
        size_t na = a0 < j->tokens ? (j->tokens - a0 < 8 ? j->tokens - a0 : 8) : 0;
        size_t nb = b0 < j->tokens ? (j->tokens - b0 < 8 ? j->tokens - b0 : 8) : 0;
        /* each half's rows, and A2_AHEAD more to prefetch, while in the chunk */
        const uint16_t *ra[8 + A2_AHEAD], *rb[8 + A2_AHEAD];
        size_t ma = na == 0 ? 0 : j->tokens - a0 < 8 + A2_AHEAD ? j->tokens - a0 : 8 + A2_AHEAD;
        size_t mb = nb == 0 ? 0 : j->tokens - b0 < 8 + A2_AHEAD ? j->tokens - b0 : 8 + A2_AHEAD;
        rows_at(cb, a0, ma, ra);
        rows_at(cb, b0, mb, rb);
        for (size_t i = 0; i < na; i++) {
            const uint16_t *row = ra[i], *row1 = i < nb ? rb[i] : row;
            /* the rows A2_AHEAD tokens on in each half (or this one, past
             * the end): each kv head's piece before that kv head's sums */
            const char *pa = (const char *)(i + A2_AHEAD < ma ? ra[i + A2_AHEAD] : row);
            const char *pa1 = i + A2_AHEAD < mb ? (const char *)rb[i + A2_AHEAD] : pa;
            for (size_t g = 0; g < cb->kv_heads; g++) {
                for (size_t off = 0; off < d * 2; off += 64) {
                    _mm_prefetch(pa + g * d * 2 + off, _MM_HINT_T1);
                    _mm_prefetch(pa1 + g * d * 2 + off, _MM_HINT_T1);
                }
                const uint16_t *k = row + g * d, *k1 = row1 + g * d;
                if (five) { /* Qwen3's group: one pass, no dispatch on its heads */
                    size_t h0 = g * A2_QK_MAXH;
                    qk_pass(qp + h0 * d, k, k1, d, A2_QK_MAXH, ps + (h0 * (A2_QK_TB / 2) + i) * 8);
                    continue;
                }
                for (size_t h0 = g * j->group; h0 < (g + 1) * j->group; h0 += A2_QK_MAXH) {
                    size_t left = (g + 1) * j->group - h0;
                    int nh = (int)(left < A2_QK_MAXH ? left : A2_QK_MAXH);
                    A2_BY_NH(nh, A2_QK)
                }
            }
        }
        for (size_t h = 0; h < heads; h++) { /* 8 pairs' sums at once, stored in rows */
            __m256 sa, sb;
            qk_fold8(ps + h * (A2_QK_TB / 2) * 8, &sa, &sb);
            qk_put(j->scores + h * j->ctok + a0, _mm256_mul_ps(scale, sa), na);
            if (nb != 0)
                qk_put(j->scores + h * j->ctok + b0, _mm256_mul_ps(scale, sb), nb);
        }
    }
    return true;
}

KERN_AVX2_TARGET bool kern_attn_qk_avx2(const chunk_job *j)
{
    /* Qwen3's head size, with its loops' bounds known, and its group in an
     * instance of its own */
    size_t d = j->cb->d;
    if (d == 128)
        return j->group == A2_QK_MAXH ? qk_run(j, 128, true) : qk_run(j, 128, false);
    return qk_run(j, d, j->group == A2_QK_MAXH && A2_QK_ASM(A2_QK_MAXH, d));
}

/* ------------------------------------------------------------------- PV */

/* One pass of PV over a block: the nh heads from h0 of kv head g, their
 * weights at ph[h] (token t0 of head h0 + h's row of p), V's piece of the
 * pass at each row's byte 2 off, and the heads' rows of part from pp, d
 * apart.  Everything a slab needs is a register or a constant offset (with
 * addresses formed in the slab, GCC spent a lea a head per token and ~50
 * instructions a slab). */
typedef struct pv_pass {
    const uint16_t *const *rows;
    const float *ph[A2_PV_MAXH];
    float *pp;
    size_t off;
} pv_pass;

/* part (dims in permute16's order) [h][c0, c0 + 16) += the block's nt
 * tokens' p[h][t] V[t], in token order. */
KERN_AVX2_TARGET A2_INLINE void pv_slab(const pv_pass *a, size_t nt, int nh, size_t d, size_t c0)
{
    float *part = a->pp + c0;
    const __m256i top = _mm256_set1_epi32((int)0xffff0000u);
    __m256 e[A2_PV_MAXH], o[A2_PV_MAXH];
#pragma GCC unroll 6
    for (int h = 0; h < nh; h++) {
        e[h] = _mm256_loadu_ps(part + (size_t)h * d);
        o[h] = _mm256_loadu_ps(part + (size_t)h * d + 8);
    }
#pragma GCC unroll 16 /* A2_TB: the whole block */
    for (size_t i = 0; i < nt; i++) {
        __m256i raw = _mm256_loadu_si256((const __m256i *)(a->rows[i] + a->off + c0));
        __m256 ve = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
        __m256 vo = _mm256_castsi256_ps(_mm256_and_si256(raw, top));
#pragma GCC unroll 6
        for (int h = 0; h < nh; h++) {
            __m256 w = _mm256_broadcast_ss(a->ph[h] + i);
            e[h] = _mm256_fmadd_ps(w, ve, e[h]);
            o[h] = _mm256_fmadd_ps(w, vo, o[h]);
        }
    }
#pragma GCC unroll 6
    for (int h = 0; h < nh; h++) {
        _mm256_storeu_ps(part + (size_t)h * d, e[h]);
        _mm256_storeu_ps(part + (size_t)h * d + 8, o[h]);
    }
}

/* The tail of 8 dims (D = 16 m + 8), in order. */
KERN_AVX2_TARGET A2_INLINE void pv_tail(const pv_pass *a, size_t nt, int nh, size_t d, size_t c0)
{
    float *part = a->pp + c0;
    __m256 acc[A2_PV_MAXH];
#pragma GCC unroll 6
    for (int h = 0; h < nh; h++)
        acc[h] = _mm256_loadu_ps(part + (size_t)h * d);
    for (size_t i = 0; i < nt; i++) {
        __m256 v = kern_widen8(a->rows[i] + a->off + c0);
#pragma GCC unroll 6
        for (int h = 0; h < nh; h++)
            acc[h] = _mm256_fmadd_ps(_mm256_broadcast_ss(a->ph[h] + i), v, acc[h]);
    }
#pragma GCC unroll 6
    for (int h = 0; h < nh; h++)
        _mm256_storeu_ps(part + (size_t)h * d, acc[h]);
}

/* Every slab of the nh heads from h0 (kv head g): 16 dims while they
 * last, then 8.  d is a constant in PV's D = 128 instance. */
KERN_AVX2_TARGET A2_INLINE void pv_heads(const chunk_job *j, const uint16_t *const *rows, size_t t0,
                                         size_t nt, size_t g, size_t h0, int nh, a2_pf *pf,
                                         size_t per, size_t d)
{
    pv_pass a = {.rows = rows, .pp = j->part + h0 * d, .off = g * d};
#pragma GCC unroll 6
    for (int h = 0; h < nh; h++)
        a.ph[h] = j->scores + (h0 + (size_t)h) * j->ctok + t0;
    size_t c0 = 0;
    for (; c0 + 16 <= d; c0 += 16) {
        pf_step(pf, per);
        if (nt == A2_TB) /* a whole block: the token loop without a test a token */
            pv_slab(&a, A2_TB, nh, d, c0);
        else
            pv_slab(&a, nt, nh, d, c0);
    }
    if (c0 < d) {
        pf_step(pf, per);
        pv_tail(&a, nt, nh, d, c0);
    }
}

#define A2_PV(n) pv_heads(j, rows, t0, nt, g, h0, (n) < A2_PV_MAXH ? (n) : A2_PV_MAXH, &pf, per, d)

/* part's rows from permute16's order back to dims in order, in place. */
KERN_AVX2_TARGET static void unpermute16(float *part, size_t n, size_t d)
{
    for (size_t h = 0; h < n; h++) {
        for (size_t c = 0; c + 16 <= d; c += 16) {
            float *x = part + h * d + c;
            __m256 ev = _mm256_loadu_ps(x), od = _mm256_loadu_ps(x + 8);
            __m256 lo = _mm256_unpacklo_ps(ev, od), hi = _mm256_unpackhi_ps(ev, od);
            _mm256_storeu_ps(x, _mm256_permute2f128_ps(lo, hi, 0x20));
            _mm256_storeu_ps(x + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
        }
    }
}

KERN_AVX2_TARGET A2_INLINE void pv_run(const chunk_job *j, size_t d)
{
    const chunk_blocks *cb = j->cb;
    /* PV adds into part (zero from the task, but the kernel adds, as the
     * portable loop does): into the loop's order first */
    permute16(j->part, cb->kv_heads * j->group, d);
    const uint16_t *rows[A2_TB];
    for (size_t t0 = 0; t0 < j->tokens; t0 += A2_TB) {
        size_t nt = j->tokens - t0 < A2_TB ? j->tokens - t0 : A2_TB;
        size_t t1 = t0 + nt, next = j->tokens - t1 < A2_TB ? j->tokens - t1 : A2_TB;
        rows_at(cb, t0, nt, rows);
        a2_pf pf = {NULL, NULL};
        if (next > 0) { /* the next tokens that share t1's block: contiguous rows */
            size_t block_end = (t1 / cb->block_size + 1) * cb->block_size;
            size_t last = t1 + next < block_end ? t1 + next : block_end;
            pf.p = (const char *)token_row(cb, t1);
            pf.end = (const char *)(token_row(cb, last - 1) + cb->kv_heads * d);
        }
        size_t calls = cb->kv_heads * ((j->group + A2_PV_MAXH - 1) / A2_PV_MAXH) * ((d + 15) / 16);
        size_t per = ((size_t)(pf.end - pf.p) / 64 + calls - 1) / calls;
        for (size_t g = 0; g < cb->kv_heads; g++) {
            for (size_t h0 = g * j->group; h0 < (g + 1) * j->group; h0 += A2_PV_MAXH) {
                size_t left = (g + 1) * j->group - h0;
                int nh = (int)(left < A2_PV_MAXH ? left : A2_PV_MAXH);
                A2_BY_NH(nh, A2_PV)
            }
        }
    }
    unpermute16(j->part, cb->kv_heads * j->group, d);
}

KERN_AVX2_TARGET bool kern_attn_pv_avx2(const chunk_job *j)
{
    size_t d = j->cb->d;
    if (d % 8 != 0)
        return false;
    if (d == 128) /* Qwen3's head size: part's rows at constant offsets */
        pv_run(j, 128);
    else
        pv_run(j, d);
    return true;
}

/* -------------------------------------------------------------- softmax */

/* kern_exp_nonpositive (kernels.h) on nv (1..4) vectors of 8 lanes, the
 * same operations in the same order (the build contracts no a * b + c), so
 * the same bits.  Each step goes across the nv vectors before the next: a
 * vector's chain of 20 dependent operations (a division, then a Horner
 * polynomial) takes ~70 cycles, and with the vectors one after another the
 * core's window held too few of them at once to fill its pipes (four at a
 * time took softmax from 0.84-1.02 to 0.69-0.76 ns a score with the row in
 * L1 built -O3, 0.81-0.85 to 0.70-0.73 built -O2: host Z3, 2026-12-07, both
 * in one process, the same bits).  A2_EXP_EACH runs stmt for v below the nv
 * in scope. */
#define A2_EXP_EACH(stmt)                                                                          \
    _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)                                           \
    {                                                                                              \
        stmt;                                                                                      \
    }
KERN_AVX2_TARGET A2_INLINE void exp8_nonpositive(__m256 *x, int nv)
{
    __m256i n[4];
    __m256 nf[4], r[4], p[4];
    A2_EXP_EACH(x[v] = _mm256_max_ps(x[v], _mm256_set1_ps(-87.0f)))
    A2_EXP_EACH(n[v] = _mm256_cvttps_epi32(_mm256_sub_ps(
                    _mm256_mul_ps(x[v], _mm256_set1_ps(1.44269504f)), _mm256_set1_ps(0.5f))))
    A2_EXP_EACH(nf[v] = _mm256_cvtepi32_ps(n[v]))
    A2_EXP_EACH(r[v] = _mm256_add_ps(
                    _mm256_sub_ps(x[v], _mm256_mul_ps(nf[v], _mm256_set1_ps(0.693359375f))),
                    _mm256_mul_ps(nf[v], _mm256_set1_ps(2.12194440e-4f))))
    A2_EXP_EACH(p[v] = _mm256_add_ps(_mm256_set1_ps(1.0f / 120),
                                     _mm256_div_ps(r[v], _mm256_set1_ps(720.0f))))
    A2_EXP_EACH(p[v] = _mm256_add_ps(_mm256_set1_ps(1.0f / 24), _mm256_mul_ps(r[v], p[v])))
    A2_EXP_EACH(p[v] = _mm256_add_ps(_mm256_set1_ps(1.0f / 6), _mm256_mul_ps(r[v], p[v])))
    A2_EXP_EACH(p[v] = _mm256_add_ps(_mm256_set1_ps(0.5f), _mm256_mul_ps(r[v], p[v])))
    A2_EXP_EACH(p[v] = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(r[v], p[v])))
    A2_EXP_EACH(p[v] = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(r[v], p[v])))
    A2_EXP_EACH(x[v] =
                    _mm256_mul_ps(p[v], _mm256_castsi256_ps(_mm256_slli_epi32(
                                            _mm256_add_epi32(n[v], _mm256_set1_epi32(127)), 23))))
}

/* The nv / 2 groups of 16 at x, minus the max, to their exps in place,
 * each group's two vectors added to s0 and s1. */
KERN_AVX2_TARGET A2_INLINE void exp_groups(float *x, __m256 vmx, int nv, __m256 *s0, __m256 *s1)
{
    __m256 e[4];
    A2_EXP_EACH(e[v] = _mm256_sub_ps(_mm256_loadu_ps(x + 8 * v), vmx))
    exp8_nonpositive(e, nv);
    for (int v = 0; v < nv; v += 2) {
        _mm256_storeu_ps(x + 8 * v, e[v]);
        _mm256_storeu_ps(x + 8 * v + 8, e[v + 1]);
        *s0 = _mm256_add_ps(*s0, e[v]);
        *s1 = _mm256_add_ps(*s1, e[v + 1]);
    }
}

/* softmax_row's results bit for bit: the max is exact in any order (a NaN
 * score is skipped, as softmax_row's compare skips it), exp8 is
 * kern_exp_nonpositive lane by lane, and the sum adds in softmax_row's order (16
 * lanes over whole groups of 16, the lanes in turn, then the tail). */
KERN_AVX2_TARGET void kern_attn_softmax_avx2(float *row, size_t n, float *m, float *l)
{
    size_t full = n / 16 * 16;
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    for (size_t t = 0; t < full; t += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(row + t), m0); /* NaN: keeps m0 */
        m1 = _mm256_max_ps(_mm256_loadu_ps(row + t + 8), m1);
    }
    float lane[16], mx = -INFINITY;
    _mm256_storeu_ps(lane, m0);
    _mm256_storeu_ps(lane + 8, m1);
    for (int k = 0; k < 16; k++)
        mx = lane[k] > mx ? lane[k] : mx;
    for (size_t t = full; t < n; t++)
        mx = row[t] > mx ? row[t] : mx;
    __m256 vmx = _mm256_set1_ps(mx), s0 = _mm256_setzero_ps(), s1 = s0;
    /* two groups of 16 at a time (exp8_nonpositive's four vectors), then a
     * last group; s0 and s1 add the groups in order */
    size_t g0 = 0;
    for (; g0 + 32 <= full; g0 += 32)
        exp_groups(row + g0, vmx, 4, &s0, &s1);
    if (g0 < full)
        exp_groups(row + g0, vmx, 2, &s0, &s1);
    float tail[16] = {0};
    for (size_t t = full; t < n; t++)
        tail[t - full] = row[t];
    __m256 te[2] = {_mm256_sub_ps(_mm256_loadu_ps(tail), vmx),
                    _mm256_sub_ps(_mm256_loadu_ps(tail + 8), vmx)};
    exp8_nonpositive(te, 2);
    _mm256_storeu_ps(tail, te[0]);
    _mm256_storeu_ps(tail + 8, te[1]);
    for (size_t t = full; t < n; t++)
        row[t] = tail[t - full];
    float sum = 0.0f;
    _mm256_storeu_ps(lane, s0);
    _mm256_storeu_ps(lane + 8, s1);
    for (int k = 0; k < 16; k++)
        sum += lane[k];
    for (size_t t = full; t < n; t++)
        sum += row[t];
    *m = mx;
    *l = sum;
}
#endif
