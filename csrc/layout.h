// How an input tensor is laid out in memory, decided once on the host and shared by both devices.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

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
inline bool is_interleaved(const at::Tensor& input, int64_t dim) {
  if (input.stride(dim) != 1) return false;
  int64_t expected = 3;
  for (int64_t d = input.dim() - 1; d >= 0; --d) {
    if (d == dim) continue;
    if (input.size(d) != 1 && input.stride(d) != expected) return false;
    expected *= input.size(d);
  }
  return true;
}

inline Plan make_plan(const at::Tensor& input, int64_t dim) {
  Plan plan{};
  plan.pixels = input.numel() / 3;
  plan.outer = 1;
  for (int64_t d = 0; d < dim; ++d) plan.outer *= input.size(d);
  plan.inner = plan.pixels / (plan.outer == 0 ? 1 : plan.outer);

  // Checked first: a contiguous (..., H, W, 3) tensor is also "planar" with planes of one element.
  if (is_interleaved(input, dim)) {
    plan.layout = Layout::Interleaved;
    return plan;
  }
  if (input.is_contiguous()) {
    plan.layout = Layout::Planar;
    return plan;
  }

  // Merge neighbouring non-channel dims that are dense relative to each other (fewer divisions per
  // pixel), and drop size-1 dims.
  plan.layout = Layout::Strided;
  StridedGeometry& geo = plan.strided;
  geo.channel_stride = input.stride(dim);
  geo.ndim = 0;
  int64_t merged_sizes[64];
  int64_t merged_strides[64];
  int merged = 0;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d == dim || input.size(d) == 1) continue;
    if (merged > 0 && merged_strides[merged - 1] == input.stride(d) * input.size(d)) {
      merged_sizes[merged - 1] *= input.size(d);
      merged_strides[merged - 1] = input.stride(d);
    } else {
      merged_sizes[merged] = input.size(d);
      merged_strides[merged] = input.stride(d);
      ++merged;
    }
  }
  TORCH_CHECK(merged <= kMaxStridedDims, "img2gray: input strides are too irregular (", std::to_string(merged),
              " non-mergeable dimensions, at most ", std::to_string(kMaxStridedDims),
              " supported); call .contiguous() on the input first");
  for (int i = 0; i < merged; ++i) {
    geo.sizes[i] = merged_sizes[i];
    geo.strides[i] = merged_strides[i];
  }
  geo.ndim = merged;
  return plan;
}

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
