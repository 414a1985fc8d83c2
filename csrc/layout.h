// How an input tensor is laid out in memory, decided once on the host and shared by both devices. Header-only
// torch (sizes and strides in, a Plan out): the CUDA translation unit that includes it compiles without ATen's
// headers, and the stable-ABI build (torch_binding_stable.cpp) uses it as the exact build does.
#pragma once

#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <cstdint>
#include <string>

namespace img2gray {

// The output is always written densely, pixel after pixel, in the input's logical order with the
// channel dimension removed. What differs is how the three channels of a pixel are found.
enum class Layout {
  Planar,       // contiguous (..., 3, inner): three planes per outer index, e.g. NCHW.
  Interleaved,  // channel dim innermost in memory, pixels dense: HWC images, channels_last NCHW.
  Strided,      // anything else: slices, expanded tensors, permutations.
};

constexpr int kMaxStridedDims = 8;

struct StridedGeometry {
  // Non-channel dims after merging, innermost last; `sizes[d]`/`strides[d]` in elements.
  int64_t sizes[kMaxStridedDims];
  int64_t strides[kMaxStridedDims];
  int64_t channel_stride;
  int ndim;
};

struct Plan {
  Layout layout;
  int64_t pixels;  // number of output elements
  int64_t outer;   // Planar: product of dims before the channel dim
  int64_t inner;   // Planar: product of dims after the channel dim
  StridedGeometry strided;
};

// True when the channel dim is innermost in memory and the pixels are dense in logical order, i.e.
// `input.movedim(dim, -1).is_contiguous()`, computed without creating a view (this runs per call).
inline bool is_interleaved(torch::headeronly::IntHeaderOnlyArrayRef sizes, torch::headeronly::IntHeaderOnlyArrayRef strides, int64_t dim) {
  if (strides[dim] != 1) return false;
  int64_t expected = 3;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (d == dim) continue;
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// The plan of an input of `sizes` and `strides` (elements) with 3 channels at `dim`; `contiguous` is the
// tensor's own is_contiguous().
inline Plan make_plan(torch::headeronly::IntHeaderOnlyArrayRef sizes, torch::headeronly::IntHeaderOnlyArrayRef strides, int64_t dim, bool contiguous) {
  Plan plan{};
  plan.pixels = 1;
  for (const int64_t size : sizes) plan.pixels *= size;
  plan.pixels /= 3;
  plan.outer = 1;
  for (int64_t d = 0; d < dim; ++d) plan.outer *= sizes[d];
  plan.inner = plan.pixels / (plan.outer == 0 ? 1 : plan.outer);

  // Checked first: a contiguous (..., H, W, 3) tensor is also "planar" with planes of one element.
  if (is_interleaved(sizes, strides, dim)) {
    plan.layout = Layout::Interleaved;
    return plan;
  }
  if (contiguous) {
    plan.layout = Layout::Planar;
    return plan;
  }

  // Merge neighbouring non-channel dims that are dense relative to each other (fewer divisions per
  // pixel), and drop size-1 dims.
  plan.layout = Layout::Strided;
  StridedGeometry& geo = plan.strided;
  geo.channel_stride = strides[dim];
  geo.ndim = 0;
  int64_t merged_sizes[64];
  int64_t merged_strides[64];
  int merged = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d == dim || sizes[d] == 1) continue;
    if (merged > 0 && merged_strides[merged - 1] == strides[d] * sizes[d]) {
      merged_sizes[merged - 1] *= sizes[d];
      merged_strides[merged - 1] = strides[d];
    } else {
      merged_sizes[merged] = sizes[d];
      merged_strides[merged] = strides[d];
      ++merged;
    }
  }
  STD_TORCH_CHECK(merged <= kMaxStridedDims, "img2gray: input strides are too irregular (", std::to_string(merged),
              " non-mergeable dimensions, at most ", std::to_string(kMaxStridedDims),
              " supported); call .contiguous() on the input first");
  for (int i = 0; i < merged; ++i) {
    geo.sizes[i] = merged_sizes[i];
    geo.strides[i] = merged_strides[i];
  }
  geo.ndim = merged;
  return plan;
}

// The bytes [begin, end) that a tensor's elements lie within (sizes and strides in elements; torch strides are
// never negative). Empty for a tensor without elements.
struct Extent {
  uintptr_t begin;
  uintptr_t end;
};

inline Extent memory_extent(const void* data, torch::headeronly::IntHeaderOnlyArrayRef sizes, torch::headeronly::IntHeaderOnlyArrayRef strides, int64_t element_size) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return {begin, begin};
    last += (sizes[d] - 1) * strides[d];
  }
  return {begin, begin + static_cast<uintptr_t>((last + 1) * element_size)};
}

// True when the kernels may not write `out` while reading `input`: their extents intersect. For dense tensors
// that is exactly "some element is shared"; for a strided one it may also refuse an `out` that only lies in the
// input's gaps, the price of never reading a value the same call has already overwritten.
inline bool extents_intersect(Extent a, Extent b) { return a.begin < b.end && b.begin < a.end; }

// Offset in elements of the first channel of output pixel `index` (Strided layout).
template <typename index_t>
#if defined(__CUDACC__)
__host__ __device__ __forceinline__
#else
inline
#endif
    int64_t
    strided_offset(const StridedGeometry& geo, index_t index) {
  int64_t offset = 0;
#pragma unroll
  for (int i = kMaxStridedDims - 1; i >= 0; --i) {
    if (i >= geo.ndim) continue;
    const index_t size = static_cast<index_t>(geo.sizes[i]);
    offset += static_cast<int64_t>(index % size) * geo.strides[i];
    index /= size;
  }
  return offset;
}

}  // namespace img2gray
