// Hand-vectorized x86-64 spans for uint8 images, the case compilers leave scalar (3-byte stride,
// byte <-> float conversions). Each lane does exactly what `gray()` in img2gray.h does, in the same
// order, with IEEE single-precision mul/add (no FMA), so results are bit-identical to the scalar path.
// AVX2 and AVX-512 (VBMI) versions, chosen at run time; other CPUs use the compiler-vectorized loops.
#pragma once

#include <cstdint>

#include "img2gray.h"

// GCC's `#pragma GCC target` compiles these functions for AVX2/AVX-512 without changing the flags
// of the rest of the library (Clang would need `#pragma clang attribute`; it gets the plain loops).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define IMG2GRAY_X86_SPANS 1
#include <immintrin.h>

// Compiled for AVX2 but never FMA, which would fuse the ordered mul/add. Run only after checking
// the CPU (interleaved_u8 / planar_u8 at the end).
#pragma GCC push_options
#pragma GCC target("avx2")

namespace img2gray {
namespace simd {

#define IMG2GRAY_AVX2 __attribute__((always_inline)) inline

struct Avx2Weights {
  __m256 r, g, b;
};

// 8 int32 channel values per vector -> 8 int32 gray values in [0, 255].
IMG2GRAY_AVX2 __m256i luma_u8(__m256i r, __m256i g, __m256i b, const Avx2Weights& w) {
  const __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(w.r, _mm256_cvtepi32_ps(r)),
                                               _mm256_mul_ps(w.g, _mm256_cvtepi32_ps(g))),
                                 _mm256_mul_ps(w.b, _mm256_cvtepi32_ps(b)));
  // Same result as from_acc<uint8_t>: min(255, y) (NaN stays NaN: minps returns its second operand),
  // then round half to even under the default MXCSR mode. NaN, -inf and anything below -2^31 convert
  // to INT32_MIN; the signed-saturating packs below send that and every negative value to 0.
  return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_set1_ps(255.0f), y));
}

// Four vectors of 8 int32 gray values (pixels 0-7, 8-15, 16-23, 24-31) -> 32 bytes in pixel order.
IMG2GRAY_AVX2 void store_32(uint8_t* out, __m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  // packs/packus work per 128-bit lane: bytes come out as 0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31.
  const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

// 8 interleaved pixels (24 bytes at p) -> 8 int32 gray values. The low lane holds bytes 0-15 (pixels
// 0-3 at offset 0), the high lane bytes 8-23 (pixels 4-7 at offset 4): no byte past the 24 is read.
// One byte shuffle per channel both gathers the channel and zero-extends it to 32 bits.
IMG2GRAY_AVX2 __m256i gray_8_interleaved(const uint8_t* p, const Avx2Weights& w) {
  const __m256i v = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(p + 8), reinterpret_cast<const __m128i*>(p));
  constexpr char z = -1;  // pshufb: a set high bit writes 0
  const __m256i take_r = _mm256_setr_epi8(0, z, z, z, 3, z, z, z, 6, z, z, z, 9, z, z, z,  //
                                          4, z, z, z, 7, z, z, z, 10, z, z, z, 13, z, z, z);
  const __m256i take_g = _mm256_setr_epi8(1, z, z, z, 4, z, z, z, 7, z, z, z, 10, z, z, z,  //
                                          5, z, z, z, 8, z, z, z, 11, z, z, z, 14, z, z, z);
  const __m256i take_b = _mm256_setr_epi8(2, z, z, z, 5, z, z, z, 8, z, z, z, 11, z, z, z,  //
                                          6, z, z, z, 9, z, z, z, 12, z, z, z, 15, z, z, z);
  return luma_u8(_mm256_shuffle_epi8(v, take_r), _mm256_shuffle_epi8(v, take_g), _mm256_shuffle_epi8(v, take_b), w);
}

IMG2GRAY_AVX2 __m256i load_8_as_int32(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// 8 pixels from three planes -> 8 int32 gray values.
IMG2GRAY_AVX2 __m256i gray_8_planar(const uint8_t* r, const uint8_t* g, const uint8_t* b, const Avx2Weights& w) {
  return luma_u8(load_8_as_int32(r), load_8_as_int32(g), load_8_as_int32(b), w);
}

// Each span returns how many leading pixels it wrote (whole blocks); the caller finishes the rest.
inline int64_t interleaved_u8_avx2(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ out, int64_t n,
                                   const Weights<float>& weights) {
  const Avx2Weights w{_mm256_set1_ps(weights.r), _mm256_set1_ps(weights.g), _mm256_set1_ps(weights.b)};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const uint8_t* p = rgb + 3 * i;
    store_32(out + i, gray_8_interleaved(p, w), gray_8_interleaved(p + 24, w), gray_8_interleaved(p + 48, w),
             gray_8_interleaved(p + 72, w));
  }
  return i;
}

inline int64_t planar_u8_avx2(const uint8_t* __restrict__ r, const uint8_t* __restrict__ g,
                              const uint8_t* __restrict__ b, uint8_t* __restrict__ out, int64_t n,
                              const Weights<float>& weights) {
  const Avx2Weights w{_mm256_set1_ps(weights.r), _mm256_set1_ps(weights.g), _mm256_set1_ps(weights.b)};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    store_32(out + i, gray_8_planar(r + i, g + i, b + i, w), gray_8_planar(r + i + 8, g + i + 8, b + i + 8, w),
             gray_8_planar(r + i + 16, g + i + 16, b + i + 16, w),
             gray_8_planar(r + i + 24, g + i + 24, b + i + 24, w));
  }
  return i;
}

#undef IMG2GRAY_AVX2

}  // namespace simd
}  // namespace img2gray

#pragma GCC pop_options

// AVX-512 with VBMI (Ice Lake, Sapphire Rapids, Zen 4): one byte permute across 64 bytes gathers and
// zero-extends a channel for 16 pixels.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi")

namespace img2gray {
namespace simd {

#define IMG2GRAY_AVX512 __attribute__((always_inline)) inline

struct Avx512Weights {
  __m512 r, g, b;
};

IMG2GRAY_AVX512 __m512i luma_u8(__m512i r, __m512i g, __m512i b, const Avx512Weights& w) {
  const __m512 y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(w.r, _mm512_cvtepi32_ps(r)),
                                               _mm512_mul_ps(w.g, _mm512_cvtepi32_ps(g))),
                                 _mm512_mul_ps(w.b, _mm512_cvtepi32_ps(b)));
  return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_set1_ps(255.0f), y));  // as in the AVX2 luma_u8
}

IMG2GRAY_AVX512 void store_64(uint8_t* out, __m512i q0, __m512i q1, __m512i q2, __m512i q3) {
  // Per 128-bit lane L the packs leave pixels 4L..4L+3 of q0, q1, q2, q3: dword 4L + j holds pixels
  // 16j + 4L ... 16j + 4L + 3.
  const __m512i bytes = _mm512_packus_epi16(_mm512_packs_epi32(q0, q1), _mm512_packs_epi32(q2, q3));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, bytes));
}

// 16 interleaved pixels: the 48 bytes at p, read as 64 (the caller keeps 16 readable bytes after them).
IMG2GRAY_AVX512 __m512i gray_16_interleaved(const uint8_t* p, const Avx512Weights& w) {
  const __m512i v = _mm512_loadu_si512(p);
  constexpr __mmask64 low_bytes = 0x1111111111111111ull;  // byte 0 of every dword; the rest become 0
  const __m512i take_r = _mm512_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i take_g = _mm512_add_epi32(take_r, one);
  const __m512i take_b = _mm512_add_epi32(take_g, one);
  return luma_u8(_mm512_maskz_permutexvar_epi8(low_bytes, take_r, v),
                 _mm512_maskz_permutexvar_epi8(low_bytes, take_g, v),
                 _mm512_maskz_permutexvar_epi8(low_bytes, take_b, v), w);
}

IMG2GRAY_AVX512 __m512i load_16_as_int32(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

IMG2GRAY_AVX512 __m512i gray_16_planar(const uint8_t* r, const uint8_t* g, const uint8_t* b,
                                       const Avx512Weights& w) {
  return luma_u8(load_16_as_int32(r), load_16_as_int32(g), load_16_as_int32(b), w);
}

inline int64_t interleaved_u8_avx512(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ out, int64_t n,
                                     const Weights<float>& weights) {
  const Avx512Weights w{_mm512_set1_ps(weights.r), _mm512_set1_ps(weights.g), _mm512_set1_ps(weights.b)};
  int64_t i = 0;
  // The last 64-byte load of a block reads 16 bytes past it: stop 6 pixels early.
  for (; i + 64 + 6 <= n; i += 64) {
    const uint8_t* p = rgb + 3 * i;
    store_64(out + i, gray_16_interleaved(p, w), gray_16_interleaved(p + 48, w), gray_16_interleaved(p + 96, w),
             gray_16_interleaved(p + 144, w));
  }
  return i;
}

inline int64_t planar_u8_avx512(const uint8_t* __restrict__ r, const uint8_t* __restrict__ g,
                                const uint8_t* __restrict__ b, uint8_t* __restrict__ out, int64_t n,
                                const Weights<float>& weights) {
  const Avx512Weights w{_mm512_set1_ps(weights.r), _mm512_set1_ps(weights.g), _mm512_set1_ps(weights.b)};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    store_64(out + i, gray_16_planar(r + i, g + i, b + i, w), gray_16_planar(r + i + 16, g + i + 16, b + i + 16, w),
             gray_16_planar(r + i + 32, g + i + 32, b + i + 32, w),
             gray_16_planar(r + i + 48, g + i + 48, b + i + 48, w));
  }
  return i;
}

#undef IMG2GRAY_AVX512

}  // namespace simd
}  // namespace img2gray

#pragma GCC pop_options
#endif  // x86-64 with GCC

namespace img2gray {
namespace simd {

#if defined(IMG2GRAY_X86_SPANS)
inline bool cpu_has_avx512vbmi() {
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
}
inline bool cpu_has_avx2() { return __builtin_cpu_supports("avx2"); }
#endif

// How many leading pixels the widest vector code this CPU runs has written; the caller does the rest.
inline int64_t interleaved_u8(const uint8_t* rgb, uint8_t* out, int64_t n, const Weights<float>& w) {
  int64_t done = 0;
#if defined(IMG2GRAY_X86_SPANS)
  if (cpu_has_avx512vbmi()) done = interleaved_u8_avx512(rgb, out, n, w);
  if (cpu_has_avx2()) done += interleaved_u8_avx2(rgb + 3 * done, out + done, n - done, w);
#endif
  return done;
}

inline int64_t planar_u8(const uint8_t* r, const uint8_t* g, const uint8_t* b, uint8_t* out, int64_t n,
                         const Weights<float>& w) {
  int64_t done = 0;
#if defined(IMG2GRAY_X86_SPANS)
  if (cpu_has_avx512vbmi()) done = planar_u8_avx512(r, g, b, out, n, w);
  if (cpu_has_avx2()) done += planar_u8_avx2(r + done, g + done, b + done, out + done, n - done, w);
#endif
  return done;
}

}  // namespace simd
}  // namespace img2gray
