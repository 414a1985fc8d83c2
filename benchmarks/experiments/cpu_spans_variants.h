#pragma once
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi,avx512vnni,avx512vbmi2")
namespace var {
using namespace img2gray; using namespace img2gray::simd;
struct Fix { __m512i d2, d1, d0, bias, amb; };
inline Fix make_fix(const FixedPoint& f) {
  return {_mm512_set1_epi32(f.digits[2]), _mm512_set1_epi32(f.digits[1]), _mm512_set1_epi32(f.digits[0]),
          _mm512_set1_epi32((int)kFixedBias), _mm512_set1_epi32((int)kFixedAmbiguous)};
}
// MODE 0: Horner with bias in accumulator of first (bias<<? no) -> tree; MODE 1: half Horner
template <int MODE>
__attribute__((always_inline)) inline __m512i z16(__m512i x, const Fix& f) {
  if (MODE == 2) return _mm512_add_epi32(x, f.bias);
  if (MODE == 0) {
    __m512i s2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, f.d2);
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, f.d1);
    __m512i s0 = _mm512_dpbusd_epi32(f.bias, x, f.d0);
    return _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(_mm512_slli_epi32(s2, 7), s1), 7), s0);
  } else {
    __m512i s2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, f.d2);
    __m512i s0 = _mm512_dpbusd_epi32(f.bias, x, f.d0);
    __m512i t = _mm512_dpbusd_epi32(_mm512_slli_epi32(s2, 7), x, f.d1);
    return _mm512_add_epi32(_mm512_slli_epi32(t, 7), s0);
  }
}
template <int MODE, bool KOR, bool PF=true, bool FIX=true, int HINT=3, int AHEAD=8192, bool NT=false, int PFW=0>
inline int64_t hwc(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ out, int64_t n, const U8Call& call) {
  const Fix f = make_fix(call.fixed);
  const __m512i take = _mm512_setr_epi32(0x020100, 0x050403, 0x080706, 0x0B0A09, 0x0E0D0C, 0x11100F, 0x141312, 0x171615,
      0x1A1918, 0x1D1C1B, 0x201F1E, 0x232221, 0x262524, 0x292827, 0x2C2B2A, 0x2F2E2D);
  constexpr __mmask64 rgb_bytes = 0x7777777777777777ull;
  const Avx512Weights w{_mm512_set1_ps(call.weights.r), _mm512_set1_ps(call.weights.g), _mm512_set1_ps(call.weights.b)};
  Fixups fixups;
  const auto redo = [&](int64_t i) {
    const uint8_t* p = rgb + 3 * i;
    store_64(out + i, gray_16_interleaved(p, w), gray_16_interleaved(p + 48, w), gray_16_interleaved(p + 96, w),
             gray_16_interleaved(p + 144, w), false);
  };
  const int64_t blocks = n >= 70 ? (n - 6) / 64 : 0;
  for (int64_t run = 0; run < blocks; run += Fixups::kBlocks) {
    for (int64_t i = 64 * run; i < 64 * std::min(blocks, run + Fixups::kBlocks); i += 64) {
      const uint8_t* p = rgb + 3 * i;
      if (PF) { for (int l = 0; l < 192; l += 64) __builtin_prefetch(p + AHEAD + l, 0, HINT); }
      if (PFW) __builtin_prefetch(out + i + PFW, 1, 3);
      __m512i z[4];
      for (int j = 0; j < 4; ++j) z[j] = z16<MODE>(_mm512_maskz_permutexvar_epi8(rgb_bytes, take, _mm512_loadu_si512(p + 48 * j)), f);
      __mmask16 ambiguous;
      if (KOR) {
        ambiguous = _kor_mask16(_kor_mask16(_mm512_testn_epi32_mask(z[0], f.amb), _mm512_testn_epi32_mask(z[1], f.amb)),
                                _kor_mask16(_mm512_testn_epi32_mask(z[2], f.amb), _mm512_testn_epi32_mask(z[3], f.amb)));
      } else {
        ambiguous = 0; for (int j = 0; j < 4; ++j) ambiguous |= _mm512_testn_epi32_mask(z[j], f.amb);
      }
      store_64(out + i, _mm512_srli_epi32(z[0], 21), _mm512_srli_epi32(z[1], 21), _mm512_srli_epi32(z[2], 21), _mm512_srli_epi32(z[3], 21), NT);
      if (FIX) fixups.add(i, ambiguous); else if (ambiguous==0xFFFF) out[i]=1;
    }
    fixups.apply(false, redo);
  }
  return 64 * blocks;
}

struct Fix2 { __m512i lo, mid, neg_hi, bias, amb, k256, k32768; };
inline Fix2 make_fix2(const Weights<float>& w) {
  const float ch[3] = {w.r, w.g, w.b}; int32_t lo[3], mid[3], hi[3];
  for (int c = 0; c < 3; ++c) {
    int32_t W = (int32_t)std::nearbyint((double)ch[c] * (1 << 21));
    lo[c] = ((W + 128) & 255) - 128; int32_t t = (W - lo[c]) >> 8;
    mid[c] = ((t + 64) & 127) - 64; hi[c] = (t - mid[c]) >> 7;
  }
  auto pack = [](int32_t a, int32_t b, int32_t c) { return _mm512_set1_epi32((int32_t)((uint32_t)(uint8_t)a | (uint32_t)(uint8_t)b << 8 | (uint32_t)(uint8_t)c << 16)); };
  return {pack(lo[0], lo[1], lo[2]), pack(mid[0], mid[1], mid[2]), pack(-hi[0], -hi[1], -hi[2]),
          _mm512_set1_epi32((int)kFixedBias), _mm512_set1_epi32((int)kFixedAmbiguous), _mm512_set1_epi16(256), _mm512_set1_epi16(-32768)};
}
__attribute__((always_inline)) inline __m512i zmw(__m512i x, const Fix2& f) {
  const __m512i s = _mm512_dpbusd_epi32(f.bias, x, f.lo);
  const __m512i v = _mm512_maddubs_epi16(x, f.mid);
  const __m512i u = _mm512_maddubs_epi16(x, f.neg_hi);
  return _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(s, v, f.k256), u, f.k32768);
}
template <bool MS>
inline int64_t hwc_mw(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ out, int64_t n, const U8Call& call) {
  const Fix2 f = make_fix2(call.weights);
  const __m512i take = _mm512_setr_epi32(0x020100, 0x050403, 0x080706, 0x0B0A09, 0x0E0D0C, 0x11100F, 0x141312, 0x171615,
      0x1A1918, 0x1D1C1B, 0x201F1E, 0x232221, 0x262524, 0x292827, 0x2C2B2A, 0x2F2E2D);
  constexpr __mmask64 rgb_bytes = 0x7777777777777777ull;
  // multishift: byte 2j of qword <- bits 21.. of dword 0, byte 2j+1 <- bits 53.. (dword 1)
  const __m512i ms_ctl = _mm512_set1_epi64(0x3515351535153515ll);
  // after OR: byte 8q + 2j + e holds pixel 16j + 2q + e; output byte P = 16j + 2q + e <- 8q + 2j + e
  alignas(64) uint8_t ord[64]; for (int P = 0; P < 64; ++P) { int j = P / 16, q = (P % 16) / 2, e = P % 2; ord[P] = 8 * q + 2 * j + e; }
  const __m512i order = _mm512_load_si512(ord);
  const Avx512Weights w{_mm512_set1_ps(call.weights.r), _mm512_set1_ps(call.weights.g), _mm512_set1_ps(call.weights.b)};
  Fixups fixups;
  const auto redo = [&](int64_t i) {
    const uint8_t* p = rgb + 3 * i;
    store_64(out + i, gray_16_interleaved(p, w), gray_16_interleaved(p + 48, w), gray_16_interleaved(p + 96, w),
             gray_16_interleaved(p + 144, w), false);
  };
  const int64_t blocks = n >= 70 ? (n - 6) / 64 : 0;
  for (int64_t run = 0; run < blocks; run += Fixups::kBlocks) {
    for (int64_t i = 64 * run; i < 64 * std::min(blocks, run + Fixups::kBlocks); i += 64) {
      const uint8_t* p = rgb + 3 * i;
      prefetch_ahead(p, 192, kInterleavedPrefetchAhead);
      __m512i z[4];
      for (int j = 0; j < 4; ++j) z[j] = zmw(_mm512_maskz_permutexvar_epi8(rgb_bytes, take, _mm512_loadu_si512(p + 48 * j)), f);
      __mmask16 clear = _mm512_test_epi32_mask(z[0], f.amb);
      clear = _mm512_mask_test_epi32_mask(clear, z[1], f.amb);
      clear = _mm512_mask_test_epi32_mask(clear, z[2], f.amb);
      clear = _mm512_mask_test_epi32_mask(clear, z[3], f.amb);
      if (MS) {
        __m512i g = _mm512_maskz_multishift_epi64_epi8(0x0303030303030303ull, ms_ctl, z[0]);
        g = _mm512_mask_multishift_epi64_epi8(g, 0x0C0C0C0C0C0C0C0Cull, ms_ctl, z[1]);
        g = _mm512_mask_multishift_epi64_epi8(g, 0x3030303030303030ull, ms_ctl, z[2]);
        g = _mm512_mask_multishift_epi64_epi8(g, 0xC0C0C0C0C0C0C0C0ull, ms_ctl, z[3]);
        _mm512_storeu_si512(out + i, _mm512_permutexvar_epi8(order, g));
      } else {
        store_64(out + i, _mm512_srli_epi32(z[0], 21), _mm512_srli_epi32(z[1], 21), _mm512_srli_epi32(z[2], 21), _mm512_srli_epi32(z[3], 21), false);
      }
      fixups.add(i, (__mmask16)~clear);
    }
    fixups.apply(false, redo);
  }
  return 64 * blocks;
}
}  // namespace var
#pragma GCC pop_options
// The variants measured in issue 54 (benchmarks/experiments/README.md), beside the product's spans.
inline void add_variants(std::vector<std::pair<std::string, std::function<void()>>>& c, const uint8_t* rgb,
                         uint8_t* out, int64_t n, const img2gray::Weights<float>& w) {
  static img2gray::simd::U8Call call{img2gray::simd::CpuIsa::Avx512Vnni, w, img2gray::simd::fixed_point(w), false};
  // Full Horner chain as before issue 54 but one vpermb: MODE 0 tree, MODE 1 two dot products side by side.
  c.push_back({"v-tree", [=] { var::hwc<0, true>(rgb, out, n, call); }});
  c.push_back({"v-half", [=] { var::hwc<1, true>(rgb, out, n, call); }});
  c.push_back({"v-half-nofix", [=] { var::hwc<1, true, true, false>(rgb, out, n, call); }});  // wrong results: a bound
  c.push_back({"v-mw", [=] { var::hwc_mw<false>(rgb, out, n, call); }});   // vpmaddubsw + vpdpwssd, no shifts
  c.push_back({"v-mw-ms", [=] { var::hwc_mw<true>(rgb, out, n, call); }});  // and a vpmultishiftqb gather
  c.push_back({"p-t0-2k", [=] { var::hwc<1, true, true, true, 3, 2048>(rgb, out, n, call); }});
  c.push_back({"p-t1-8k", [=] { var::hwc<1, true, true, true, 2, 8192>(rgb, out, n, call); }});
  c.push_back({"p-nt", [=] { var::hwc<1, true, true, true, 3, 8192, true>(rgb, out, n, call); }});  // streaming
  c.push_back({"p-out1k", [=] { var::hwc<1, true, true, true, 3, 8192, false, 1024>(rgb, out, n, call); }});
  // Loads, permute, add, tests, packs and store: the memory floor of the loop, no dot products (wrong results).
  c.push_back({"x-floor", [=] { var::hwc<2, true, true, false>(rgb, out, n, call); }});
}
