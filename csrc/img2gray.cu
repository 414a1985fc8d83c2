// CUDA kernels. Dense layouts move 16 bytes per load and store; everything else takes a per-pixel
// strided path. All launches go to the current stream of the input's device.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

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

// Inputs and outputs are touched exactly once: stream them past the caches.
template <typename scalar_t, int kBytes>
__device__ __forceinline__ Packet<scalar_t, kBytes> load_streaming(const scalar_t* p) {
  Packet<scalar_t, kBytes> packet;
  packet.raw = __ldcs(reinterpret_cast<const typename RawPacket<kBytes>::type*>(p));
  return packet;
}

template <typename scalar_t, int kBytes>
__device__ __forceinline__ void store_streaming(scalar_t* p, const Packet<scalar_t, kBytes>& packet) {
  __stcs(reinterpret_cast<typename RawPacket<kBytes>::type*>(p), packet.raw);
}

// Planar (..., 3, inner) with `inner` a multiple of the packet size: each thread converts one packet of
// pixels, reading one packet from each of the three planes.
template <typename scalar_t, int kBytes, typename index_t>
__global__ void planar_packets(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, index_t packets,
                               index_t packets_per_plane, index_t inner, Weights<acc_t<scalar_t>> w) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  for (index_t p = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; p < packets;
       p += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const index_t plane = p / packets_per_plane;
    const index_t offset = (p - plane * packets_per_plane) * kSize;
    const scalar_t* r = in + plane * 3 * inner + offset;
    const auto pr = load_streaming<scalar_t, kBytes>(r);
    const auto pg = load_streaming<scalar_t, kBytes>(r + inner);
    const auto pb = load_streaming<scalar_t, kBytes>(r + 2 * inner);
    Packet<scalar_t, kBytes> result;
#pragma unroll
    for (int k = 0; k < kSize; ++k) result.values[k] = gray(pr.values[k], pg.values[k], pb.values[k], w);
    store_streaming(out + plane * inner + offset, result);
  }
}

// Interleaved (..., 3) dense pixels: each thread reads three packets (kSize whole pixels) and writes one.
// The last, partial packet is done pixel by pixel.
template <typename scalar_t, int kBytes, typename index_t>
__global__ void interleaved_packets(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, index_t pixels,
                                    Weights<acc_t<scalar_t>> w) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  const index_t packets = (pixels + kSize - 1) / kSize;
  for (index_t p = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; p < packets;
       p += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const index_t first = p * kSize;
    const scalar_t* rgb = in + 3 * first;
    if (first + kSize <= pixels) {
      Packet<scalar_t, kBytes> chunk[3];
#pragma unroll
      for (int c = 0; c < 3; ++c) chunk[c] = load_streaming<scalar_t, kBytes>(rgb + c * kSize);
      Packet<scalar_t, kBytes> result;
#pragma unroll
      for (int k = 0; k < kSize; ++k) {
        // Channel j of pixel k is value 3k+j of the 3*kSize loaded values; indices are compile-time.
        const scalar_t r = chunk[(3 * k) / kSize].values[(3 * k) % kSize];
        const scalar_t g = chunk[(3 * k + 1) / kSize].values[(3 * k + 1) % kSize];
        const scalar_t b = chunk[(3 * k + 2) / kSize].values[(3 * k + 2) % kSize];
        result.values[k] = gray(r, g, b, w);
      }
      store_streaming(out + first, result);
    } else {
      for (index_t i = first; i < pixels; ++i) out[i] = gray(rgb[3 * (i - first)], rgb[3 * (i - first) + 1],
                                                            rgb[3 * (i - first) + 2], w);
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

unsigned int blocks_for(int64_t work_items) {
  const int64_t blocks = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max()));
}

bool is_aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Threads that fill every multiprocessor once: below this, smaller packets buy parallelism (a 4K
// uint8 frame in 16-byte packets would leave most of an H200 idle).
int64_t full_wave_threads(int device) {
  static int multiprocessors[64] = {};
  if (multiprocessors[device] == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors[device], cudaDevAttrMultiProcessorCount, device));
  }
  return int64_t{multiprocessors[device]} * 2048;
}

// Dense layouts in packets of kBytes; returns false when alignment or shape rule it out.
template <typename scalar_t, int kBytes, typename index_t>
bool launch_packets(const scalar_t* in, scalar_t* out, const Plan& plan, Weights<acc_t<scalar_t>> w,
                    cudaStream_t stream) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  if (!is_aligned(in, kBytes) || !is_aligned(out, kBytes)) return false;
  if (plan.layout == Layout::Planar && plan.inner % kSize == 0) {
    const int64_t per_plane = plan.inner / kSize;
    planar_packets<scalar_t, kBytes, index_t><<<blocks_for(plan.outer * per_plane), kThreads, 0, stream>>>(
        in, out, static_cast<index_t>(plan.outer * per_plane), static_cast<index_t>(per_plane),
        static_cast<index_t>(plan.inner), w);
    return true;
  }
  if (plan.layout == Layout::Interleaved) {
    interleaved_packets<scalar_t, kBytes, index_t><<<blocks_for((plan.pixels + kSize - 1) / kSize), kThreads, 0,
                                                      stream>>>(in, out, static_cast<index_t>(plan.pixels), w);
    return true;
  }
  return false;
}

template <typename scalar_t>
void launch(const scalar_t* in, scalar_t* out, const Plan& plan, Weights<acc_t<scalar_t>> w, int device,
            cudaStream_t stream) {
  constexpr int kMaxSize = 16 / sizeof(scalar_t);
  bool launched = false;
  if (plan.layout != Layout::Strided) {
    if (plan.pixels * 3 > std::numeric_limits<int32_t>::max()) {
      launched = launch_packets<scalar_t, 16, int64_t>(in, out, plan, w, stream);
    } else if constexpr (sizeof(scalar_t) < 4) {
      // Small 8/16-bit problems: 4-byte packets, four times the threads of 16-byte ones.
      launched = plan.pixels / kMaxSize >= full_wave_threads(device)
                     ? launch_packets<scalar_t, 16, int32_t>(in, out, plan, w, stream)
                     : launch_packets<scalar_t, 4, int32_t>(in, out, plan, w, stream);
    } else {
      launched = launch_packets<scalar_t, 16, int32_t>(in, out, plan, w, stream);
    }
  }
  if (!launched) {
    if (plan.layout == Layout::Planar) {
      per_pixel<<<blocks_for(plan.pixels), kThreads, 0, stream>>>(in, out, plan.pixels, plan.inner,
                                                                   PlanarOffset{plan.inner}, w);
    } else if (plan.layout == Layout::Interleaved) {
      per_pixel<<<blocks_for(plan.pixels), kThreads, 0, stream>>>(in, out, plan.pixels, int64_t{1},
                                                                   InterleavedOffset{}, w);
    } else {
      per_pixel<<<blocks_for(plan.pixels), kThreads, 0, stream>>>(in, out, plan.pixels,
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
