// Hand-vectorized x86-64 spans for uint8 images, the case compilers leave scalar (3-byte stride,
// byte <-> float conversions). Each lane does exactly what `gray()` in img2gray.h does, in the same
// order, with IEEE single-precision mul/add (no FMA), so results are bit-identical to the scalar path.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define IMG2GRAY_HAVE_AVX2_SPANS 1

#include <immintrin.h>

#include <cstdint>

#include "img2gray.h"

// Everything below is compiled for AVX2 (never FMA: it would fuse the ordered mul/add); the caller
// runs it only after checking the CPU.
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

// 8 pixels from three planes -> 8 int32 gray values.
IMG2GRAY_AVX2 __m256i gray_8_planar(const uint8_t* r, const uint8_t* g, const uint8_t* b, const Avx2Weights& w) {
  const auto load8 = [](const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  };
  return luma_u8(load8(r), load8(g), load8(b), w);
}

// Returns how many leading pixels were written (a multiple of 32); the caller finishes the rest.
inline int64_t interleaved_u8_avx2(const uint8_t* __restrict__ rgb,
                                                                   uint8_t* __restrict__ out, int64_t n,
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

inline int64_t planar_u8_avx2(const uint8_t* __restrict__ r,
                                                              const uint8_t* __restrict__ g,
                                                              const uint8_t* __restrict__ b,
                                                              uint8_t* __restrict__ out, int64_t n,
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

#endif
