// The per-pixel math of img2gray, shared by the CPU and CUDA kernels.
#pragma once

#include <torch/headeronly/util/BFloat16.h>  // c10::BFloat16, header-only
#include <torch/headeronly/util/Half.h>

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define IMG2GRAY_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define IMG2GRAY_HOST_DEVICE inline
#endif

namespace img2gray {

// Arithmetic type: double for double inputs, float for everything else (uint8, half, bfloat16, float).
template <typename scalar_t>
struct AccType {
  using type = float;
};
template <>
struct AccType<double> {
  using type = double;
};
template <typename scalar_t>
using acc_t = typename AccType<scalar_t>::type;

template <typename acc>
struct Weights {
  acc r, g, b;
};

// The channel weights (R, G, B, as the op takes them) in the precision they are applied in.
template <typename acc>
Weights<acc> weights_as(const double* rgb) {
  return {static_cast<acc>(rgb[0]), static_cast<acc>(rgb[1]), static_cast<acc>(rgb[2])};
}

// Products and sums are rounded one at a time (never fused into an FMA), so the CPU kernel, the CUDA
// kernel and the reference expression `(wr * r + wg * g) + wb * b` agree to the last bit. That matters
// for uint8, where a one-ulp difference can flip the rounding of a .5 result.
IMG2GRAY_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
IMG2GRAY_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
IMG2GRAY_HOST_DEVICE double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
IMG2GRAY_HOST_DEVICE double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

template <typename acc>
IMG2GRAY_HOST_DEVICE acc luma(acc r, acc g, acc b, const Weights<acc>& w) {
  return add_rn(add_rn(mul_rn(w.r, r), mul_rn(w.g, g)), mul_rn(w.b, b));
}

// Conversion of stored values to the arithmetic type.
IMG2GRAY_HOST_DEVICE float to_acc(uint8_t v) {
#if defined(__CUDA_ARCH__)
  // 2^23 + v has v in its low mantissa bits; subtracting 2^23 is exact. A byte permute and an add
  // instead of the integer->float unit, which would otherwise cap uint8 throughput.
  return __fsub_rn(__uint_as_float(0x4B000000u | v), 8388608.0f);
#else
  return static_cast<float>(v);
#endif
}
IMG2GRAY_HOST_DEVICE float to_acc(c10::Half v) { return static_cast<float>(v); }
IMG2GRAY_HOST_DEVICE float to_acc(c10::BFloat16 v) { return static_cast<float>(v); }
IMG2GRAY_HOST_DEVICE float to_acc(float v) { return v; }
IMG2GRAY_HOST_DEVICE double to_acc(double v) { return v; }

// Conversion of results back to the stored type.
template <typename scalar_t>
IMG2GRAY_HOST_DEVICE scalar_t from_acc(acc_t<scalar_t> v) {
  return static_cast<scalar_t>(v);
}

// uint8: saturate to [0, 255], then round half to even. Adding 2^23 to a float in [0, 256) leaves
// round-to-nearest-even(v) in the low mantissa bits: exact, branch-free, and vectorizable on both
// devices (no libm call on the CPU, no slow float->int conversion unit on the GPU).
template <>
IMG2GRAY_HOST_DEVICE uint8_t from_acc<uint8_t>(float v) {
  v = v < 0.0f ? 0.0f : v;
  v = v > 255.0f ? 255.0f : v;
  const float shifted = add_rn(v, 8388608.0f);
  uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return static_cast<uint8_t>(bits & 0xFFu);
}

// True when no weighted sum of bytes can leave [0, 255.25) under `w`, so that the clamp of from_acc<uint8_t>
// cannot change a uint8 result (a sum in (255, 255.5) rounds to 255 with or without it) and a kernel may skip
// it. With non-negative weights every rounded product and sum is monotone in each channel, so (255, 255, 255)
// gives the largest sum; the quarter below 255.5 absorbs any host/device difference in its last bits.
inline bool saturation_is_identity(const Weights<float>& w) {
  return w.r >= 0.0f && w.g >= 0.0f && w.b >= 0.0f && luma(255.0f, 255.0f, 255.0f, w) < 255.25f;
}

template <typename scalar_t>
IMG2GRAY_HOST_DEVICE scalar_t gray(scalar_t r, scalar_t g, scalar_t b, const Weights<acc_t<scalar_t>>& w) {
  return from_acc<scalar_t>(luma(to_acc(r), to_acc(g), to_acc(b), w));
}

}  // namespace img2gray
