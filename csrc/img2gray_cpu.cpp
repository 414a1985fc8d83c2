// CPU kernel: parallel over pixels with torch's thread pool. uint8 spans use hand-written AVX2/AVX-512/NEON
// (img2gray_cpu_simd.h); the other loops are written so the compiler vectorizes them, compiled for AVX2
// and a baseline x86-64 with a run-time choice between the two. Compiled for either build: with
// TORCH_TARGET_VERSION (the stable-ABI build) the thread pool is reached through torch's C shim.
#ifdef TORCH_TARGET_VERSION
#include <torch/csrc/stable/ops.h>  // torch::stable::parallel_for
#else
#include <ATen/Parallel.h>
// With torch's OpenMP backend, at::parallel_for is a header template that needs -fopenmp in this
// translation unit; without it the op silently runs on one thread (half the speed on two cores).
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#warning "img2gray: compile the CPU kernel with -fopenmp, or at::parallel_for runs on a single thread"
#endif
#endif
#include <torch/headeronly/util/Exception.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <type_traits>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>  // sysconf: glibc's cache sizes
#endif

#include "img2gray.h"
#include "img2gray_cpu.h"
#include "img2gray_cpu_simd.h"
#include "layout.h"

namespace img2gray {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define IMG2GRAY_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define IMG2GRAY_CPU_CLONES
#endif

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
#ifdef TORCH_TARGET_VERSION
  torch::stable::parallel_for(begin, end, grain, f);
#else
  at::parallel_for(begin, end, grain, f);
#endif
}

// Enough pixels per task that scheduling cost disappears, few enough that two cores share a 1080p frame.
// A multiple of 64, so that every task's output stays as aligned as the whole output (streaming stores).
constexpr int64_t kGrainPixels = 1 << 15;

// uint8 outputs are written with streaming stores where the call's input and output together (4 bytes a pixel)
// take at least half the last-level cache: there the output's lines would only evict input still to be read, and
// every line written the ordinary way is read from memory first. Where they fit, the output stays in the cache
// for whoever reads it next (the next call with out=, the pipeline's next step), and streaming it to memory costs:
// a 4K frame (33 MB) on a Xeon whose L3 is 480 MiB ran at 64-69% of a same-bytes copy streamed, 89-92% not (NCHW,
// benchmarks/README.md). The cache's size is glibc's (sysconf), else 32 MiB: a 4 MiB output, the threshold measured
// on a Zen 4 core complex's L3, where a 4K frame's output (8.3 MB) streams and a 1080p frame's (2 MB) does not.
// IMG2GRAY_CPU_CACHE_BYTES sets the size (tests reach the streamed paths on any CPU with it). Read once per process.
constexpr int64_t kUnknownCacheBytes = int64_t{32} << 20;

int64_t streaming_threshold_bytes() {
  static const int64_t threshold = [] {
    int64_t cache = kUnknownCacheBytes;
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE); l3 > 0) cache = l3;
#endif
    if (const char* given = std::getenv("IMG2GRAY_CPU_CACHE_BYTES"); given != nullptr && *given != '\0') {
      char* end = nullptr;
      errno = 0;
      const long long bytes = std::strtoll(given, &end, 10);
      STD_TORCH_CHECK(*end == '\0' && errno == 0 && bytes > 0, "img2gray: IMG2GRAY_CPU_CACHE_BYTES=", given,
                      " is not a number of bytes; give the last-level cache's size (e.g. 33554432), or unset it");
      cache = bytes;
    }
    return cache / 2;
  }();
  return threshold;
}

template <typename scalar_t>
IMG2GRAY_CPU_CLONES void planar_loop(const scalar_t* __restrict__ r, const scalar_t* __restrict__ g,
                                     const scalar_t* __restrict__ b, scalar_t* __restrict__ out, int64_t n,
                                     Weights<acc_t<scalar_t>> w) {
  for (int64_t i = 0; i < n; ++i) out[i] = gray(r[i], g[i], b[i], w);
}

template <typename scalar_t>
IMG2GRAY_CPU_CLONES void interleaved_loop(const scalar_t* __restrict__ rgb, scalar_t* __restrict__ out, int64_t n,
                                          Weights<acc_t<scalar_t>> w) {
  for (int64_t i = 0; i < n; ++i) out[i] = gray(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2], w);
}

// The types with hand-vectorized float spans (img2gray_cpu_simd.h): float32 and the 16-bit floats, computed in float.
template <typename scalar_t>
constexpr bool kFloatSpans = std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::Half> ||
                             std::is_same_v<scalar_t, c10::BFloat16>;

// uint8 and the float types go through the hand-vectorized spans first; the loops above finish what they leave.
// `u8` (the vector paths' view of the call) is used for uint8 only.
template <typename scalar_t>
void planar_span(const scalar_t* r, const scalar_t* g, const scalar_t* b, scalar_t* out, int64_t n,
                 Weights<acc_t<scalar_t>> w, const simd::U8Call& u8) {
  int64_t done = 0;
  if constexpr (std::is_same_v<scalar_t, uint8_t>) done = simd::planar_u8(r, g, b, out, n, u8);
  if constexpr (kFloatSpans<scalar_t>) done = simd::planar_float(r, g, b, out, n, w);
  planar_loop(r + done, g + done, b + done, out + done, n - done, w);
}

template <typename scalar_t>
void interleaved_span(const scalar_t* rgb, scalar_t* out, int64_t n, Weights<acc_t<scalar_t>> w,
                      const simd::U8Call& u8) {
  int64_t done = 0;
  if constexpr (std::is_same_v<scalar_t, uint8_t>) done = simd::interleaved_u8(rgb, out, n, u8);
  if constexpr (kFloatSpans<scalar_t>) done = simd::interleaved_float(rgb, out, n, w);
  interleaved_loop(rgb + 3 * done, out + done, n - done, w);
}

template <typename scalar_t>
void run(const void* input, void* out, const Plan& plan, Weights<acc_t<scalar_t>> w) {
  const auto* in = static_cast<const scalar_t*>(input);
  auto* dst = static_cast<scalar_t*>(out);
  simd::U8Call u8{};
  if constexpr (std::is_same_v<scalar_t, uint8_t>) u8 = simd::u8_call(w, 4 * plan.pixels >= streaming_threshold_bytes());
  switch (plan.layout) {
    case Layout::Interleaved:
      parallel_for(0, plan.pixels, kGrainPixels, [&](int64_t begin, int64_t end) {
        interleaved_span(in + 3 * begin, dst + begin, end - begin, w, u8);
      });
      break;
    case Layout::Planar:
      // Pixels are split into runs that stay within one (r, g, b) plane triple.
      parallel_for(0, plan.pixels, kGrainPixels, [&](int64_t begin, int64_t end) {
        while (begin < end) {
          const int64_t o = begin / plan.inner;
          const int64_t i = begin % plan.inner;
          const int64_t n = std::min(end - begin, plan.inner - i);
          const scalar_t* r = in + (3 * o) * plan.inner + i;
          planar_span(r, r + plan.inner, r + 2 * plan.inner, dst + begin, n, w, u8);
          begin += n;
        }
      });
      break;
    case Layout::Strided: {
      const StridedGeometry& geo = plan.strided;
      parallel_for(0, plan.pixels, kGrainPixels, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          const scalar_t* px = in + strided_offset(geo, p);
          dst[p] = gray(px[0], px[geo.channel_stride], px[2 * geo.channel_stride], w);
        }
      });
      break;
    }
  }
}

}  // namespace

void img2gray_cpu(const Plan& plan, c10::ScalarType dtype, const void* input, void* out, const double* weights) {
  switch (dtype) {
    case c10::ScalarType::Byte: run<uint8_t>(input, out, plan, weights_as<float>(weights)); break;
    case c10::ScalarType::Half: run<c10::Half>(input, out, plan, weights_as<float>(weights)); break;
    case c10::ScalarType::BFloat16: run<c10::BFloat16>(input, out, plan, weights_as<float>(weights)); break;
    case c10::ScalarType::Float: run<float>(input, out, plan, weights_as<float>(weights)); break;
    case c10::ScalarType::Double: run<double>(input, out, plan, weights_as<double>(weights)); break;
    default: STD_TORCH_CHECK(false, "img2gray_cpu: unsupported dtype");  // the binding checked it already
  }
}

}  // namespace img2gray
