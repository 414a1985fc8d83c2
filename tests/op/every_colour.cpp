// All 2^24 colours through every hand-written uint8 path of csrc/img2gray_cpu_simd.h that this CPU runs,
// interleaved and planar, against gray<uint8_t> of csrc/img2gray.h (the scalar reference). Without torch: built by
// tests/op/test_uint8_cpu_paths.py with a cross compiler and run under an emulator for the paths of another
// architecture (NEON under qemu-aarch64). `every_colour [N]` checks the first N weights only (an emulator is slow).
// The scalar path is the reference itself and is not checked. Prints one line per path; exits 1 on the first
// difference.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "img2gray.h"
#include "img2gray_cpu_simd.h"

using namespace img2gray;

namespace {

// As tests/op/test_uint8_cpu_paths.py's WEIGHTS: the decimal default, binary fractions (every colour with r + b
// odd is an exact tie), both saturations (and refused by the fixed-point path), BT.709, one above 255, and others.
constexpr Weights<float> kWeights[] = {
    {0.299f, 0.587f, 0.114f}, {0.25f, 0.5f, 0.25f},   {0.5f, -0.25f, 1.5f},
    {0.2126f, 0.7152f, 0.0722f}, {0.5f, 0.5f, 0.0021f}, {0.1234567f, 0.654321f, 0.2222222f},
};
constexpr int kWeightCount = sizeof(kWeights) / sizeof(kWeights[0]);

bool check(const char* isa, const char* layout, const Weights<float>& w, const std::vector<uint8_t>& got,
           const std::vector<uint8_t>& expected) {
  for (uint32_t c = 0; c < (1u << 24); ++c) {
    if (got[c] != expected[c]) {
      std::printf("%s %s weights (%g, %g, %g): colour %#08x gives %d, not %d\n", isa, layout, w.r, w.g, w.b, c,
                  got[c], expected[c]);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int weight_count = argc > 1 ? std::atoi(argv[1]) : kWeightCount;
  constexpr int64_t n = int64_t{1} << 24;
  std::vector<uint8_t> rgb(3 * n + 64), planes(3 * n), out(n), expected(n);
  for (int64_t c = 0; c < n; ++c) {
    for (int k = 0; k < 3; ++k) {
      rgb[3 * c + k] = static_cast<uint8_t>(c >> (16 - 8 * k));
      planes[k * n + c] = rgb[3 * c + k];
    }
  }
  for (int k = 0; k < weight_count && k < kWeightCount; ++k) {
    const Weights<float>& w = kWeights[k];
    for (int64_t c = 0; c < n; ++c) expected[c] = gray<uint8_t>(rgb[3 * c], rgb[3 * c + 1], rgb[3 * c + 2], w);
    for (int isa = 1; isa <= simd::detected_isa(); ++isa) {
      const simd::U8Call call{simd::kIsas[isa], w, simd::fixed_point(w), false};
      int64_t done = simd::interleaved_u8(rgb.data(), out.data(), n, call);
      for (int64_t c = done; c < n; ++c) out[c] = expected[c];  // the tail the caller's loop would do
      if (!check(simd::kIsaNames[isa], "interleaved", w, out, expected)) return 1;
      done = simd::planar_u8(planes.data(), planes.data() + n, planes.data() + 2 * n, out.data(), n, call);
      for (int64_t c = done; c < n; ++c) out[c] = expected[c];
      if (!check(simd::kIsaNames[isa], "planar", w, out, expected)) return 1;
    }
  }
  for (int isa = 1; isa <= simd::detected_isa(); ++isa) {
    std::printf("%s: all 2^24 colours match for %d weights, interleaved and planar\n", simd::kIsaNames[isa],
                weight_count < kWeightCount ? weight_count : kWeightCount);
  }
  return 0;
}
