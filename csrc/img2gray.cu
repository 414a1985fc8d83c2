// CUDA kernels. Dense layouts move 16-byte packets, four per thread on large inputs (4-byte packets on small
// 8/16-bit ones, to fill the GPU); everything else takes a per-pixel strided path. All launches go to the
// current stream of the input's device.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAMacros.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "img2gray.h"
#include "layout.h"

namespace img2gray {
namespace {

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

// Each thread converts kUnroll packets, block-strided so every warp access stays coalesced, and issues
// all their loads before the first use: more bytes in flight per thread.
template <typename index_t, int kUnroll>
__device__ __forceinline__ index_t packet_index(int u) {
  return (static_cast<index_t>(blockIdx.x) * kUnroll + u) * static_cast<index_t>(blockDim.x) + threadIdx.x;
}

// Planar (..., 3, inner) with `inner` a multiple of the packet size: one packet of pixels reads one packet
// from each of the three planes.
template <typename scalar_t, int kBytes, int kUnroll, typename index_t>
__global__ void planar_packets(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, index_t packets,
                               index_t packets_per_plane, index_t inner, Weights<acc_t<scalar_t>> w) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  Packet<scalar_t, kBytes> channel[kUnroll][3];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const index_t p = packet_index<index_t, kUnroll>(u);
    if (p >= packets) break;
    const index_t plane = p / packets_per_plane;
    const scalar_t* r = in + plane * 3 * inner + (p - plane * packets_per_plane) * kSize;
#pragma unroll
    for (int c = 0; c < 3; ++c) channel[u][c] = load_packet<scalar_t, kBytes>(r + c * inner);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const index_t p = packet_index<index_t, kUnroll>(u);
    if (p >= packets) break;
    const index_t plane = p / packets_per_plane;
    Packet<scalar_t, kBytes> result;
#pragma unroll
    for (int k = 0; k < kSize; ++k) {
      result.values[k] = gray(channel[u][0].values[k], channel[u][1].values[k], channel[u][2].values[k], w);
    }
    store_packet(out + plane * inner + (p - plane * packets_per_plane) * kSize, result);
  }
}

// Interleaved (..., 3) dense pixels: a packet of kSize pixels reads three packets and writes one. The last,
// partial packet is done pixel by pixel.
template <typename scalar_t, int kBytes, int kUnroll, typename index_t>
__global__ void interleaved_packets(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, index_t pixels,
                                    Weights<acc_t<scalar_t>> w) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  const index_t whole_packets = pixels / kSize;
  Packet<scalar_t, kBytes> chunk[kUnroll][3];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const index_t p = packet_index<index_t, kUnroll>(u);
    if (p >= whole_packets) break;
#pragma unroll
    for (int c = 0; c < 3; ++c) chunk[u][c] = load_packet<scalar_t, kBytes>(in + 3 * p * kSize + c * kSize);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const index_t p = packet_index<index_t, kUnroll>(u);
    if (p < whole_packets) {
      Packet<scalar_t, kBytes> result;
#pragma unroll
      for (int k = 0; k < kSize; ++k) {
        // Channel j of pixel k is value 3k+j of the 3*kSize loaded values; indices are compile-time.
        const scalar_t r = chunk[u][(3 * k) / kSize].values[(3 * k) % kSize];
        const scalar_t g = chunk[u][(3 * k + 1) / kSize].values[(3 * k + 1) % kSize];
        const scalar_t b = chunk[u][(3 * k + 2) / kSize].values[(3 * k + 2) % kSize];
        result.values[k] = gray(r, g, b, w);
      }
      store_packet(out + p * kSize, result);
    } else if (p == whole_packets) {
      for (index_t i = p * kSize; i < pixels; ++i) out[i] = gray(in[3 * i], in[3 * i + 1], in[3 * i + 2], w);
    }
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

bool is_aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Threads that fill every multiprocessor once: below this, smaller packets buy parallelism (a 4K
// uint8 frame in 16-byte packets would leave most of an H200 idle).
int64_t full_wave_threads(int device) {
  // Indexed by device: sized as torch sizes its per-device tables (writes are idempotent, so racing
  // first calls from two threads are harmless).
  static int multiprocessors[C10_COMPILE_TIME_MAX_GPUS] = {};
  if (multiprocessors[device] == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors[device], cudaDevAttrMultiProcessorCount, device));
  }
  return int64_t{multiprocessors[device]} * 2048;
}

unsigned int blocks_for(int64_t work_items, int per_thread) {
  const int64_t per_block = int64_t{kThreads} * per_thread;
  return static_cast<unsigned int>(
      std::min<int64_t>((work_items + per_block - 1) / per_block, std::numeric_limits<int32_t>::max()));
}

// Dense layouts in packets of kBytes, kUnroll per thread; returns false when alignment or shape rule it out.
template <typename scalar_t, int kBytes, int kUnroll, typename index_t>
bool launch_packets(const scalar_t* in, scalar_t* out, const Plan& plan, Weights<acc_t<scalar_t>> w,
                    cudaStream_t stream) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  if (!is_aligned(in, kBytes) || !is_aligned(out, kBytes)) return false;
  if (plan.layout == Layout::Planar && plan.inner % kSize == 0) {
    const int64_t per_plane = plan.inner / kSize;
    planar_packets<scalar_t, kBytes, kUnroll, index_t>
        <<<blocks_for(plan.outer * per_plane, kUnroll), kThreads, 0, stream>>>(
            in, out, static_cast<index_t>(plan.outer * per_plane), static_cast<index_t>(per_plane),
            static_cast<index_t>(plan.inner), w);
    return true;
  }
  if (plan.layout == Layout::Interleaved) {
    // One more packet index than whole packets: it takes the partial tail.
    interleaved_packets<scalar_t, kBytes, kUnroll, index_t>
        <<<blocks_for(plan.pixels / kSize + 1, kUnroll), kThreads, 0, stream>>>(
            in, out, static_cast<index_t>(plan.pixels), w);
    return true;
  }
  return false;
}

template <typename scalar_t>
void launch(const scalar_t* in, scalar_t* out, const Plan& plan, Weights<acc_t<scalar_t>> w, int device,
            cudaStream_t stream) {
  constexpr int kMaxSize = 16 / sizeof(scalar_t);
  constexpr int kUnroll = 4;
  bool launched = false;
  if (plan.layout != Layout::Strided) {
    const int64_t packets = plan.pixels / kMaxSize;
    const int64_t wave = full_wave_threads(device);
    if (plan.pixels * 3 > std::numeric_limits<int32_t>::max()) {
      launched = launch_packets<scalar_t, 16, kUnroll, int64_t>(in, out, plan, w, stream);
    } else if (packets >= kUnroll * wave) {
      launched = launch_packets<scalar_t, 16, kUnroll, int32_t>(in, out, plan, w, stream);
    } else if (packets >= wave || sizeof(scalar_t) >= 4) {
      launched = launch_packets<scalar_t, 16, 1, int32_t>(in, out, plan, w, stream);
    } else if constexpr (sizeof(scalar_t) < 4) {
      // Small 8/16-bit problems: 4-byte packets, four times the threads of 16-byte ones.
      launched = launch_packets<scalar_t, 4, 1, int32_t>(in, out, plan, w, stream);
    }
  }
  if (!launched) {
    if (plan.layout == Layout::Planar) {
      per_pixel<<<blocks_for(plan.pixels, 1), kThreads, 0, stream>>>(in, out, plan.pixels, plan.inner,
                                                                      PlanarOffset{plan.inner}, w);
    } else if (plan.layout == Layout::Interleaved) {
      per_pixel<<<blocks_for(plan.pixels, 1), kThreads, 0, stream>>>(in, out, plan.pixels, int64_t{1},
                                                                      InterleavedOffset{}, w);
    } else {
      per_pixel<<<blocks_for(plan.pixels, 1), kThreads, 0, stream>>>(in, out, plan.pixels,
                                                                      plan.strided.channel_stride,
                                                                      StridedOffset{plan.strided}, w);
    }
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void img2gray_cuda(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out) {
  const c10::cuda::CUDAGuard guard(input.device());
  const Plan plan = make_plan(input, dim);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(input.device().index());
  AT_DISPATCH_FLOATING_TYPES_AND3(at::kByte, at::kHalf, at::kBFloat16, input.scalar_type(), "img2gray_cuda", [&] {
    using acc = acc_t<scalar_t>;
    const Weights<acc> w{static_cast<acc>(weights[0]), static_cast<acc>(weights[1]), static_cast<acc>(weights[2])};
    launch<scalar_t>(input.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), plan, w,
                     input.device().index(), stream);
  });
}

}  // namespace img2gray
