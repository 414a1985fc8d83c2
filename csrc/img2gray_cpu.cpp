// CPU kernel: parallel over pixels with ATen's thread pool. uint8 spans use hand-written AVX2/AVX-512
// (img2gray_cpu_simd.h); the other loops are written so the compiler vectorizes them, compiled for AVX2
// and a baseline x86-64 with a run-time choice between the two.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <type_traits>

#include "img2gray.h"
#include "img2gray_cpu_simd.h"
#include "layout.h"

// With torch's OpenMP backend, at::parallel_for is a header template that needs -fopenmp in this
// translation unit; without it the op silently runs on one thread (half the speed on two cores).
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#warning "img2gray: compile the CPU kernel with -fopenmp, or at::parallel_for runs on a single thread"
#endif

namespace img2gray {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define IMG2GRAY_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define IMG2GRAY_CPU_CLONES
#endif

// Enough pixels per task that scheduling cost disappears, few enough that two cores share a 1080p frame.
constexpr int64_t kGrainPixels = 1 << 15;

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

// uint8 goes through the hand-vectorized spans first; the loops above finish what they leave.
template <typename scalar_t>
void planar_span(const scalar_t* r, const scalar_t* g, const scalar_t* b, scalar_t* out, int64_t n,
                 Weights<acc_t<scalar_t>> w) {
  int64_t done = 0;
  if constexpr (std::is_same_v<scalar_t, uint8_t>) done = simd::planar_u8(r, g, b, out, n, w);
  planar_loop(r + done, g + done, b + done, out + done, n - done, w);
}

template <typename scalar_t>
void interleaved_span(const scalar_t* rgb, scalar_t* out, int64_t n, Weights<acc_t<scalar_t>> w) {
  int64_t done = 0;
  if constexpr (std::is_same_v<scalar_t, uint8_t>) done = simd::interleaved_u8(rgb, out, n, w);
  interleaved_loop(rgb + 3 * done, out + done, n - done, w);
}

template <typename scalar_t>
void run(const at::Tensor& input, at::Tensor& out, const Plan& plan, Weights<acc_t<scalar_t>> w) {
  const scalar_t* in = input.const_data_ptr<scalar_t>();
  scalar_t* dst = out.mutable_data_ptr<scalar_t>();
  switch (plan.layout) {
    case Layout::Interleaved:
      at::parallel_for(0, plan.pixels, kGrainPixels, [&](int64_t begin, int64_t end) {
        interleaved_span(in + 3 * begin, dst + begin, end - begin, w);
      });
      break;
    case Layout::Planar:
      // Pixels are split into runs that stay within one (r, g, b) plane triple.
      at::parallel_for(0, plan.pixels, kGrainPixels, [&](int64_t begin, int64_t end) {
        while (begin < end) {
          const int64_t o = begin / plan.inner;
          const int64_t i = begin % plan.inner;
          const int64_t n = std::min(end - begin, plan.inner - i);
          const scalar_t* r = in + (3 * o) * plan.inner + i;
          planar_span(r, r + plan.inner, r + 2 * plan.inner, dst + begin, n, w);
          begin += n;
        }
      });
      break;
    case Layout::Strided: {
      const StridedGeometry& geo = plan.strided;
      at::parallel_for(0, plan.pixels, kGrainPixels, [&](int64_t begin, int64_t end) {
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

void img2gray_cpu(const at::Tensor& input, const Plan& plan, at::ArrayRef<double> weights, at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND3(at::kByte, at::kHalf, at::kBFloat16, input.scalar_type(), "img2gray_cpu", [&] {
    run<scalar_t>(input, out, plan, weights_as<acc_t<scalar_t>>(weights.data()));
  });
}

}  // namespace img2gray
