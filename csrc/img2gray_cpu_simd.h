// Hand-vectorized spans for uint8 images, the case compilers leave scalar (3-byte stride, byte <-> float
// conversions). Every path returns exactly what `gray()` in img2gray.h returns for every colour:
// - AVX2, AVX-512 (VBMI) and NEON: each lane does what `gray()` does, in the same order, with IEEE
//   single-precision mul/add (no FMA), so results are bit-identical to the scalar path.
// - AVX-512 VNNI ("fixed point" below): integer dot products that are proven to round like the float formula
//   wherever they are far enough from a rounding tie, and the float path for the lanes that are not.
// The widest path the CPU runs is chosen at run time (cpu_isa), capped by IMG2GRAY_CPU_ISA for tests.
#pragma once

#include <torch/headeronly/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "img2gray.h"

namespace img2gray {
namespace simd {

// The fixed-point form of the weights for the VNNI path. With W_c = round(w_c * 2^21) (three base-128 digits, so
// that each digit is a signed byte for vpdpbusd) and Z = sum_c v_c * W_c + 2^20 + 2^10:
// - |Z / 2^21 - (Y + 0.5 + 2^-11)| <= 765 * 2^-22 < 1.83e-4, Y the exact weighted sum of the bytes with the float
//   weights; the float formula's y = fl(fl(fl(wr*r) + fl(wg*g)) + fl(wb*b)) is within 3 * 2^-24 * Y (< 4.6e-5 where
//   Y <= 256) of Y: with non-negative weights every term is non-negative and passes at most three roundings.
// - So where Z mod 2^21 >= 2^11, y + 0.5 is within 2.3e-4 < 2^-11 of Z / 2^21 and at least 2^-11 away from an
//   integer: y lies strictly between n - 0.5 and n + 0.5 for n = floor(Z / 2^21), it rounds to n, and no tie can
//   occur. n >= 256 means y > 255.4, which saturates to 255 as n does. Everywhere else (about 0.1% of random
//   colours, and every exact tie of the decimal weights) the lane is "ambiguous" and takes the float path.
// tests/op/test_img2gray.py checks all 2^24 colours for several weights, each ISA forced in turn.
constexpr int kFixedBits = 21;
constexpr uint32_t kFixedBias = (1u << (kFixedBits - 1)) + (1u << (kFixedBits - 11));
constexpr uint32_t kFixedAmbiguous = ((1u << kFixedBits) - 1) & ~((1u << (kFixedBits - 10)) - 1);  // bits 11-20

struct FixedPoint {
  bool usable;         // false: weights outside [0, 1) (or not finite); the float path does every lane
  int32_t digits[3];   // digit k of every channel: byte c = digit k of W_c, byte 3 = 0 (the dword's 4th byte)
};

inline FixedPoint fixed_point(const Weights<float>& w) {
  FixedPoint fixed{};
  const float channels[3] = {w.r, w.g, w.b};
  uint32_t scaled[3];
  for (int c = 0; c < 3; ++c) {
    if (!(channels[c] >= 0.0f && channels[c] < 1.0f)) return fixed;  // also NaN
    // Exact in double (a float times a power of two), rounded to nearest.
    scaled[c] = static_cast<uint32_t>(std::nearbyint(static_cast<double>(channels[c]) * (1 << kFixedBits)));
    if (scaled[c] >= (1u << kFixedBits)) return fixed;  // a fourth digit would be needed
  }
  for (int k = 0; k < 3; ++k) {
    uint32_t digits = 0;
    for (int c = 0; c < 3; ++c) digits |= ((scaled[c] >> (7 * k)) & 127u) << (8 * c);
    fixed.digits[k] = static_cast<int32_t>(digits);
  }
  fixed.usable = true;
  return fixed;
}

// The hand-written paths; on x86-64 each one also uses the ones before it (for the pixels it leaves).
enum class CpuIsa { Scalar, Avx2, Avx512, Avx512Vnni, Neon };

// What the spans are given per call: the ISA, both forms of the weights, and whether to write the output with
// streaming stores (for outputs that would only evict the input from the caches).
struct U8Call {
  CpuIsa isa;
  Weights<float> weights;
  FixedPoint fixed;
  bool stream;
};

}  // namespace simd
}  // namespace img2gray

// GCC's `#pragma GCC target` compiles these functions for AVX2/AVX-512 without changing the flags
// of the rest of the library (Clang would need `#pragma clang attribute`; it gets the plain loops).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define IMG2GRAY_X86_SPANS 1
#include <immintrin.h>

namespace img2gray {
namespace simd {

// How far ahead of the block being read the loops prefetch their input (into L1): 8 KiB in the one interleaved
// stream, 4 KiB in each of the planar loops' three. A 4K frame streams from memory, where the hardware prefetchers
// alone left the interleaved loops at 82-90% of a same-bytes copy on a Xeon and at 56-70% on a Zen 5 EPYC (the planar
// ones at 62-80% there); 2 KiB ahead served the Xeon but not the EPYC (benchmarks/experiments/README.md).
constexpr uintptr_t kInterleavedPrefetchAhead = 8192;
constexpr uintptr_t kPlanarPrefetchAhead = 4096;

// Prefetch the `bytes` starting `ahead` bytes after p. The address is made as an integer, since past the input's end
// it points at no object; a prefetch never faults, so those lines cost a request and nothing else. Always inlined:
// the VNNI loops keep their constants in registers only while their runs make no calls.
__attribute__((always_inline)) inline void prefetch_ahead(const uint8_t* p, int bytes, uintptr_t ahead) {
  for (int line = 0; line < bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + ahead + line), _MM_HINT_T0);
  }
}

// The same `bytes` of each plane.
__attribute__((always_inline)) inline void prefetch_planes_ahead(const uint8_t* r, const uint8_t* g, const uint8_t* b,
                                                                 int bytes) {
  prefetch_ahead(r, bytes, kPlanarPrefetchAhead);
  prefetch_ahead(g, bytes, kPlanarPrefetchAhead);
  prefetch_ahead(b, bytes, kPlanarPrefetchAhead);
}

// The output line 1 KiB ahead of `out`, into L1: each store then finds its line there instead of waiting for it to
// be read for ownership from the L3. Used by the VNNI loops; with the frame in the L3 (720p and up on a core with a
// 2 MiB L2), an Emerald Rapids core ran the interleaved loop at 93-95% of a same-bytes memcpy without it and 98-100%
// with it (prefetchw measured the same; benchmarks/experiments/README.md).
constexpr uintptr_t kOutputPrefetchAhead = 1024;

__attribute__((always_inline)) inline void prefetch_output(const uint8_t* out) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(out) + kOutputPrefetchAhead), _MM_HINT_T0);
}

}  // namespace simd
}  // namespace img2gray

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
IMG2GRAY_AVX2 void store_32(uint8_t* out, __m256i q0, __m256i q1, __m256i q2, __m256i q3, bool stream) {
  // packs/packus work per 128-bit lane: bytes come out as 0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31.
  const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  if (stream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out), ordered);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
  }
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
// Streaming stores need aligned addresses: they are used only where `out` is (then every block stays so).
inline bool stream_to(const uint8_t* out, bool stream, uintptr_t alignment) {
  return stream && reinterpret_cast<uintptr_t>(out) % alignment == 0;
}

inline int64_t interleaved_u8_avx2(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ out, int64_t n,
                                   const U8Call& call) {
  const Weights<float>& weights = call.weights;
  const Avx2Weights w{_mm256_set1_ps(weights.r), _mm256_set1_ps(weights.g), _mm256_set1_ps(weights.b)};
  const bool stream = stream_to(out, call.stream, 32);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const uint8_t* p = rgb + 3 * i;
    prefetch_ahead(p, 96, kInterleavedPrefetchAhead);
    store_32(out + i, gray_8_interleaved(p, w), gray_8_interleaved(p + 24, w), gray_8_interleaved(p + 48, w),
             gray_8_interleaved(p + 72, w), stream);
  }
  if (stream) _mm_sfence();
  return i;
}

inline int64_t planar_u8_avx2(const uint8_t* __restrict__ r, const uint8_t* __restrict__ g,
                              const uint8_t* __restrict__ b, uint8_t* __restrict__ out, int64_t n, const U8Call& call) {
  const Weights<float>& weights = call.weights;
  const Avx2Weights w{_mm256_set1_ps(weights.r), _mm256_set1_ps(weights.g), _mm256_set1_ps(weights.b)};
  const bool stream = stream_to(out, call.stream, 32);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_planes_ahead(r + i, g + i, b + i, 32);
    store_32(out + i, gray_8_planar(r + i, g + i, b + i, w), gray_8_planar(r + i + 8, g + i + 8, b + i + 8, w),
             gray_8_planar(r + i + 16, g + i + 16, b + i + 16, w),
             gray_8_planar(r + i + 24, g + i + 24, b + i + 24, w), stream);
  }
  if (stream) _mm_sfence();
  return i;
}

#undef IMG2GRAY_AVX2

}  // namespace simd
}  // namespace img2gray

#pragma GCC pop_options

// AVX-512 with VBMI (Ice Lake, Sapphire Rapids, Zen 4): one byte permute across 64 bytes gathers and
// zero-extends a channel for 16 pixels. With VNNI as well, the fixed-point path (FixedPoint above).
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

IMG2GRAY_AVX512 void store_64(uint8_t* out, __m512i q0, __m512i q1, __m512i q2, __m512i q3, bool stream) {
  // Per 128-bit lane L the packs leave pixels 4L..4L+3 of q0, q1, q2, q3: dword 4L + j holds pixels
  // 16j + 4L ... 16j + 4L + 3.
  const __m512i bytes = _mm512_packus_epi16(_mm512_packs_epi32(q0, q1), _mm512_packs_epi32(q2, q3));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i ordered = _mm512_permutexvar_epi32(order, bytes);
  if (stream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(out), ordered);
  } else {
    _mm512_storeu_si512(out, ordered);
  }
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
                                     const U8Call& call) {
  const Avx512Weights w{_mm512_set1_ps(call.weights.r), _mm512_set1_ps(call.weights.g), _mm512_set1_ps(call.weights.b)};
  const bool stream = stream_to(out, call.stream, 64);
  int64_t i = 0;
  // The last 64-byte load of a block reads 16 bytes past it: stop 6 pixels early.
  for (; i + 64 + 6 <= n; i += 64) {
    const uint8_t* p = rgb + 3 * i;
    prefetch_ahead(p, 192, kInterleavedPrefetchAhead);
    store_64(out + i, gray_16_interleaved(p, w), gray_16_interleaved(p + 48, w), gray_16_interleaved(p + 96, w),
             gray_16_interleaved(p + 144, w), stream);
  }
  if (stream) _mm_sfence();
  return i;
}

inline int64_t planar_u8_avx512(const uint8_t* __restrict__ r, const uint8_t* __restrict__ g,
                                const uint8_t* __restrict__ b, uint8_t* __restrict__ out, int64_t n,
                                const U8Call& call) {
  const Avx512Weights w{_mm512_set1_ps(call.weights.r), _mm512_set1_ps(call.weights.g), _mm512_set1_ps(call.weights.b)};
  const bool stream = stream_to(out, call.stream, 64);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch_planes_ahead(r + i, g + i, b + i, 64);
    store_64(out + i, gray_16_planar(r + i, g + i, b + i, w), gray_16_planar(r + i + 16, g + i + 16, b + i + 16, w),
             gray_16_planar(r + i + 32, g + i + 32, b + i + 32, w),
             gray_16_planar(r + i + 48, g + i + 48, b + i + 48, w), stream);
  }
  if (stream) _mm_sfence();
  return i;
}

// float32, float16 and bfloat16 in 16-lane float vectors, for the same formula as `gray()` (img2gray.h): the
// conversions to float are exact, the products and sums are rounded one at a time in the same order, and the
// conversions back round to nearest even as c10's do (NaN included: float16 0x7E00 with the sign, bfloat16 0x7FC0),
// so every value is bit-identical to the scalar loops'. The compiler left the float16 and bfloat16 loops scalar
// (c10's conversions are bit manipulations unless the whole library is built for F16C), and the interleaved loops
// of every float type too (a 3-element stride).
template <typename scalar_t>
struct FloatLanes;

template <>
struct FloatLanes<float> {
  using Stored = float;
  static IMG2GRAY_AVX512 __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static IMG2GRAY_AVX512 void store(float* p, __m512 y) { _mm512_storeu_ps(p, y); }
  // 16 interleaved pixels (48 values at p) -> the channel c of each.
  static IMG2GRAY_AVX512 void load_interleaved(const float* p, __m512* r, __m512* g, __m512* b) {
    const __m512 a = _mm512_loadu_ps(p), m = _mm512_loadu_ps(p + 16), z = _mm512_loadu_ps(p + 32);
    // Element 3i + c of the 48, first from a and m (indices 0-31), then the rest from z (indices 16-31 of the
    // second permute's table, the first's result standing in for 0-15).
    alignas(64) int32_t first[3][16], second[3][16];
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 16; ++i) {
        const int e = 3 * i + c;
        first[c][i] = e < 32 ? e : 0;
        second[c][i] = e < 32 ? i : 16 + (e - 32);
      }
    }
    __m512* out[3] = {r, g, b};
    for (int c = 0; c < 3; ++c) {
      const __m512 low = _mm512_permutex2var_ps(a, _mm512_load_si512(first[c]), m);
      *out[c] = _mm512_permutex2var_ps(low, _mm512_load_si512(second[c]), z);
    }
  }
};

// 16-bit floats: 16 values from 32 bytes, interleaved ones gathered as 16-bit words before the conversion.
template <typename Derived, typename StoredT>
struct HalfWidthLanes {
  using Stored = StoredT;
  static IMG2GRAY_AVX512 __m512 load(const Stored* p) {
    return Derived::widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static IMG2GRAY_AVX512 void store(Stored* p, __m512 y) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), Derived::narrow(y));
  }
  static IMG2GRAY_AVX512 void load_interleaved(const Stored* p, __m512* r, __m512* g, __m512* b) {
    const __m512i a = _mm512_loadu_si512(p);  // values 0-31
    const __m512i z = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p) + 2));  // 32-47
    alignas(64) int16_t take[3][32];
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 32; ++i) take[c][i] = static_cast<int16_t>(i < 16 ? 3 * i + c : 0);
    }
    __m512* out[3] = {r, g, b};
    for (int c = 0; c < 3; ++c) {
      const __m512i words = _mm512_permutex2var_epi16(a, _mm512_load_si512(take[c]), z);
      *out[c] = Derived::widen(_mm512_castsi512_si256(words));
    }
  }
};

struct HalfLanes : HalfWidthLanes<HalfLanes, c10::Half> {
  static IMG2GRAY_AVX512 __m512 widen(__m256i h) { return _mm512_cvtph_ps(h); }
  static IMG2GRAY_AVX512 __m256i narrow(__m512 y) {
    const __m256i rounded = _mm512_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT);
    // c10 makes every NaN 0x7E00 with the input's sign; vcvtps2ph keeps payload bits.
    const __m256i sign = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(y), 16));
    const __m256i nan = _mm256_or_si256(_mm256_and_si256(sign, _mm256_set1_epi16(static_cast<int16_t>(0x8000))),
                                        _mm256_set1_epi16(0x7E00));
    const __mmask32 is_nan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q);  // lane i of y is word i of the result
    return _mm512_castsi512_si256(
        _mm512_mask_blend_epi16(is_nan, _mm512_castsi256_si512(rounded), _mm512_castsi256_si512(nan)));
  }
};

struct BFloat16Lanes : HalfWidthLanes<BFloat16Lanes, c10::BFloat16> {
  static IMG2GRAY_AVX512 __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  // c10's round_to_nearest_even: (bits + 0x7FFF + bit 16) >> 16, NaN -> 0x7FC0.
  static IMG2GRAY_AVX512 __m256i narrow(__m512 y) {
    const __m512i bits = _mm512_castps_si512(y);
    const __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1)),
                                          _mm512_set1_epi32(0x7FFF));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
    const __m512i result = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), rounded,
                                                   _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(result);
  }
};

template <typename scalar_t>
using LanesOf = std::conditional_t<std::is_same_v<scalar_t, c10::Half>, HalfLanes,
                                   std::conditional_t<std::is_same_v<scalar_t, c10::BFloat16>, BFloat16Lanes,
                                                      FloatLanes<float>>>;

IMG2GRAY_AVX512 __m512 luma_16(__m512 r, __m512 g, __m512 b, const Avx512Weights& w) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(w.r, r), _mm512_mul_ps(w.g, g)), _mm512_mul_ps(w.b, b));
}

template <typename scalar_t>
inline int64_t planar_float_avx512(const scalar_t* __restrict__ r, const scalar_t* __restrict__ g,
                                   const scalar_t* __restrict__ b, scalar_t* __restrict__ out, int64_t n,
                                   const Weights<float>& weights) {
  using Lanes = LanesOf<scalar_t>;
  using Stored = typename Lanes::Stored;
  const Avx512Weights w{_mm512_set1_ps(weights.r), _mm512_set1_ps(weights.g), _mm512_set1_ps(weights.b)};
  const auto* rs = reinterpret_cast<const Stored*>(r);
  const auto* gs = reinterpret_cast<const Stored*>(g);
  const auto* bs = reinterpret_cast<const Stored*>(b);
  auto* os = reinterpret_cast<Stored*>(out);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Lanes::store(os + i, luma_16(Lanes::load(rs + i), Lanes::load(gs + i), Lanes::load(bs + i), w));
  }
  return i;
}

template <typename scalar_t>
inline int64_t interleaved_float_avx512(const scalar_t* __restrict__ rgb, scalar_t* __restrict__ out, int64_t n,
                                        const Weights<float>& weights) {
  using Lanes = LanesOf<scalar_t>;
  using Stored = typename Lanes::Stored;
  const Avx512Weights w{_mm512_set1_ps(weights.r), _mm512_set1_ps(weights.g), _mm512_set1_ps(weights.b)};
  const auto* in = reinterpret_cast<const Stored*>(rgb);
  auto* os = reinterpret_cast<Stored*>(out);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 rv, gv, bv;
    Lanes::load_interleaved(in + 3 * i, &rv, &gv, &bv);
    Lanes::store(os + i, luma_16(rv, gv, bv, w));
  }
  return i;
}

// The fixed-point path needs VNNI too; only these functions are compiled for it, so that the float path above
// never meets a VNNI instruction on a CPU without it.
#define IMG2GRAY_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni")))

struct Avx512Fixed {
  __m512i d2, d1, d0, bias, ambiguous_bits;
};

IMG2GRAY_AVX512_VNNI inline Avx512Fixed avx512_fixed(const FixedPoint& fixed) {
  return {_mm512_set1_epi32(fixed.digits[2]), _mm512_set1_epi32(fixed.digits[1]), _mm512_set1_epi32(fixed.digits[0]),
          _mm512_set1_epi32(static_cast<int32_t>(kFixedBias)),
          _mm512_set1_epi32(static_cast<int32_t>(kFixedAmbiguous))};
}

// 16 pixels as dwords (r, g, b, 0) -> Z of FixedPoint, the same integer as sum_c v_c * W_c + kFixedBias in any order.
// Three vpdpbusd over the base-128 digits, two of them independent: Z = ((x.d2 << 7) + x.d1) << 7 + (x.d0 + bias).
// A chain of 15 cycles where Horner's (each digit's product on the shifted sum before it) took 20 (vpdpbusd's
// latency is 6 on an Emerald Rapids core; benchmarks/experiments/cpu_ports.c), for one vector add more.
IMG2GRAY_AVX512_VNNI IMG2GRAY_AVX512 __m512i fixed_16(__m512i rgb0, const Avx512Fixed& f) {
  const __m512i high = _mm512_dpbusd_epi32(_mm512_setzero_si512(), rgb0, f.d2);
  const __m512i low = _mm512_dpbusd_epi32(f.bias, rgb0, f.d0);
  const __m512i upper = _mm512_dpbusd_epi32(_mm512_slli_epi32(high, 7), rgb0, f.d1);
  return _mm512_add_epi32(_mm512_slli_epi32(upper, 7), low);
}

// The lanes of four such vectors whose value must come from the float formula instead (Z mod 2^21 below 2^11), as
// one mask: the test of each vector, or-ed in mask registers.
IMG2GRAY_AVX512_VNNI IMG2GRAY_AVX512 __mmask16 ambiguous_64(const __m512i (&z)[4], const Avx512Fixed& f) {
  const auto test = [&](int j) { return _mm512_testn_epi32_mask(z[j], f.ambiguous_bits); };
  return _kor_mask16(_kor_mask16(test(0), test(1)), _kor_mask16(test(2), test(3)));
}

// The blocks of a run that hold an ambiguous lane, written again by the float path once the run is done: a branch
// per block would be mispredicted in about one block of sixteen (random colours), and a scalar fix per pixel costs
// more than the float path's block.
struct Fixups {
  static constexpr int kBlocks = 64;  // blocks of 64 pixels per run
  int64_t block[kBlocks];
  int count = 0;

  void add(int64_t at, __mmask16 ambiguous) {  // branch-free
    block[count] = at;
    count += ambiguous != 0;
  }
  template <typename Redo>
  void apply(bool streamed, const Redo& redo) {
    if (count == 0) return;
    if (streamed) _mm_sfence();  // the streamed lines first, then the blocks over them
    for (int k = 0; k < count; ++k) redo(block[k]);
    count = 0;
  }
};

IMG2GRAY_AVX512_VNNI inline int64_t interleaved_u8_avx512_vnni(const uint8_t* __restrict__ rgb,
                                                               uint8_t* __restrict__ out, int64_t n,
                                                               const U8Call& call) {
  const Avx512Fixed f = avx512_fixed(call.fixed);
  const bool stream = stream_to(out, call.stream, 64);
  // Dword j <- bytes 3j, 3j + 1, 3j + 2 of the load and a zero: one vpermb (vpermt2b, which merged in a constant,
  // takes two of the permute port's cycles on Intel's server cores).
  const __m512i take_rgb0 = _mm512_setr_epi32(0x020100, 0x050403, 0x080706, 0x0B0A09, 0x0E0D0C, 0x11100F, 0x141312,
                                              0x171615, 0x1A1918, 0x1D1C1B, 0x201F1E, 0x232221, 0x262524, 0x292827,
                                              0x2C2B2A, 0x2F2E2D);
  constexpr __mmask64 rgb_bytes = 0x7777777777777777ull;  // bytes 0-2 of every dword
  const Avx512Weights w{_mm512_set1_ps(call.weights.r), _mm512_set1_ps(call.weights.g), _mm512_set1_ps(call.weights.b)};
  Fixups fixups;
  const auto redo = [&](int64_t i) {
    const uint8_t* p = rgb + 3 * i;
    store_64(out + i, gray_16_interleaved(p, w), gray_16_interleaved(p + 48, w), gray_16_interleaved(p + 96, w),
             gray_16_interleaved(p + 144, w), false);
  };
  const int64_t blocks = n >= 70 ? (n - 6) / 64 : 0;  // as in interleaved_u8_avx512: 6 pixels readable after each
  // The span is read as two streams side by side, its first and second half, one block of each per step: what one
  // stream loses at the start of every 4 KiB page (its address translation; the hardware prefetchers start again at
  // each page) the other stream's requests overlap. On an Emerald Rapids core (benchmarks/experiments/cpu_pages.cpp,
  // the spans alone) a 4K frame on 4 KiB pages, as torch allocates it, ran at 74-97% of a same-bytes memcpy as one
  // stream and 4-10 points faster as two in each of ten runs (98-103% in the quieter ones), as fast as one stream on
  // huge pages (numpy's large arrays); through torch, 4K channels_last went from 88.5-89.5% to 93.2-95.2%.
  const int64_t half = (blocks + 1) / 2;
  for (int64_t run = 0; run < half; run += Fixups::kBlocks / 2) {
    // No calls inside a run: the constants stay in registers.
    for (int64_t k = run; k < std::min(half, run + Fixups::kBlocks / 2); ++k) {
      for (int64_t second = 0; second < 2; ++second) {  // block k of the first half, then of the second
        if (k + second * half >= blocks) break;  // the second half is a block shorter where `blocks` is odd
        const int64_t i = 64 * (k + second * half);
        const uint8_t* p = rgb + 3 * i;
        prefetch_ahead(p, 192, kInterleavedPrefetchAhead);
        prefetch_output(out + i);
        __m512i z[4];
        for (int j = 0; j < 4; ++j) {
          z[j] = fixed_16(_mm512_maskz_permutexvar_epi8(rgb_bytes, take_rgb0, _mm512_loadu_si512(p + 48 * j)), f);
        }
        store_64(out + i, _mm512_srli_epi32(z[0], kFixedBits), _mm512_srli_epi32(z[1], kFixedBits),
                 _mm512_srli_epi32(z[2], kFixedBits), _mm512_srli_epi32(z[3], kFixedBits), stream);
        fixups.add(i, ambiguous_64(z, f));
      }
    }
    fixups.apply(stream, redo);
  }
  if (stream) _mm_sfence();
  return 64 * blocks;
}

IMG2GRAY_AVX512_VNNI inline int64_t planar_u8_avx512_vnni(const uint8_t* __restrict__ r, const uint8_t* __restrict__ g,
                                                          const uint8_t* __restrict__ b, uint8_t* __restrict__ out,
                                                          int64_t n, const U8Call& call) {
  const Avx512Fixed f = avx512_fixed(call.fixed);
  const bool stream = stream_to(out, call.stream, 64);
  const __m512i zero = _mm512_setzero_si512();
  const Avx512Weights w{_mm512_set1_ps(call.weights.r), _mm512_set1_ps(call.weights.g), _mm512_set1_ps(call.weights.b)};
  Fixups fixups;
  const auto redo = [&](int64_t i) {
    store_64(out + i, gray_16_planar(r + i, g + i, b + i, w), gray_16_planar(r + i + 16, g + i + 16, b + i + 16, w),
             gray_16_planar(r + i + 32, g + i + 32, b + i + 32, w),
             gray_16_planar(r + i + 48, g + i + 48, b + i + 48, w), false);
  };
  const int64_t blocks = n / 64;
  for (int64_t run = 0; run < blocks; run += Fixups::kBlocks) {
    for (int64_t i = 64 * run; i < 64 * std::min(blocks, run + Fixups::kBlocks); i += 64) {  // as above
      prefetch_planes_ahead(r + i, g + i, b + i, 64);
      prefetch_output(out + i);
      const __m512i rv = _mm512_loadu_si512(r + i), gv = _mm512_loadu_si512(g + i), bv = _mm512_loadu_si512(b + i);
      // In-lane unpacks: vector j holds pixels 16L + 4j ... 16L + 4j + 3 of each 128-bit lane L, the order in which
      // the packs below put them back.
      const __m512i rg_low = _mm512_unpacklo_epi8(rv, gv), rg_high = _mm512_unpackhi_epi8(rv, gv);
      const __m512i b0_low = _mm512_unpacklo_epi8(bv, zero), b0_high = _mm512_unpackhi_epi8(bv, zero);
      const __m512i z[4] = {fixed_16(_mm512_unpacklo_epi16(rg_low, b0_low), f),
                            fixed_16(_mm512_unpackhi_epi16(rg_low, b0_low), f),
                            fixed_16(_mm512_unpacklo_epi16(rg_high, b0_high), f),
                            fixed_16(_mm512_unpackhi_epi16(rg_high, b0_high), f)};
      const __m512i bytes = _mm512_packus_epi16(
          _mm512_packs_epi32(_mm512_srli_epi32(z[0], kFixedBits), _mm512_srli_epi32(z[1], kFixedBits)),
          _mm512_packs_epi32(_mm512_srli_epi32(z[2], kFixedBits), _mm512_srli_epi32(z[3], kFixedBits)));
      if (stream) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), bytes);
      } else {
        _mm512_storeu_si512(out + i, bytes);
      }
      fixups.add(i, ambiguous_64(z, f));
    }
    fixups.apply(stream, redo);
  }
  if (stream) _mm_sfence();
  return 64 * blocks;
}

#undef IMG2GRAY_AVX512_VNNI
#undef IMG2GRAY_AVX512

}  // namespace simd
}  // namespace img2gray

#pragma GCC pop_options
#endif  // x86-64 with GCC

// NEON (every AArch64 CPU): vld3 deinterleaves 16 pixels in one load; the float formula as in luma_u8.
#if defined(__aarch64__) && defined(__ARM_NEON)
#define IMG2GRAY_NEON_SPANS 1
#include <arm_neon.h>

namespace img2gray {
namespace simd {

struct NeonWeights {
  float32x4_t r, g, b;
};

// 4 pixels' channels as uint32 -> 4 gray values as uint32. FCVTNU rounds half to even and saturates (negative
// and NaN to 0); the saturating narrows in gray_16_neon cap the rest at 255: from_acc<uint8_t>'s result.
inline uint32x4_t luma_4_neon(uint32x4_t r, uint32x4_t g, uint32x4_t b, const NeonWeights& w) {
  const float32x4_t y = vaddq_f32(vaddq_f32(vmulq_f32(w.r, vcvtq_f32_u32(r)), vmulq_f32(w.g, vcvtq_f32_u32(g))),
                                  vmulq_f32(w.b, vcvtq_f32_u32(b)));
  return vcvtnq_u32_f32(y);
}

inline uint16x8_t luma_8_neon(uint16x8_t r, uint16x8_t g, uint16x8_t b, const NeonWeights& w) {
  const uint32x4_t low = luma_4_neon(vmovl_u16(vget_low_u16(r)), vmovl_u16(vget_low_u16(g)),
                                     vmovl_u16(vget_low_u16(b)), w);
  const uint32x4_t high = luma_4_neon(vmovl_high_u16(r), vmovl_high_u16(g), vmovl_high_u16(b), w);
  return vcombine_u16(vqmovn_u32(low), vqmovn_u32(high));
}

inline uint8x16_t gray_16_neon(uint8x16_t r, uint8x16_t g, uint8x16_t b, const NeonWeights& w) {
  const uint16x8_t low = luma_8_neon(vmovl_u8(vget_low_u8(r)), vmovl_u8(vget_low_u8(g)), vmovl_u8(vget_low_u8(b)), w);
  const uint16x8_t high = luma_8_neon(vmovl_high_u8(r), vmovl_high_u8(g), vmovl_high_u8(b), w);
  return vcombine_u8(vqmovn_u16(low), vqmovn_u16(high));
}

inline int64_t interleaved_u8_neon(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ out, int64_t n,
                                   const Weights<float>& weights) {
  const NeonWeights w{vdupq_n_f32(weights.r), vdupq_n_f32(weights.g), vdupq_n_f32(weights.b)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const uint8x16x3_t px = vld3q_u8(rgb + 3 * i);
    vst1q_u8(out + i, gray_16_neon(px.val[0], px.val[1], px.val[2], w));
  }
  return i;
}

inline int64_t planar_u8_neon(const uint8_t* __restrict__ r, const uint8_t* __restrict__ g,
                              const uint8_t* __restrict__ b, uint8_t* __restrict__ out, int64_t n,
                              const Weights<float>& weights) {
  const NeonWeights w{vdupq_n_f32(weights.r), vdupq_n_f32(weights.g), vdupq_n_f32(weights.b)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) vst1q_u8(out + i, gray_16_neon(vld1q_u8(r + i), vld1q_u8(g + i), vld1q_u8(b + i), w));
  return i;
}

}  // namespace simd
}  // namespace img2gray
#endif  // AArch64

namespace img2gray {
namespace simd {

// The paths of this architecture, narrowest first.
#if defined(IMG2GRAY_X86_SPANS)
constexpr CpuIsa kIsas[] = {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Vnni};
constexpr const char* kIsaNames[] = {"scalar", "avx2", "avx512", "avx512vnni"};
#elif defined(IMG2GRAY_NEON_SPANS)
constexpr CpuIsa kIsas[] = {CpuIsa::Scalar, CpuIsa::Neon};
constexpr const char* kIsaNames[] = {"scalar", "neon"};
#else
constexpr CpuIsa kIsas[] = {CpuIsa::Scalar};
constexpr const char* kIsaNames[] = {"scalar"};
#endif
constexpr int kIsaCount = sizeof(kIsas) / sizeof(kIsas[0]);

// Index into kIsas of the widest path this CPU runs.
inline int detected_isa() {
#if defined(IMG2GRAY_X86_SPANS)
  if (!__builtin_cpu_supports("avx2")) return 0;
  if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vbmi")) return 1;
  return __builtin_cpu_supports("avx512vnni") ? 3 : 2;
#else
  return kIsaCount - 1;  // NEON is part of AArch64
#endif
}

// The widest path this CPU runs, or the one IMG2GRAY_CPU_ISA names if that is narrower (so that the tests reach
// every path on one machine). Read once per process.
inline CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
    int chosen = detected_isa();
    if (const char* cap = std::getenv("IMG2GRAY_CPU_ISA"); cap != nullptr && *cap != '\0') {
      int named = -1;
      std::string names;
      for (int k = 0; k < kIsaCount; ++k) {
        if (std::strcmp(cap, kIsaNames[k]) == 0) named = k;
        names += std::string(k == 0 ? "" : ", ") + kIsaNames[k];
      }
      STD_TORCH_CHECK(named >= 0, "img2gray: IMG2GRAY_CPU_ISA=", cap, " is not a CPU path of this build; use one of ",
                      names, ", or unset it");
      chosen = named < chosen ? named : chosen;
    }
    return kIsas[chosen];
  }();
  return isa;
}

inline U8Call u8_call(const Weights<float>& weights, bool stream) {
  return {cpu_isa(), weights, fixed_point(weights), stream};
}

// How many leading pixels the widest vector code this CPU runs has written; the caller does the rest.
inline int64_t interleaved_u8(const uint8_t* rgb, uint8_t* out, int64_t n, const U8Call& call) {
  int64_t done = 0;
#if defined(IMG2GRAY_X86_SPANS)
  if (call.isa == CpuIsa::Avx512Vnni && call.fixed.usable) {
    done = interleaved_u8_avx512_vnni(rgb, out, n, call);
  } else if (call.isa >= CpuIsa::Avx512) {
    done = interleaved_u8_avx512(rgb, out, n, call);
  }
  if (call.isa >= CpuIsa::Avx2) done += interleaved_u8_avx2(rgb + 3 * done, out + done, n - done, call);
#elif defined(IMG2GRAY_NEON_SPANS)
  if (call.isa == CpuIsa::Neon) done = interleaved_u8_neon(rgb, out, n, call.weights);
#endif
  return done;
}

inline int64_t planar_u8(const uint8_t* r, const uint8_t* g, const uint8_t* b, uint8_t* out, int64_t n,
                         const U8Call& call) {
  int64_t done = 0;
#if defined(IMG2GRAY_X86_SPANS)
  if (call.isa == CpuIsa::Avx512Vnni && call.fixed.usable) {
    done = planar_u8_avx512_vnni(r, g, b, out, n, call);
  } else if (call.isa >= CpuIsa::Avx512) {
    done = planar_u8_avx512(r, g, b, out, n, call);
  }
  if (call.isa >= CpuIsa::Avx2) done += planar_u8_avx2(r + done, g + done, b + done, out + done, n - done, call);
#elif defined(IMG2GRAY_NEON_SPANS)
  if (call.isa == CpuIsa::Neon) done = planar_u8_neon(r, g, b, out, n, call.weights);
#endif
  return done;
}

// float32, float16 and bfloat16: how many leading pixels the AVX-512 spans wrote (none without AVX-512); the caller
// does the rest.
template <typename scalar_t>
inline int64_t interleaved_float(const scalar_t* rgb, scalar_t* out, int64_t n, const Weights<float>& weights) {
#if defined(IMG2GRAY_X86_SPANS)
  if (cpu_isa() >= CpuIsa::Avx512) return interleaved_float_avx512(rgb, out, n, weights);
#endif
  return 0;
}

template <typename scalar_t>
inline int64_t planar_float(const scalar_t* r, const scalar_t* g, const scalar_t* b, scalar_t* out, int64_t n,
                            const Weights<float>& weights) {
#if defined(IMG2GRAY_X86_SPANS)
  if (cpu_isa() >= CpuIsa::Avx512) return planar_float_avx512(r, g, b, out, n, weights);
#endif
  return 0;
}

}  // namespace simd
}  // namespace img2gray
