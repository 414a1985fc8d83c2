// The product's uint8 spans (csrc/img2gray_cpu_simd.h) on a 4K frame whose buffers are backed by 4 KiB pages or by
// transparent huge pages, against a memcpy of the same bytes on the same kind of pages, one thread:
//   g++ -std=c++17 -O3 -ffp-contract=off -I csrc -I benchmarks/experiments -isystem $(python -c 'import torch,os;print(os.path.dirname(torch.__file__))')/include \
//       benchmarks/experiments/cpu_pages.cpp -o /tmp/cpu_pages && /tmp/cpu_pages [PIXELS] [ROUNDS]
// Candidates take turns; per round each one's best of 6 calls; printed: the median over rounds and the median of the
// per-round ratios against the memcpy on 4 KiB pages (the ratio cancels the drift of a shared machine). "hwc" is the
// product's interleaved span (two streams since issue 54's fifth session), "v ..." the variants of
// cpu_pages_variants.h, "+16": the second stream starting 16 blocks later (no effect).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "img2gray.h"
#include "img2gray_cpu_simd.h"
#include "cpu_pages_variants.h"

using namespace img2gray;

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `bytes` of anonymous memory, faulted in, on huge pages or explicitly not (the kernel's THP mode here is madvise,
// as on most distributions: numpy asks for huge pages on its large arrays, torch's allocator does not).
static uint8_t* pages(size_t bytes, bool huge) {
  const size_t align = 2u << 20;
  auto* raw = static_cast<uint8_t*>(mmap(nullptr, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + align - 1) & ~(align - 1));
  madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(rand());
  return p;
}

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 3840 * 2160;
  const int rounds = argc > 2 ? atoi(argv[2]) : 21;
  const int64_t moved = 4 * n;
  Weights<float> w{0.299f, 0.587f, 0.114f};
  const simd::U8Call vnni{simd::CpuIsa::Avx512Vnni, w, simd::fixed_point(w), false};
  struct Buffers { uint8_t *rgb, *out, *src, *dst; };
  Buffers small{pages(3 * n + 64, false), pages(n + 64, false), pages(moved / 2, false), pages(moved / 2, false)};
  Buffers huge{pages(3 * n + 64, true), pages(n + 64, true), pages(moved / 2, true), pages(moved / 2, true)};
  std::vector<std::pair<std::string, std::function<void()>>> c = {
      {"memcpy 4k", [&] { memcpy(small.dst, small.src, moved / 2); }},
      {"hwc 4k", [&] { simd::interleaved_u8(small.rgb, small.out, n, vnni); }},
      {"hwc huge", [&] { simd::interleaved_u8(huge.rgb, huge.out, n, vnni); }},
      {"hwc in-huge out-4k", [&] { simd::interleaved_u8(huge.rgb, small.out, n, vnni); }},
      // The loop before the two streams (one stream, 8 KiB ahead), and what was tried on it first.
      {"v one stream", [&] { variants::interleaved<8192, 0, 0>(small.rgb, small.out, n, vnni); }},
      {"v one stream huge", [&] { variants::interleaved<8192, 0, 0>(huge.rgb, huge.out, n, vnni); }},
      {"v one stream 16k", [&] { variants::interleaved<16384, 0, 0>(small.rgb, small.out, n, vnni); }},
      {"v one stream T1", [&] { variants::interleaved<8192, 0, 0, _MM_HINT_T1>(small.rgb, small.out, n, vnni); }},
      {"v touch 12k", [&] { variants::interleaved<8192, 12288, 0>(small.rgb, small.out, n, vnni); }},
      {"v touch 12k out 4k", [&] { variants::interleaved<8192, 12288, 4096>(small.rgb, small.out, n, vnni); }},
      {"v kick 16k", [&] { variants::interleaved<8192, 0, 0, _MM_HINT_T0, 16384>(small.rgb, small.out, n, vnni); }},
      {"v none", [&] { variants::interleaved<0, 0, 0>(small.rgb, small.out, n, vnni); }},
      {"v none huge", [&] { variants::interleaved<0, 0, 0>(huge.rgb, huge.out, n, vnni); }},
      // More streams, and the two streams' prefetch distance.
      {"v 2 streams", [&] { variants::interleaved_streams<2>(small.rgb, small.out, n, vnni); }},
      {"v 3 streams", [&] { variants::interleaved_streams<3>(small.rgb, small.out, n, vnni); }},
      {"v 4 streams", [&] { variants::interleaved_streams<4>(small.rgb, small.out, n, vnni); }},
      {"v 2 streams 2k", [&] { variants::interleaved_streams<2, 2048>(small.rgb, small.out, n, vnni); }},
      {"v 2 streams 4k", [&] { variants::interleaved_streams<2, 4096>(small.rgb, small.out, n, vnni); }},
      {"v 2 streams +16", [&] { variants::interleaved_streams<2, 8192, 16>(small.rgb, small.out, n, vnni); }},
      {"planar 4k", [&] { simd::planar_u8(small.rgb, small.rgb + n, small.rgb + 2 * n, small.out, n, vnni); }},
      {"planar huge", [&] { simd::planar_u8(huge.rgb, huge.rgb + n, huge.rgb + 2 * n, huge.out, n, vnni); }},
  };
  char line[256];
  FILE* smaps = fopen("/proc/self/smaps_rollup", "r");
  while (smaps && fgets(line, sizeof line, smaps)) if (strncmp(line, "AnonHugePages", 13) == 0) printf("%s", line);
  std::vector<std::vector<double>> best(c.size());
  for (int r = 0; r <= rounds; ++r) {
    for (size_t k = 0; k < c.size(); ++k) {
      const size_t j = (k + r) % c.size();
      double b = 1e9;
      for (int call = 0; call < 6; ++call) {
        const double t0 = now_ms();
        c[j].second();
        b = std::min(b, now_ms() - t0);
      }
      if (r) best[j].push_back(b);
    }
  }
  // Every variant writes what the product writes.
  std::vector<uint8_t> expected(small.out, small.out + n);
  simd::interleaved_u8(small.rgb, expected.data(), n, vnni);
  for (auto& [name, fn] : c) {
    if (name.rfind("v ", 0) != 0 || name.find("huge") != std::string::npos) continue;
    memset(small.out, 7, n);
    fn();
    if (memcmp(small.out, expected.data(), (n - 6) / 64 * 64) != 0) printf("MISMATCH %s\n", name.c_str());
  }
  auto median = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  for (size_t j = 0; j < c.size(); ++j) {
    std::vector<double> ratio;
    for (int r = 0; r < rounds; ++r) ratio.push_back(best[0][r] / best[j][r]);
    printf("%-22s %8.3f ms  %6.1f%% of memcpy 4k (median of per-round ratios)\n", c[j].first.c_str(), median(best[j]),
           100 * median(ratio));
  }
}
