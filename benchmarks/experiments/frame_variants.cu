// Experiment (not part of the product): planar float kernels that differ from the product in one respect
// each, built as a shared library so that frame_variants.py can time them in one process with the product
// op and torch.compile's own Triton kernel (the peer the last 1% is lost to). What differs:
//   - threads per block and bytes per channel per thread (Triton: 128 x 16 B for float16, 128 x 2 x 16 B
//     for float32 with the two packets 128 packets apart, 256 x 4 B for the float16 720p frame);
//   - FMA contraction (Triton's arithmetic; it breaks the product's bitwise agreement with eager PyTorch);
//   - the plane size as a compile-time constant (Triton specializes on it) and per-channel base pointers;
//   - how the loads use the caches (the read-only path, no L1 allocation, evict-first, last use, plain ld.global).
// Build (sm_90; torch's c10 headers for Half/BFloat16; a CPU-only torch lacks one generated header, so a shim
// directory with c10/cuda/impl/cuda_cmake_macros.h may be put first):
//   nvcc -O3 --fmad=false -std=c++20 -arch=sm_90 -shared -Xcompiler -fPIC -Icsrc $(torch include flags) \
//        benchmarks/experiments/frame_variants.cu -o build/exp/frame_variants.so
#include <cuda_runtime.h>

#include <cstdint>

#include "cache_loads.cuh"
#include "img2gray_kernels.cuh"

namespace img2gray::kernels {
namespace {

enum class Channels { kOffsets, kPointers };

template <bool kFma>
__device__ __forceinline__ float luma_of(float r, float g, float b, const Weights<float>& w) {
  if constexpr (kFma) return __fmaf_rn(w.b, b, __fmaf_rn(w.g, g, __fmul_rn(w.r, r)));
  return luma(r, g, b, w);
}

// The gray packet of three planar float packets (16/32-bit types), with or without FMA contraction.
template <bool kFma, typename scalar_t, int kBytes>
__device__ __forceinline__ Packet<scalar_t, kBytes> gray_of(const Packet<scalar_t, kBytes> (&channel)[3], const Weights<float>& w) {
  constexpr int kSize = Packet<scalar_t, kBytes>::kSize;
  float v[kSize];
#pragma unroll
  for (int k = 0; k < kSize; ++k) {
    v[k] = luma_of<kFma>(to_acc(channel[0].values[k]), to_acc(channel[1].values[k]), to_acc(channel[2].values[k]), w);
  }
  return stored<scalar_t, kBytes>(v);
}

// kRep packets of kBytes per channel per thread, kBlock packets apart (each load instruction of a warp covers
// one contiguous run, as Triton lays them out); kInner 0 takes the plane size from the argument.
template <int kBlock, int kBytes, int kRep, bool kFma, uint32_t kInner, Channels kChannels, typename scalar_t>
__global__ void __launch_bounds__(kBlock) planar_variant(const scalar_t* __restrict__ in, const scalar_t* __restrict__ in_g,
                                                         const scalar_t* __restrict__ in_b, scalar_t* __restrict__ out,
                                                         uint32_t packets_per_plane, uint32_t inner_arg,
                                                         const Weights<float> w) {
  constexpr uint32_t kSize = kBytes / sizeof(scalar_t);
  const uint32_t inner = kInner != 0 ? kInner : inner_arg;
  const uint32_t first = blockIdx.x * (kBlock * kRep) + threadIdx.x;
  const uint32_t plane_in = blockIdx.y * 3u * inner, plane_out = blockIdx.y * inner;
  Packet<scalar_t, kBytes> channel[kRep][3];
#pragma unroll
  for (int u = 0; u < kRep; ++u) {
    const uint32_t q = first + u * kBlock;
    if (q < packets_per_plane) {
      if constexpr (kChannels == Channels::kPointers) {
        channel[u][0] = load_packet<scalar_t, kBytes>(in + plane_in + q * kSize);
        channel[u][1] = load_packet<scalar_t, kBytes>(in_g + plane_in + q * kSize);
        channel[u][2] = load_packet<scalar_t, kBytes>(in_b + plane_in + q * kSize);
      } else {
#pragma unroll
        for (int c = 0; c < 3; ++c) channel[u][c] = load_packet<scalar_t, kBytes>(in + plane_in + c * inner + q * kSize);
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kRep; ++u) {
    const uint32_t q = first + u * kBlock;
    if (q < packets_per_plane) store_packet(out + plane_out + q * kSize, gray_of<kFma>(channel[u], w));
  }
}

// The product's shape with a shorter road to the first load: byte offsets, the channel planes a 64-bit add
// apart, no plane term at all for a single plane (kOnePlane), and one of three ways to treat the threads
// past the plane's end: none exist (kExact: the grid covers the plane exactly), they exit before loading
// (kExit, the product's way), or they load the plane's last packet again and skip the store (kClamp: no
// branch before the loads).
enum class Guard { kExact, kExit, kClamp };

// kPackets: the plane's packets as a compile-time constant (0: the argument), as Triton specializes on the
// frame size: the channel offsets become immediates of the load instructions.
template <int kBlock, int kBytes, Guard kGuard, bool kOnePlane, bool kSaturate, bool kFma, Load kLoad, uint32_t kPackets,
          typename scalar_t>
__global__ void __launch_bounds__(kBlock) planar_bytes(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                                       uint32_t packets_arg, uint64_t channel_bytes_arg,
                                                       const Weights<float> w, uint32_t exponent) {
  const uint32_t packets_per_plane = kPackets != 0 ? kPackets : packets_arg;
  const uint64_t channel_bytes = kPackets != 0 ? uint64_t{kPackets} * kBytes : channel_bytes_arg;
  const uint32_t q = blockIdx.x * kBlock + threadIdx.x;
  if (kGuard == Guard::kExit && q >= packets_per_plane) return;
  const uint32_t p = kGuard == Guard::kClamp ? min(q, packets_per_plane - 1) : q;
  const uint32_t plane = kOnePlane ? 0u : blockIdx.y;
  const char* r = reinterpret_cast<const char*>(in) + plane * (3 * channel_bytes) + p * uint64_t{kBytes};
  Packet<scalar_t, kBytes> channel[3];
#pragma unroll
  for (int c = 0; c < 3; ++c) channel[c] = load_with<kLoad, scalar_t, kBytes>(reinterpret_cast<const scalar_t*>(r + c * channel_bytes));
  if (kGuard == Guard::kClamp && q >= packets_per_plane) return;
  char* o = reinterpret_cast<char*>(out) + plane * channel_bytes + p * uint64_t{kBytes};
  if constexpr (kFma && !std::is_same_v<scalar_t, uint8_t>) {
    store_packet(reinterpret_cast<scalar_t*>(o), gray_of<true>(channel, w));
  } else {
    store_packet(reinterpret_cast<scalar_t*>(o), planar_gray<kSaturate>(channel, w, exponent));
  }
}

using Launcher = bool (*)(int dtype, const void* in, void* out, int64_t planes, int64_t inner, cudaStream_t stream);

constexpr Weights<float> kBt601{0.299f, 0.587f, 0.114f};

// A single plane with one base pointer per channel (computed on the host): each load address is one multiply-add
// from the packet index, as the constant offsets of a specialized kernel make it, for any frame size.
template <int kBlock, int kBytes, typename scalar_t>
__global__ void __launch_bounds__(kBlock) planar_pointers(const scalar_t* __restrict__ in_r, const scalar_t* __restrict__ in_g,
                                                          const scalar_t* __restrict__ in_b, scalar_t* __restrict__ out,
                                                          uint32_t packets_per_plane, const Weights<float> w, uint32_t exponent) {
  const uint32_t q = blockIdx.x * kBlock + threadIdx.x;
  const uint32_t p = min(q, packets_per_plane - 1);
  constexpr uint32_t kSize = kBytes / sizeof(scalar_t);
  const Packet<scalar_t, kBytes> channel[3] = {load_packet<scalar_t, kBytes>(in_r + p * kSize),
                                               load_packet<scalar_t, kBytes>(in_g + p * kSize),
                                               load_packet<scalar_t, kBytes>(in_b + p * kSize)};
  if (q >= packets_per_plane) return;
  store_packet(out + p * kSize, planar_gray<!std::is_same_v<scalar_t, uint8_t>>(channel, w, exponent));
}

template <typename scalar_t>
struct OnePlanePointers {
  static constexpr bool kTakesBytes = true;
  static bool run(const void* in_raw, void* out, int64_t planes, int64_t inner, cudaStream_t s) {
    constexpr int kBytes = sizeof(scalar_t) == 1 ? 16 : 8;
    constexpr int64_t kSize = kBytes / sizeof(scalar_t);
    if (planes != 1 || inner % kSize != 0 || 3 * inner > INT32_MAX) return false;
    const auto* in = static_cast<const scalar_t*>(in_raw);
    const int64_t packets = inner / kSize;
    planar_pointers<256, kBytes><<<static_cast<unsigned>((packets + 255) / 256), 256, 0, s>>>(
        in, in + inner, in + 2 * inner, static_cast<scalar_t*>(out), static_cast<uint32_t>(packets), kBt601, kFloatExponent23);
    return true;
  }
};

template <typename scalar_t>
bool product(const void* in, void* out, int64_t planes, int64_t inner, cudaStream_t stream) {
  Plan plan{};
  plan.layout = Layout::Planar;
  plan.outer = planes;
  plan.inner = inner;
  plan.pixels = planes * inner;
  launch<scalar_t>(static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out), plan, kBt601, 0, stream);
  return true;
}

template <int kBlock, int kBytes, int kRep, bool kFma, uint32_t kInner, Channels kChannels, typename scalar_t>
bool variant(const void* in_raw, void* out_raw, int64_t planes, int64_t inner, cudaStream_t stream) {
  constexpr int64_t kSize = kBytes / sizeof(scalar_t);
  if ((kInner != 0 && inner != kInner) || inner % kSize != 0 || planes > 65535 || 3 * planes * inner > INT32_MAX) return false;
  const auto* in = static_cast<const scalar_t*>(in_raw);
  const int64_t packets = inner / kSize, per_block = int64_t{kBlock} * kRep;
  const dim3 grid(static_cast<unsigned>((packets + per_block - 1) / per_block), static_cast<unsigned>(planes));
  planar_variant<kBlock, kBytes, kRep, kFma, kInner, kChannels, scalar_t><<<grid, kBlock, 0, stream>>>(
      in, in + inner, in + 2 * inner, static_cast<scalar_t*>(out_raw), static_cast<uint32_t>(packets),
      static_cast<uint32_t>(inner), kBt601);
  return true;
}

// kGuard kExact takes kExit where the grid does not cover the plane exactly. kInner (pixels per plane, 0: any)
// specializes on a frame size; other sizes do not apply.
template <int kBlock, int kBytes, Guard kGuard, bool kOnePlane, bool kFma, Load kLoad, uint32_t kInner, typename scalar_t>
bool bytes_variant(const void* in, void* out, int64_t planes, int64_t inner, cudaStream_t stream) {
  constexpr int64_t kSize = kBytes / sizeof(scalar_t);
  constexpr uint32_t kPackets = kInner / kSize;
  constexpr bool kSaturate = !std::is_same_v<scalar_t, uint8_t>;  // BT.601 cannot saturate (saturation_is_identity)
  if (inner % kSize != 0 || planes > 65535 || 3 * planes * inner > INT32_MAX || (kOnePlane && planes != 1)) return false;
  if (kInner != 0 && inner != kInner) return false;
  const int64_t packets = inner / kSize;
  const dim3 grid(static_cast<unsigned>((packets + kBlock - 1) / kBlock), static_cast<unsigned>(planes));
  const uint64_t channel_bytes = inner * sizeof(scalar_t);
  const auto* x = static_cast<const scalar_t*>(in);
  auto* y = static_cast<scalar_t*>(out);
  if (kGuard == Guard::kExact && packets % kBlock == 0) {
    planar_bytes<kBlock, kBytes, Guard::kExact, kOnePlane, kSaturate, kFma, kLoad, kPackets><<<grid, kBlock, 0, stream>>>(
        x, y, static_cast<uint32_t>(packets), channel_bytes, kBt601, kFloatExponent23);
  } else {
    constexpr Guard kFallback = kGuard == Guard::kExact ? Guard::kExit : kGuard;
    planar_bytes<kBlock, kBytes, kFallback, kOnePlane, kSaturate, kFma, kLoad, kPackets><<<grid, kBlock, 0, stream>>>(
        x, y, static_cast<uint32_t>(packets), channel_bytes, kBt601, kFloatExponent23);
  }
  return true;
}

// dtype: 0 float16, 1 bfloat16, 2 float32, 3 uint8 (the product and the bytes family only).
template <template <typename> class F>
bool by_dtype(int dtype, const void* in, void* out, int64_t planes, int64_t inner, cudaStream_t stream) {
  switch (dtype) {
    case 0: return F<c10::Half>::run(in, out, planes, inner, stream);
    case 1: return F<c10::BFloat16>::run(in, out, planes, inner, stream);
    case 2: return F<float>::run(in, out, planes, inner, stream);
    case 3:
      if constexpr (F<uint8_t>::kTakesBytes) return F<uint8_t>::run(in, out, planes, inner, stream);
      return false;
    default: return false;
  }
}

template <typename scalar_t>
struct Product {
  static constexpr bool kTakesBytes = true;
  static bool run(const void* in, void* out, int64_t planes, int64_t inner, cudaStream_t s) {
    return product<scalar_t>(in, out, planes, inner, s);
  }
};

template <int kBlock, int kBytes, int kRep, bool kFma = false, uint32_t kInner = 0, Channels kChannels = Channels::kOffsets>
struct V {
  template <typename scalar_t>
  struct T {
    static constexpr bool kTakesBytes = false;
    static bool run(const void* in, void* out, int64_t planes, int64_t inner, cudaStream_t s) {
      return variant<kBlock, kBytes, kRep, kFma, kInner, kChannels, scalar_t>(in, out, planes, inner, s);
    }
  };
};

// kBytes 0: the product's packet size (16 bytes for uint8, 8 for 16/32-bit types).
template <Guard kGuard, bool kOnePlane, int kBlock = 256, int kBytes = 0, bool kFma = false, Load kLoad = Load::kLdg,
          uint32_t kInner = 0>
struct B {
  template <typename scalar_t>
  struct T {
    static constexpr bool kTakesBytes = true;
    static bool run(const void* in, void* out, int64_t planes, int64_t inner, cudaStream_t s) {
      constexpr int kPacket = kBytes != 0 ? kBytes : sizeof(scalar_t) == 1 ? 16 : 8;
      if constexpr ((kLoad == Load::kNoL1 || kLoad == Load::kGlobal) && kPacket != 8) {  // timed in 8-byte packets only
        return false;
      } else {
        return bytes_variant<kBlock, kPacket, kGuard, kOnePlane, kFma, kLoad, kInner, scalar_t>(in, out, planes, inner, s);
      }
    }
  };
};

constexpr uint32_t k720p = 720 * 1280, k1080p = 1080 * 1920;

struct Entry {
  const char* name;
  Launcher launch;
};

const Entry kVariants[] = {
    {"product", by_dtype<Product>},
    {"256x8B", by_dtype<V<256, 8, 1>::T>},
    {"256x8B fma", by_dtype<V<256, 8, 1, true>::T>},
    {"256x8B const 720p", by_dtype<V<256, 8, 1, false, k720p>::T>},
    {"256x8B const 1080p", by_dtype<V<256, 8, 1, false, k1080p>::T>},
    {"256x8B pointers", by_dtype<V<256, 8, 1, false, 0, Channels::kPointers>::T>},
    {"256x4B", by_dtype<V<256, 4, 1>::T>},
    {"256x4B fma", by_dtype<V<256, 4, 1, true>::T>},
    {"128x16B", by_dtype<V<128, 16, 1>::T>},
    {"128x16B fma", by_dtype<V<128, 16, 1, true>::T>},
    {"128x2x16B", by_dtype<V<128, 16, 2>::T>},
    {"128x2x16B fma", by_dtype<V<128, 16, 2, true>::T>},
    {"128x2x8B", by_dtype<V<128, 8, 2>::T>},
    {"256x2x8B", by_dtype<V<256, 8, 2>::T>},
    {"bytes exit", by_dtype<B<Guard::kExit, false>::T>},
    {"bytes clamp", by_dtype<B<Guard::kClamp, false>::T>},
    {"bytes exact", by_dtype<B<Guard::kExact, false>::T>},
    {"bytes exit one plane", by_dtype<B<Guard::kExit, true>::T>},
    {"bytes clamp one plane", by_dtype<B<Guard::kClamp, true>::T>},
    {"bytes exact one plane", by_dtype<B<Guard::kExact, true>::T>},
    {"bytes clamp one plane 4B", by_dtype<B<Guard::kClamp, true, 256, 4>::T>},
    {"bytes clamp one plane 16B", by_dtype<B<Guard::kClamp, true, 256, 16>::T>},
    {"bytes clamp one plane 128 thr", by_dtype<B<Guard::kClamp, true, 128>::T>},
    {"bytes clamp one plane 512 thr", by_dtype<B<Guard::kClamp, true, 512>::T>},
    {"bytes clamp one plane fma", by_dtype<B<Guard::kClamp, true, 256, 0, true>::T>},
    {"bytes clamp one plane noL1", by_dtype<B<Guard::kClamp, true, 256, 0, false, Load::kNoL1>::T>},
    {"bytes clamp one plane streaming", by_dtype<B<Guard::kClamp, true, 256, 0, false, Load::kStreaming>::T>},
    {"bytes clamp one plane last use", by_dtype<B<Guard::kClamp, true, 256, 0, false, Load::kLastUse>::T>},
    {"bytes clamp one plane plain loads", by_dtype<B<Guard::kClamp, true, 256, 0, false, Load::kGlobal>::T>},
    {"clamp one plane pointers", by_dtype<OnePlanePointers>},
    {"bytes exact one plane const 720p", by_dtype<B<Guard::kExact, true, 256, 0, false, Load::kLdg, k720p>::T>},
    {"bytes exact one plane const 1080p", by_dtype<B<Guard::kExact, true, 256, 0, false, Load::kLdg, k1080p>::T>},
    {"bytes exact const 720p", by_dtype<B<Guard::kExact, false, 256, 0, false, Load::kLdg, k720p>::T>},
    {"bytes clamp one plane 512 thr 4B", by_dtype<B<Guard::kClamp, true, 512, 4>::T>},
    {"bytes clamp one plane 512 thr fma", by_dtype<B<Guard::kClamp, true, 512, 0, true>::T>},
};

}  // namespace
}  // namespace img2gray::kernels

extern "C" {
int fv_count() { return sizeof(img2gray::kernels::kVariants) / sizeof(img2gray::kernels::kVariants[0]); }
const char* fv_name(int i) { return img2gray::kernels::kVariants[i].name; }
// 1: launched; 0: the variant does not apply to this input; -1: a CUDA error.
int fv_launch(int i, int dtype, const void* in, void* out, long long planes, long long inner, void* stream) {
  if (!img2gray::kernels::kVariants[i].launch(dtype, in, out, planes, inner, static_cast<cudaStream_t>(stream))) return 0;
  return cudaPeekAtLastError() == cudaSuccess ? 1 : -1;
}
}
