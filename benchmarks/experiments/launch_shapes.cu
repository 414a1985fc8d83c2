// Experiment (not part of the product): which launch shape of the product's own kernels
// (csrc/img2gray_kernels.cuh) gets closest to a device copy on single frames, small batches and large
// batches. Build (torch's include dirs for c10's Half/BFloat16 headers):
//   nvcc -O3 --fmad=false -std=c++20 -arch=sm_90 -Icsrc $(torch include flags) \
//        benchmarks/experiments/launch_shapes.cu -o launch_shapes
// Prints, per case, the median time of each shape over input sets rotated across more than 512 MB, and
// its % of a cudaMemcpyAsync moving the same bytes (half read, half written), timed the same way.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "img2gray_kernels.cuh"

using namespace img2gray;
using namespace img2gray::kernels;

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e = (x);                                                                  \
    if (e != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

__global__ void fill_random(uint32_t* p, size_t words, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < words; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = x & 0x3F3F3F3Fu;  // keeps float/half bit patterns finite and small
  }
}

float median_ms(const std::function<void(int)>& fn, int sets, int repeats = 100, int warmup = 10) {
  for (int i = 0; i < warmup; ++i) fn(i % sets);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  cudaEvent_t start, end;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&end));
  for (int i = 0; i < repeats; ++i) {
    CHECK(cudaEventRecord(start));
    fn(i % sets);
    CHECK(cudaEventRecord(end));
    CHECK(cudaEventSynchronize(end));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, end));
    times.push_back(ms);
  }
  CHECK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Case {
  std::string name;
  int64_t outer, inner;  // planar: outer x 3 x inner; interleaved: pixels = outer * inner
  bool interleaved;
};

template <typename scalar_t>
void run_case(const Case& c) {
  Plan plan{};
  plan.layout = c.interleaved ? Layout::Interleaved : Layout::Planar;
  plan.pixels = c.outer * c.inner;
  plan.outer = c.outer;
  plan.inner = c.inner;
  const size_t in_bytes = 3 * plan.pixels * sizeof(scalar_t), out_bytes = plan.pixels * sizeof(scalar_t);
  const size_t moved = in_bytes + out_bytes;
  const int sets = static_cast<int>(std::max<size_t>(2, (size_t{512} << 20) / moved + 1));
  std::vector<scalar_t*> ins(sets), outs(sets);
  std::vector<uint8_t*> copy_src(sets), copy_dst(sets);
  for (int s = 0; s < sets; ++s) {
    CHECK(cudaMalloc(&ins[s], in_bytes));
    CHECK(cudaMalloc(&outs[s], out_bytes));
    CHECK(cudaMalloc(&copy_src[s], moved / 2));
    CHECK(cudaMalloc(&copy_dst[s], moved / 2));
    fill_random<<<1024, 256>>>(reinterpret_cast<uint32_t*>(ins[s]), in_bytes / 4, 17 + s);
  }
  CHECK(cudaDeviceSynchronize());
  const Weights<acc_t<scalar_t>> w{0.299f, 0.587f, 0.114f};
  const float copy = median_ms([&](int s) { CHECK(cudaMemcpyAsync(copy_dst[s], copy_src[s], moved / 2, cudaMemcpyDeviceToDevice)); }, sets);
  std::printf("%-34s %7.1f MB  copy %8.2f us\n", c.name.c_str(), moved / 1e6, copy * 1e3);
  auto report = [&](const char* shape, const std::function<bool(int)>& fn) {
    if (!fn(0)) return;
    const float t = median_ms([&](int s) { fn(s); }, sets);
    std::printf("    %-30s %8.2f us  %6.1f%% copy\n", shape, t * 1e3, 100.0 * copy / t);
  };
  const cudaStream_t stream = 0;
  report("product policy", [&](int s) { launch<scalar_t>(ins[s], outs[s], plan, w, 0, stream); return true; });
  report("16B x1, uncapped", [&](int s) { return launch_packets<scalar_t, 16, 1, int32_t>(ins[s], outs[s], plan, w, 0, 0, stream); });
  report("16B x4, uncapped", [&](int s) { return launch_packets<scalar_t, 16, 4, int32_t>(ins[s], outs[s], plan, w, 0, 0, stream); });
  report("16B x1, 1 wave", [&](int s) { return launch_packets<scalar_t, 16, 1, int32_t>(ins[s], outs[s], plan, w, 1, 0, stream); });
  report("16B x1, 2 waves", [&](int s) { return launch_packets<scalar_t, 16, 1, int32_t>(ins[s], outs[s], plan, w, 2, 0, stream); });
  report("16B x2, 1 wave", [&](int s) { return launch_packets<scalar_t, 16, 2, int32_t>(ins[s], outs[s], plan, w, 1, 0, stream); });
  report("16B x4, 1 wave", [&](int s) { return launch_packets<scalar_t, 16, 4, int32_t>(ins[s], outs[s], plan, w, 1, 0, stream); });
  if constexpr (sizeof(scalar_t) < 4) {
    report("4B x1, uncapped", [&](int s) { return launch_packets<scalar_t, 4, 1, int32_t>(ins[s], outs[s], plan, w, 0, 0, stream); });
    report("4B x1, 1 wave", [&](int s) { return launch_packets<scalar_t, 4, 1, int32_t>(ins[s], outs[s], plan, w, 1, 0, stream); });
  }
  CHECK(cudaGetLastError());
  for (int s = 0; s < sets; ++s) {
    CHECK(cudaFree(ins[s]));
    CHECK(cudaFree(outs[s]));
    CHECK(cudaFree(copy_src[s]));
    CHECK(cudaFree(copy_dst[s]));
  }
}

int main() {
  const int64_t p720 = 720 * 1280, p1080 = 1080 * 1920, p4k = 2160 * 3840;
  std::printf("resident blocks/SM: u8 16B x1 planar %d, x4 %d; SMs %d\n",
              resident_blocks_per_sm<dense_packets<PlanarPackets<uint8_t, 16, int32_t>, 1, float>>(0),
              resident_blocks_per_sm<dense_packets<PlanarPackets<uint8_t, 16, int32_t>, 4, float>>(0), multiprocessors(0));
  for (const Case& c : {Case{"uint8 HWC 720p", 1, p720, true}, Case{"uint8 HWC 1080p", 1, p1080, true},
                        Case{"uint8 HWC 4K", 1, p4k, true}, Case{"uint8 HWC 8x1080p", 8, p1080, true},
                        Case{"uint8 HWC 64x1080p", 64, p1080, true}, Case{"uint8 NCHW 1080p", 1, p1080, false},
                        Case{"uint8 NCHW 4K", 1, p4k, false}, Case{"uint8 NCHW 8x1080p", 8, p1080, false},
                        Case{"uint8 NCHW 64x1080p", 64, p1080, false}}) {
    run_case<uint8_t>(c);
  }
  for (const Case& c : {Case{"float16 NCHW 720p", 1, p720, false}, Case{"float16 NCHW 1080p", 1, p1080, false},
                        Case{"float16 NCHW 4K", 1, p4k, false}, Case{"float16 NCHW 8x720p", 8, p720, false},
                        Case{"float16 NCHW 64x1080p", 64, p1080, false}, Case{"float16 HWC 8x720p", 8, p720, true}}) {
    run_case<c10::Half>(c);
  }
  for (const Case& c : {Case{"float32 NCHW 720p", 1, p720, false}, Case{"float32 NCHW 1080p", 1, p1080, false},
                        Case{"float32 NCHW 4K", 1, p4k, false}, Case{"float32 NCHW 8x720p", 8, p720, false},
                        Case{"float32 NCHW 64x1080p", 64, p1080, false}, Case{"float32 HWC 4K", 1, p4k, true}}) {
    run_case<float>(c);
  }
  return 0;
}
