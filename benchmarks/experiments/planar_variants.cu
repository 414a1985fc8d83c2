// Experiment (not part of the product): which planar kernel shape gets closest to a device copy on the
// H200 for float32 and uint8 NCHW 64x3x1080x1920. Build: nvcc -O3 --fmad=false -arch=sm_90 -std=c++17
// planar_variants.cu -o planar_variants. Prints the median time of each variant over rotating buffers.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.h"

template <typename T>
union Packet {
  static constexpr int kSize = 16 / sizeof(T);
  uint4 raw;
  T v[kSize];
};

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(uint8_t x) { return __fsub_rn(__uint_as_float(0x4B000000u | x), 8388608.0f); }
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ uint8_t from_f<uint8_t>(float v) {
  v = fminf(fmaxf(v, 0.f), 255.f);
  return static_cast<uint8_t>(__float_as_uint(__fadd_rn(v, 8388608.0f)) & 0xFF);
}
template <typename T>
__device__ __forceinline__ T gray(T r, T g, T b) {
  return from_f<T>(__fadd_rn(__fadd_rn(__fmul_rn(0.299f, to_f(r)), __fmul_rn(0.587f, to_f(g))), __fmul_rn(0.114f, to_f(b))));
}

// kUnroll consecutive packets per thread; kStreaming: __ldcs/__stcs vs plain.
template <typename T, int kUnroll, bool kStreaming>
__global__ void planar(const T* __restrict__ in, T* __restrict__ out, int packets, int per_plane, int inner) {
  constexpr int K = Packet<T>::kSize;
  const int base = (blockIdx.x * blockDim.x) * kUnroll + threadIdx.x;
  Packet<T> r[kUnroll], g[kUnroll], b[kUnroll];
  int plane[kUnroll], off[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int p = base + u * blockDim.x;
    if (p >= packets) continue;
    plane[u] = p / per_plane;
    off[u] = (p - plane[u] * per_plane) * K;
    const T* src = in + plane[u] * 3 * inner + off[u];
    if (kStreaming) {
      r[u].raw = __ldcs(reinterpret_cast<const uint4*>(src));
      g[u].raw = __ldcs(reinterpret_cast<const uint4*>(src + inner));
      b[u].raw = __ldcs(reinterpret_cast<const uint4*>(src + 2 * inner));
    } else {
      r[u].raw = __ldg(reinterpret_cast<const uint4*>(src));
      g[u].raw = __ldg(reinterpret_cast<const uint4*>(src + inner));
      b[u].raw = __ldg(reinterpret_cast<const uint4*>(src + 2 * inner));
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int p = base + u * blockDim.x;
    if (p >= packets) continue;
    Packet<T> o;
#pragma unroll
    for (int k = 0; k < K; ++k) o.v[k] = gray(r[u].v[k], g[u].v[k], b[u].v[k]);
    uint4* dst = reinterpret_cast<uint4*>(out + plane[u] * inner + off[u]);
    if (kStreaming) __stcs(dst, o.raw); else *dst = o.raw;
  }
}

template <typename T>
void run(const char* name, int threads_per_block) {
  const int batch = 64, inner = 1080 * 1920;
  const size_t in_elems = size_t(batch) * 3 * inner, out_elems = size_t(batch) * inner;
  const int sets = 6;
  std::vector<T*> ins(sets), outs(sets), cs(sets), cd(sets);
  const size_t moved = (in_elems + out_elems) * sizeof(T);
  for (int s = 0; s < sets; ++s) {
    CHECK(cudaMalloc(&ins[s], in_elems * sizeof(T)));
    CHECK(cudaMalloc(&outs[s], out_elems * sizeof(T)));
    CHECK(cudaMemset(ins[s], 7, in_elems * sizeof(T)));
    CHECK(cudaMalloc(&cs[s], moved / 2));
    CHECK(cudaMalloc(&cd[s], moved / 2));
  }
  constexpr int K = Packet<T>::kSize;
  const int per_plane = inner / K, packets = batch * per_plane;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  auto median = [&](auto launch) {
    std::vector<float> t;
    for (int i = 0; i < 60; ++i) {
      CHECK(cudaEventRecord(a));
      launch(i % sets);
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      if (i >= 10) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const float copy = median([&](int s) { CHECK(cudaMemcpyAsync(cd[s], cs[s], moved / 2, cudaMemcpyDeviceToDevice)); });
  std::printf("%s: copy of the same bytes %.4f ms\n", name, copy);
#define VARIANT(U, S)                                                                                       \
  {                                                                                                         \
    const int blocks = (packets + threads_per_block * U - 1) / (threads_per_block * U);                     \
    const float ms = median([&](int s) {                                                                    \
      planar<T, U, S><<<blocks, threads_per_block>>>(ins[s], outs[s], packets, per_plane, inner);          \
    });                                                                                                     \
    CHECK(cudaGetLastError());                                                                              \
    std::printf("  unroll %d streaming %d block %d: %.4f ms (%.1f%% copy)\n", U, S, threads_per_block, ms, \
                100 * copy / ms);                                                                           \
  }
  VARIANT(1, true) VARIANT(1, false) VARIANT(2, true) VARIANT(2, false) VARIANT(4, true) VARIANT(4, false)
  for (int s = 0; s < sets; ++s) {
    cudaFree(ins[s]); cudaFree(outs[s]); cudaFree(cs[s]); cudaFree(cd[s]);
  }
}

int main() {
  for (int tpb : {128, 256, 512}) {
    run<float>("float32 NCHW 64x3x1080x1920", tpb);
    run<uint8_t>("uint8 NCHW 64x3x1080x1920", tpb);
  }
  return 0;
}
