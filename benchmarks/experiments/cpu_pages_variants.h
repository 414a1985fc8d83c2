// Variants of the product's interleaved VNNI loop (csrc/img2gray_cpu_simd.h, interleaved_u8_avx512_vnni) for
// cpu_pages.cpp: the same arithmetic and stores; what differs is how far ahead the input is prefetched, and whether
// the page `touch` bytes ahead of the input is touched by a demand load once per 4 KiB page (so that its address
// translation is walked before the prefetches and the loads get there).
#pragma once
#include "img2gray_cpu_simd.h"

namespace variants {
using namespace img2gray;
using namespace img2gray::simd;

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi,avx512vnni")

template <uintptr_t kAhead, uintptr_t kTouch, uintptr_t kOutTouch, int kHint = _MM_HINT_T0, uintptr_t kKick = 0, int kKickLines = 4>
int64_t interleaved(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ out, int64_t n, const U8Call& call) {
  const Avx512Fixed f = avx512_fixed(call.fixed);
  const __m512i take_rgb0 = _mm512_setr_epi32(0x020100, 0x050403, 0x080706, 0x0B0A09, 0x0E0D0C, 0x11100F, 0x141312,
                                              0x171615, 0x1A1918, 0x1D1C1B, 0x201F1E, 0x232221, 0x262524, 0x292827,
                                              0x2C2B2A, 0x2F2E2D);
  constexpr __mmask64 rgb_bytes = 0x7777777777777777ull;
  const Avx512Weights w{_mm512_set1_ps(call.weights.r), _mm512_set1_ps(call.weights.g), _mm512_set1_ps(call.weights.b)};
  Fixups fixups;
  const auto redo = [&](int64_t i) {
    const uint8_t* p = rgb + 3 * i;
    store_64(out + i, gray_16_interleaved(p, w), gray_16_interleaved(p + 48, w), gray_16_interleaved(p + 96, w),
             gray_16_interleaved(p + 144, w), false);
  };
  const uintptr_t in_end = reinterpret_cast<uintptr_t>(rgb + 3 * n);
  const uintptr_t out_end = reinterpret_cast<uintptr_t>(out + n);
  const int64_t blocks = n >= 70 ? (n - 6) / 64 : 0;
  for (int64_t run = 0; run < blocks; run += Fixups::kBlocks) {
    for (int64_t i = 64 * run; i < 64 * std::min(blocks, run + Fixups::kBlocks); i += 64) {
      const uint8_t* p = rgb + 3 * i;
      if constexpr (kAhead != 0) {
        for (int line = 0; line < 192; line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + kAhead + line), static_cast<_mm_hint>(kHint));
        }
      }
      if constexpr (kKick != 0) {
        const uintptr_t t = reinterpret_cast<uintptr_t>(p) + kKick;
        if ((t & 4095) < 192) {
          for (int line = 0; line < kKickLines; ++line) {
            _mm_prefetch(reinterpret_cast<const char*>((t & ~uintptr_t{4095}) + 64 * line), _MM_HINT_T1);
          }
        }
      }
      if constexpr (kTouch != 0) {
        const uintptr_t t = reinterpret_cast<uintptr_t>(p) + kTouch;
        if ((t & 4095) < 192 && t < in_end) {
          uint8_t v;
          asm volatile("movzbl (%1), %%eax; movb %%al, %0" : "=m"(v) : "r"(t) : "eax");
        }
      }
      if constexpr (kOutTouch != 0) {
        const uintptr_t t = reinterpret_cast<uintptr_t>(out + i) + kOutTouch;
        if ((t & 4095) < 64 && t < out_end) {
          uint8_t v;
          asm volatile("movzbl (%1), %%eax; movb %%al, %0" : "=m"(v) : "r"(t) : "eax");
        }
      }
      prefetch_output(out + i);
      __m512i z[4];
      for (int j = 0; j < 4; ++j) {
        z[j] = fixed_16(_mm512_maskz_permutexvar_epi8(rgb_bytes, take_rgb0, _mm512_loadu_si512(p + 48 * j)), f);
      }
      store_64(out + i, _mm512_srli_epi32(z[0], kFixedBits), _mm512_srli_epi32(z[1], kFixedBits),
               _mm512_srli_epi32(z[2], kFixedBits), _mm512_srli_epi32(z[3], kFixedBits), false);
      fixups.add(i, ambiguous_64(z, f));
    }
    fixups.apply(false, redo);
  }
  return 64 * blocks;
}

// The span cut into kStreams parts read side by side: each iteration does one 64-pixel block of every part, so that
// the input is kStreams sequential streams (as the planar loop's three planes are) instead of one.
template <int kStreams, uintptr_t kAhead = 8192, int64_t kShift = 0>
int64_t interleaved_streams(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ out, int64_t n, const U8Call& call) {
  const Avx512Fixed f = avx512_fixed(call.fixed);
  const __m512i take_rgb0 = _mm512_setr_epi32(0x020100, 0x050403, 0x080706, 0x0B0A09, 0x0E0D0C, 0x11100F, 0x141312,
                                              0x171615, 0x1A1918, 0x1D1C1B, 0x201F1E, 0x232221, 0x262524, 0x292827,
                                              0x2C2B2A, 0x2F2E2D);
  constexpr __mmask64 rgb_bytes = 0x7777777777777777ull;
  const Avx512Weights w{_mm512_set1_ps(call.weights.r), _mm512_set1_ps(call.weights.g), _mm512_set1_ps(call.weights.b)};
  Fixups fixups;
  const auto redo = [&](int64_t i) {
    const uint8_t* p = rgb + 3 * i;
    store_64(out + i, gray_16_interleaved(p, w), gray_16_interleaved(p + 48, w), gray_16_interleaved(p + 96, w),
             gray_16_interleaved(p + 144, w), false);
  };
  const int64_t blocks = n >= 70 ? (n - 6) / 64 : 0;
  const int64_t part = blocks / kStreams + kShift;  // blocks per stream; the rest after them, one stream
  constexpr int64_t kPerRun = Fixups::kBlocks / kStreams;
  const auto block = [&](int64_t i) __attribute__((always_inline)) {
    const uint8_t* p = rgb + 3 * i;
    prefetch_ahead(p, 192, kAhead);
    prefetch_output(out + i);
    __m512i z[4];
    for (int j = 0; j < 4; ++j) {
      z[j] = fixed_16(_mm512_maskz_permutexvar_epi8(rgb_bytes, take_rgb0, _mm512_loadu_si512(p + 48 * j)), f);
    }
    store_64(out + i, _mm512_srli_epi32(z[0], kFixedBits), _mm512_srli_epi32(z[1], kFixedBits),
             _mm512_srli_epi32(z[2], kFixedBits), _mm512_srli_epi32(z[3], kFixedBits), false);
    fixups.add(i, ambiguous_64(z, f));
  };
  for (int64_t run = 0; run < part; run += kPerRun) {
    for (int64_t k = run; k < std::min(part, run + kPerRun); ++k) {
      for (int s = 0; s < kStreams; ++s) if (k + s * part < blocks) block(64 * (k + s * part));
    }
    fixups.apply(false, redo);
  }
  for (int64_t run = kStreams * part; run < blocks; run += Fixups::kBlocks) {
    for (int64_t k = run; k < std::min(blocks, run + Fixups::kBlocks); ++k) block(64 * k);
    fixups.apply(false, redo);
  }
  return 64 * blocks;
}

#pragma GCC pop_options
}  // namespace variants
