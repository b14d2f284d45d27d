/*
 * simd.h: AVX-512 and AVX2 pieces the workload kernels share (x86-64 with GCC or
 * clang only; the build sets no -march, so each piece carries its target and
 * is inlined into kernels that kern_use_avx512bf16() chose at run time).
 *
 * The sum tree turns vectors of partial sums into sums: by-value helpers that
 * GCC keeps in registers (the same tree as a loop over an array made it spill
 * every accumulator to the stack, a third of the projection's time).
 */
#ifndef HG_KERNELS_SIMD_H
#define HG_KERNELS_SIMD_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdint.h>

#define KERN_HAVE_X86    1
#define KERN_SIMD_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define KERN_SIMD_INLINE __attribute__((always_inline)) static inline

/* fold2(a, b), per 128-bit quarter: a0+a2 b0+b2 a1+a3 b1+b3, i.e. two
 * partial sums each of a and b. */
KERN_SIMD_TARGET KERN_SIMD_INLINE __m512 kern_fold2(__m512 a, __m512 b)
{
    return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
}

/* fold4(fold2(a, b), fold2(c, d)), per quarter: a b c d, each that
 * quarter's sum. */
KERN_SIMD_TARGET KERN_SIMD_INLINE __m512 kern_fold4(__m512 p, __m512 q)
{
    return _mm512_add_ps(_mm512_shuffle_ps(p, q, 0x44), _mm512_shuffle_ps(p, q, 0xee));
}

/* Quarters u0+u1, u2+u3, v0+v1, v2+v3. */
KERN_SIMD_TARGET KERN_SIMD_INLINE __m512 kern_fold_quarters(__m512 u, __m512 v)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(u, v, 0x88), _mm512_shuffle_f32x4(u, v, 0xdd));
}

/* a[0..8) to quarters: lanes 0-3 and 4-7 sum to a0..a3, 8-11 and 12-15 to
 * a4..a7. */
KERN_SIMD_TARGET KERN_SIMD_INLINE __m512 kern_fold8(const __m512 *a)
{
    return kern_fold_quarters(kern_fold4(kern_fold2(a[0], a[1]), kern_fold2(a[2], a[3])),
                              kern_fold4(kern_fold2(a[4], a[5]), kern_fold2(a[6], a[7])));
}

/* Lane r: the sum of a[r]'s 16 lanes. */
KERN_SIMD_TARGET KERN_SIMD_INLINE __m512 kern_sum16(const __m512 *a)
{
    return kern_fold_quarters(kern_fold8(a), kern_fold8(a + 8));
}

/* 16 bf16 at p widened to f32 (exact: bf16 is f32's top half). */
KERN_SIMD_TARGET KERN_SIMD_INLINE __m512 kern_widen16(const uint16_t *p)
{
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

/* ------------------------------------------------------------ AVX2 level */

#define KERN_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

/* 8 bf16 at p widened to f32 (exact). */
KERN_AVX2_TARGET KERN_SIMD_INLINE __m256 kern_widen8(const uint16_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* The sums of a, b, c and d's lanes. */
KERN_AVX2_TARGET KERN_SIMD_INLINE __m128 kern_hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}
#else
#define KERN_HAVE_X86 0
#endif

#endif
