// How an experiment's kernel loads a packet of 8 or 16 bytes, for comparing cache behaviour against the product's
// load (load_packet: __ldg, the read-only path that allocates in L1). Shared by frame_shapes.cu and frame_variants.cu.
#pragma once

#include "img2gray_kernels.cuh"

namespace img2gray::kernels {

// kLdg: the product's load; kCg: __ldcg (ld.global.cg, cached in L2 only); kNoL1: ld.global.nc.L1::no_allocate
// (read-only path, no L1 line); kStreaming: __ldcs (evict-first in L1 and L2, so that inputs read once do not push
// an output out of L2); kLastUse: __ldlu; kGlobal: plain ld.global (what Triton emits for torch.compile's kernels).
enum class Load { kLdg, kCg, kNoL1, kStreaming, kLastUse, kGlobal };

inline const char* load_name(Load load) {
  switch (load) {
    case Load::kLdg: return "ldg";
    case Load::kCg: return "cg";
    case Load::kNoL1: return "noL1";
    case Load::kStreaming: return "streaming";
    case Load::kLastUse: return "last use";
    default: return "ld.global";
  }
}

template <Load kLoad, typename scalar_t, int kBytes = 16>
__device__ __forceinline__ Packet<scalar_t, kBytes> load_with(const scalar_t* p) {
  static_assert(kLoad == Load::kLdg || kBytes == 8 || kBytes == 16, "cache-hinted loads: 8- or 16-byte packets");
  using Raw = typename RawPacket<kBytes>::type;
  Packet<scalar_t, kBytes> packet;
  auto& v = packet.words;
  if constexpr (kLoad == Load::kLdg) {
    return load_packet<scalar_t, kBytes>(p);
  } else if constexpr (kLoad == Load::kCg) {
    packet.raw = __ldcg(reinterpret_cast<const Raw*>(p));
  } else if constexpr (kLoad == Load::kStreaming) {
    packet.raw = __ldcs(reinterpret_cast<const Raw*>(p));
  } else if constexpr (kLoad == Load::kLastUse) {
    packet.raw = __ldlu(reinterpret_cast<const Raw*>(p));
  } else if constexpr (kLoad == Load::kNoL1 && kBytes == 16) {
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(p));
  } else if constexpr (kLoad == Load::kNoL1) {
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v[0]), "=r"(v[1]) : "l"(p));
  } else if constexpr (kBytes == 16) {
    asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(p));
  } else {
    asm("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(v[0]), "=r"(v[1]) : "l"(p));
  }
  return packet;
}

}  // namespace img2gray::kernels
