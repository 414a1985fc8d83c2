// The CUDA kernels and their launch shape, free of ATen so that standalone experiments
// (benchmarks/experiments/frame_shapes.cu) time exactly the product's code.
//
// Dense layouts move packets of 16 or 8 bytes (4 on tiny 8/16-bit inputs), one per thread (`launch_dense` at
// the end says which and why); everything else takes a per-pixel strided path.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "img2gray.h"
#include "layout.h"

namespace img2gray {
namespace kernels {

constexpr int kThreads = 256;

// Raw register types for packets of 16, 8 and 4 bytes.
template <int kBytes>
struct RawPacket;
template <>
struct RawPacket<16> {
  using type = uint4;
};
template <>
struct RawPacket<8> {
  using type = uint2;
};
template <>
struct RawPacket<4> {
  using type = unsigned int;
};

// One register packet of `scalar_t` values, moved with a single load or store instruction.
template <typename scalar_t, int kBytes>
union Packet {
  static constexpr int kSize = kBytes / sizeof(scalar_t);
  typename RawPacket<kBytes>::type raw;
  scalar_t values[kSize];
  uint32_t words[kBytes / 4];
};

// uint8 at the word level. Written out because the compiler's own code for byte extraction, clamping and
// packing took 23 SASS instructions per pixel (Nsight Compute: 72% issue-active while the H200's DRAM ran at
// 76% on 64 1080p frames); this takes 15. The arithmetic is the contract's (img2gray.h), operation for
// operation (benchmarks/results/h200/ncu.md).

// The bits of 2^23 as a float. Passed in as a kernel parameter, which the compiler cannot fold: the byte
// permute then takes its selector as the immediate operand (with this constant as the immediate instead,
// every selector took a register move, 2.5 per pixel).
constexpr uint32_t kFloatExponent23 = 0x4B000000u;

// Byte k of `word` as a float: one byte permute builds the bits of 2^23 + byte (0x4B0000vv), one exact
// subtraction removes 2^23.
template <int k>
__device__ __forceinline__ float byte_as_float(uint32_t word, uint32_t exponent) {
  return __fsub_rn(__uint_as_float(__byte_perm(word, exponent, 0x7540u | k)), 8388608.0f);
}

// from_acc<uint8_t> with the byte left in the low 8 bits of the result: saturate, then 2^23 + v rounds
// half to even. fmaxf/fminf equal the contract's comparisons for every non-NaN value, and a finite
// weighted sum of bytes is never NaN.
template <bool kSaturate>
__device__ __forceinline__ uint32_t rounded_byte_bits(float v) {
  if constexpr (kSaturate) v = fminf(fmaxf(v, 0.0f), 255.0f);
  return __float_as_uint(__fadd_rn(v, 8388608.0f));
}

// Four results' low bytes into one word: three byte permutes.
__device__ __forceinline__ uint32_t pack_low_bytes(uint32_t b0, uint32_t b1, uint32_t b2, uint32_t b3) {
  return __byte_perm(__byte_perm(b0, b1, 0x0040u), __byte_perm(b2, b3, 0x0040u), 0x5410u);
}

// Pixel k of a run of uint8 pixels whose channel c sits at byte Index::at<k, c>() of the channel's words.
template <int k, typename Index, bool kSaturate, int kWords>
__device__ __forceinline__ uint32_t gray_byte_bits(const uint32_t (&r)[kWords], const uint32_t (&g)[kWords],
                                                   const uint32_t (&b)[kWords], const Weights<float>& w, uint32_t e) {
  constexpr int ri = Index::template at<k, 0>(), gi = Index::template at<k, 1>(), bi = Index::template at<k, 2>();
  return rounded_byte_bits<kSaturate>(luma(byte_as_float<ri % 4>(r[ri / 4], e), byte_as_float<gi % 4>(g[gi / 4], e),
                                byte_as_float<bi % 4>(b[bi / 4], e), w));
}

// Four pixels per output word: word j holds pixels 4j..4j+3.
template <typename Index, bool kSaturate, int kIn, int kOut, int... k4>
__device__ __forceinline__ void gray_bytes(const uint32_t (&r)[kIn], const uint32_t (&g)[kIn],
                                           const uint32_t (&b)[kIn], const Weights<float>& w, uint32_t e,
                                           uint32_t (&out)[kOut], std::integer_sequence<int, k4...>) {
  ((out[k4] = pack_low_bytes(gray_byte_bits<4 * k4, Index, kSaturate>(r, g, b, w, e),
                             gray_byte_bits<4 * k4 + 1, Index, kSaturate>(r, g, b, w, e),
                             gray_byte_bits<4 * k4 + 2, Index, kSaturate>(r, g, b, w, e),
                             gray_byte_bits<4 * k4 + 3, Index, kSaturate>(r, g, b, w, e))),
   ...);
}

// Byte positions: planar packets hold pixel k at byte k of each channel's packet; interleaved packets hold
// channel c of pixel k at byte 3k + c of the three packets taken as one run.
struct PlanarBytes {
  template <int k, int c>
  static constexpr __host__ __device__ int at() { return k; }
};
struct InterleavedBytes {
  template <int k, int c>
  static constexpr __host__ __device__ int at() { return 3 * k + c; }
};

// Plain read-only-path loads and plain stores: on the H200, evict-first hints (__ldcs/__stcs) cost 5-6%
// of bandwidth here (benchmarks/experiments/planar_variants.cu).
template <typename scalar_t, int kBytes>
__device__ __forceinline__ Packet<scalar_t, kBytes> load_packet(const scalar_t* p) {
  Packet<scalar_t, kBytes> packet;
  packet.raw = __ldg(reinterpret_cast<const typename RawPacket<kBytes>::type*>(p));
  return packet;
}

template <typename scalar_t, int kBytes>
__device__ __forceinline__ void store_packet(scalar_t* p, const Packet<scalar_t, kBytes>& packet) {
  *reinterpret_cast<typename RawPacket<kBytes>::type*>(p) = packet.raw;
}

// A packet of results in the stored type. 16-bit floats are rounded two at a time into one word (one
// F2FP per pair, as __floats2half2_rn does); converted one by one, the compiler then spent about 20 more
// instructions per 8 values masking and shifting halves into place (sm_90 SASS). Same rounding: to nearest even.
template <typename scalar_t, int kBytes>
__device__ __forceinline__ Packet<scalar_t, kBytes> stored(const acc_t<scalar_t> (&v)[Packet<scalar_t, kBytes>::kSize]) {
  Packet<scalar_t, kBytes> result;
  if constexpr (std::is_same_v<scalar_t, c10::Half>) {
#pragma unroll
    for (int i = 0; i < kBytes / 4; ++i) {
      const __half2 pair = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
      result.words[i] = *reinterpret_cast<const uint32_t*>(&pair);
    }
  } else if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
#pragma unroll
    for (int i = 0; i < kBytes / 4; ++i) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
      result.words[i] = *reinterpret_cast<const uint32_t*>(&pair);
    }
  } else {
#pragma unroll
    for (int k = 0; k < result.kSize; ++k) result.values[k] = from_acc<scalar_t>(v[k]);
  }
  return result;
}

// The gray packet of one packet of pixels given as three planar packets, one per channel.
template <bool kSaturate = true, typename scalar_t, int kBytes>
__device__ __forceinline__ Packet<scalar_t, kBytes> planar_gray(const Packet<scalar_t, kBytes> (&channel)[3],
                                                                const Weights<acc_t<scalar_t>>& w, uint32_t exponent) {
  Packet<scalar_t, kBytes> result;
  if constexpr (std::is_same_v<scalar_t, uint8_t>) {
    gray_bytes<PlanarBytes, kSaturate>(channel[0].words, channel[1].words, channel[2].words, w, exponent, result.words,
                            std::make_integer_sequence<int, kBytes / 4>{});
  } else {
    acc_t<scalar_t> v[result.kSize];
#pragma unroll
    for (int k = 0; k < result.kSize; ++k) {
      v[k] = luma(to_acc(channel[0].values[k]), to_acc(channel[1].values[k]), to_acc(channel[2].values[k]), w);
    }
    result = stored<scalar_t, kBytes>(v);
  }
  return result;
}

// The gray packet of kSize interleaved pixels, given as three consecutive packets (r0 g0 b0 r1 ...).
template <bool kSaturate = true, typename scalar_t, int kBytes>
__device__ __forceinline__ Packet<scalar_t, kBytes> interleaved_gray(const Packet<scalar_t, kBytes> (&chunk)[3],
                                                                     const Weights<acc_t<scalar_t>>& w, uint32_t exponent) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  Packet<scalar_t, kBytes> result;
  if constexpr (std::is_same_v<scalar_t, uint8_t>) {
    // The three packets as one run of 3 * kBytes bytes.
    uint32_t run[3 * kBytes / 4];
#pragma unroll
    for (int i = 0; i < 3 * kBytes / 4; ++i) run[i] = chunk[i / (kBytes / 4)].words[i % (kBytes / 4)];
    gray_bytes<InterleavedBytes, kSaturate>(run, run, run, w, exponent, result.words, std::make_integer_sequence<int, kBytes / 4>{});
  } else {
    acc_t<scalar_t> v[kSize];
#pragma unroll
    for (int k = 0; k < kSize; ++k) {
      // Channel j of pixel k is value 3k+j of the 3*kSize loaded values; indices are compile-time.
      const scalar_t r = chunk[(3 * k) / kSize].values[(3 * k) % kSize];
      const scalar_t g = chunk[(3 * k + 1) / kSize].values[(3 * k + 1) % kSize];
      const scalar_t b = chunk[(3 * k + 2) / kSize].values[(3 * k + 2) % kSize];
      v[k] = luma(to_acc(r), to_acc(g), to_acc(b), w);
    }
    result = stored<scalar_t, kBytes>(v);
  }
  return result;
}

// Dense layouts: one packet of pixels per thread, on a grid that covers the input (no loop: a grid-stride
// loop cost single frames about 1%, benchmarks/experiments/README.md). kSaturate false skips the clamp to
// [0, 255] of uint8 results, for weights under which it cannot change a result (saturation_is_identity).

// Planar (..., 3, inner) with `inner` a multiple of the packet size, on a 2D grid: blockIdx.x counts packets
// within a plane, blockIdx.y planes (kOnePlane: a single plane, and no plane term at all). No thread divides to
// find its plane and none loops: a grid has at most 65535 rows, so more planes take more launches
// (launch_packets). A thread reads one packet from each of the three planes and writes one. Threads past the
// plane's end (in its last block) read the plane's last packet again and store nothing, so that no branch
// stands before the loads: on the H200 that was 0.3-0.9% faster on frames and small batches than an exit
// before the loads, and than a grid without such threads and without a test at all
// (benchmarks/experiments/frame_variants.cu, ../benchmarks/experiments/README.md).
template <typename scalar_t, int kBytes, typename index_t, bool kSaturate, bool kOnePlane>
__global__ void __launch_bounds__(kThreads) planar_packets(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                                           index_t packets_per_plane, uint64_t plane_bytes,
                                                           const Weights<acc_t<scalar_t>> w, uint32_t exponent) {
  const index_t q = static_cast<index_t>(blockIdx.x) * kThreads + static_cast<index_t>(threadIdx.x);
  const index_t p = min(q, packets_per_plane - 1);
  const uint64_t plane = kOnePlane ? 0u : blockIdx.y;
  const char* r = reinterpret_cast<const char*>(in) + plane * (3 * plane_bytes) + static_cast<uint64_t>(p) * kBytes;
  Packet<scalar_t, kBytes> channel[3];
#pragma unroll
  for (int c = 0; c < 3; ++c) channel[c] = load_packet<scalar_t, kBytes>(reinterpret_cast<const scalar_t*>(r + c * plane_bytes));
  if (q >= packets_per_plane) return;
  char* o = reinterpret_cast<char*>(out) + plane * plane_bytes + static_cast<uint64_t>(p) * kBytes;
  store_packet(reinterpret_cast<scalar_t*>(o), planar_gray<kSaturate>(channel, w, exponent));
}

// Interleaved (..., 3) dense pixels: a packet of kSize pixels reads three packets and writes one. The pixels
// after the last whole packet (fewer than kSize) are done one by one by the grid's last thread.
template <typename scalar_t, int kBytes, typename index_t, bool kSaturate>
__global__ void __launch_bounds__(kThreads) interleaved_packets(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                                                index_t packets, index_t pixels,
                                                                const Weights<acc_t<scalar_t>> w, uint32_t exponent) {
  constexpr index_t kSize = Packet<scalar_t, kBytes>::kSize;
  const index_t q = static_cast<index_t>(blockIdx.x) * kThreads + static_cast<index_t>(threadIdx.x);
  if (q < packets) {
    Packet<scalar_t, kBytes> chunk[3];
#pragma unroll
    for (int c = 0; c < 3; ++c) chunk[c] = load_packet<scalar_t, kBytes>(in + (3 * q + c) * kSize);
    store_packet(out + q * kSize, interleaved_gray<kSaturate>(chunk, w, exponent));
  }
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == kThreads - 1) {
    for (index_t i = packets * kSize; i < pixels; ++i) out[i] = gray(in[3 * i], in[3 * i + 1], in[3 * i + 2], w);
  }
}

// Where a pixel's first channel lives, for the per-pixel path.
struct PlanarOffset {
  int64_t inner;
  __device__ int64_t operator()(int64_t p) const { return (p / inner) * 3 * inner + p % inner; }
};
struct InterleavedOffset {
  __device__ int64_t operator()(int64_t p) const { return 3 * p; }
};
struct StridedOffset {
  StridedGeometry geo;
  __device__ int64_t operator()(int64_t p) const { return strided_offset(geo, p); }
};

template <typename scalar_t, typename Offset>
__global__ void per_pixel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, int64_t pixels,
                          int64_t channel_stride, Offset offset, Weights<acc_t<scalar_t>> w) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pixels;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const scalar_t* px = in + offset(p);
    out[p] = gray(px[0], px[channel_stride], px[2 * channel_stride], w);
  }
}

// ---- host side: launch shapes -------------------------------------------------------------------------

inline bool is_aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Multiprocessors of `device`, cached: the attribute query would otherwise run on every call. Sized as torch's
// C10_COMPILE_TIME_MAX_GPUS (a c10/cuda macro the stable-ABI build cannot include); writes are idempotent, so
// racing first calls are harmless.
constexpr int kCachedDevices = 120;
inline int multiprocessors(int device) {
  static int cache[kCachedDevices] = {};
  if (device < 0 || device >= kCachedDevices) {
    int count = 0;
    return cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess && count > 0 ? count : 1;
  }
  if (cache[device] == 0) {
    int count = 0;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0) return 1;
    cache[device] = count;
  }
  return cache[device];
}

inline int64_t blocks_for(int64_t items) { return (items + kThreads - 1) / kThreads; }
constexpr int64_t kMaxBlocks = std::numeric_limits<int32_t>::max();  // of a grid's x dimension
constexpr int64_t kMaxGridRows = 65535;                                // of its y dimension

// Dense layouts in packets of kBytes; false when alignment, shape or grid limits rule them out.
template <typename scalar_t, int kBytes, typename index_t, bool kSaturate>
bool launch_packets(const scalar_t* in, scalar_t* out, const Plan& plan, const Weights<acc_t<scalar_t>>& w,
                    cudaStream_t stream) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  if (!is_aligned(in, kBytes) || !is_aligned(out, kBytes)) return false;
  if (plan.layout == Layout::Planar && plan.inner % kSize == 0) {
    const int64_t per_plane = plan.inner / kSize;
    if (blocks_for(per_plane) > kMaxBlocks) return false;
    const uint64_t plane_bytes = plan.inner * sizeof(scalar_t);
    const auto blocks = static_cast<unsigned int>(blocks_for(per_plane));
    if (plan.outer == 1) {
      planar_packets<scalar_t, kBytes, index_t, kSaturate, true><<<blocks, kThreads, 0, stream>>>(
          in, out, static_cast<index_t>(per_plane), plane_bytes, w, kFloatExponent23);
      return true;
    }
    for (int64_t first = 0; first < plan.outer; first += kMaxGridRows) {
      const dim3 grid(blocks, static_cast<unsigned int>(std::min(plan.outer - first, kMaxGridRows)));
      planar_packets<scalar_t, kBytes, index_t, kSaturate, false><<<grid, kThreads, 0, stream>>>(
          in + first * 3 * plan.inner, out + first * plan.inner, static_cast<index_t>(per_plane), plane_bytes, w,
          kFloatExponent23);
    }
    return true;
  }
  if (plan.layout == Layout::Interleaved) {
    const int64_t packets = plan.pixels / kSize;
    if (blocks_for(packets) > kMaxBlocks) return false;
    interleaved_packets<scalar_t, kBytes, index_t, kSaturate><<<static_cast<unsigned int>(std::max<int64_t>(1, blocks_for(packets))), kThreads, 0, stream>>>(
        in, out, static_cast<index_t>(packets), static_cast<index_t>(plan.pixels), w, kFloatExponent23);
    return true;
  }
  return false;
}

inline unsigned int per_pixel_blocks(int64_t pixels) {
  return static_cast<unsigned int>(std::min(blocks_for(pixels), kMaxBlocks));  // the kernel loops past the grid
}

template <typename scalar_t>
void launch_per_pixel(const scalar_t* in, scalar_t* out, const Plan& plan, const Weights<acc_t<scalar_t>>& w,
                      cudaStream_t stream) {
  const unsigned int blocks = per_pixel_blocks(plan.pixels);
  if (plan.layout == Layout::Planar) {
    per_pixel<<<blocks, kThreads, 0, stream>>>(in, out, plan.pixels, plan.inner, PlanarOffset{plan.inner}, w);
  } else if (plan.layout == Layout::Interleaved) {
    per_pixel<<<blocks, kThreads, 0, stream>>>(in, out, plan.pixels, int64_t{1}, InterleavedOffset{}, w);
  } else {
    per_pixel<<<blocks, kThreads, 0, stream>>>(in, out, plan.pixels, plan.strided.channel_stride,
                                               StridedOffset{plan.strided}, w);
  }
}

// The product's choice of shape, measured on the H200 (benchmarks/experiments/README.md, frame_shapes.cu):
// 8-byte packets for uint8 interleaved input (8 pixels per thread: with 16, its per-pixel arithmetic left
// single frames and small batches 2-5% short of a copy; with 8 they reach the memory floor) and for 16/32-bit
// planar input (1-3% faster on single frames, the same on large batches); 16-byte packets for the rest (uint8
// planar lost 3-8% with 8). Tiny 8/16-bit inputs take 4-byte packets, to fill the GPU with threads. Unsigned
// 32-bit indices wherever the input allows them (with the loop-free planar grid: 16/32-bit frames 0.5-2% faster
// than signed indices and a plane loop, ../benchmarks/experiments/README.md).
template <typename scalar_t, bool kSaturate>
bool launch_dense(const scalar_t* in, scalar_t* out, const Plan& plan, const Weights<acc_t<scalar_t>>& w, int device,
                  cudaStream_t stream) {
  constexpr int kMaxSize = 16 / sizeof(scalar_t);
  if (plan.pixels * 3 > std::numeric_limits<int32_t>::max()) {
    return launch_packets<scalar_t, 16, int64_t, kSaturate>(in, out, plan, w, stream);
  }
  if constexpr (sizeof(scalar_t) < 4) {
    if (plan.pixels / kMaxSize < int64_t{kThreads} * multiprocessors(device)) {
      return launch_packets<scalar_t, 4, uint32_t, kSaturate>(in, out, plan, w, stream);
    }
  }
  if constexpr (std::is_same_v<scalar_t, uint8_t>) {
    if (plan.layout == Layout::Interleaved) return launch_packets<scalar_t, 8, uint32_t, kSaturate>(in, out, plan, w, stream);
  } else if constexpr (sizeof(scalar_t) <= 4) {
    if (plan.layout == Layout::Planar) return launch_packets<scalar_t, 8, uint32_t, kSaturate>(in, out, plan, w, stream);
  }
  return launch_packets<scalar_t, 16, uint32_t, kSaturate>(in, out, plan, w, stream);
}

template <typename scalar_t>
void launch(const scalar_t* in, scalar_t* out, const Plan& plan, const Weights<acc_t<scalar_t>>& w, int device,
            cudaStream_t stream) {
  bool launched = false;
  if (plan.layout != Layout::Strided) {
    if constexpr (std::is_same_v<scalar_t, uint8_t>) {
      launched = saturation_is_identity(w) ? launch_dense<scalar_t, false>(in, out, plan, w, device, stream)
                                           : launch_dense<scalar_t, true>(in, out, plan, w, device, stream);
    } else {
      launched = launch_dense<scalar_t, true>(in, out, plan, w, device, stream);
    }
  }
  if (!launched) launch_per_pixel(in, out, plan, w, stream);
}

}  // namespace kernels
}  // namespace img2gray
