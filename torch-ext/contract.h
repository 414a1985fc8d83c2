// The operator's contract, written once for both builds: its schema and the checks of its arguments, with their
// messages. Header-only torch: the exact binding (torch_binding.cpp) and the stable-ABI binding
// (torch_binding_stable.cpp) each view their tensors as a TensorView and name a failure policy, a type with
//   [[noreturn]] static void error(const std::string& message);        // RuntimeError in Python
//   [[noreturn]] static void index_error(const std::string& message);  // IndexError where the ABI can raise one
// tests/test_op_contract.py compares the two builds' schemas and messages.
//
// Numbers are turned into text with std::to_string, never streamed into a std::ostream: on the H200 image
// (torch 2.11, gcc 13.3) std::ostream::_M_insert<long> crashed inside the extension.
#pragma once

#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "layout.h"

// The op's arguments, the one place they are written: the exact binding defines its schemas from these macros,
// and tools/builder/op.py writes IMG2GRAY_ARGUMENTS into the stable build's _ops.py (the stable ABI defines
// schemas from Python).
#define IMG2GRAY_ARGUMENTS "Tensor input, int dim=-3, float[] weights=[0.299, 0.587, 0.114]"
#define IMG2GRAY_SCHEMA "img2gray(" IMG2GRAY_ARGUMENTS ") -> Tensor"
// Returns nothing: custom ops may mutate `out` but not return an alias of it (functionalization).
#define IMG2GRAY_OUT_SCHEMA "img2gray.out(" IMG2GRAY_ARGUMENTS ", *, Tensor(a!) out) -> ()"
// img2gray(input) with the default weights, dim=-3 and dim=-1: what the Python entry point (functional.py) calls
// for (..., 3, H, W) and (..., H, W, 3) images. torch converts each argument a call from Python gives and looks
// up each one it leaves out: 0.1-0.35 us of a small CPU call (benchmarks/experiments/small_calls_ab.py); these
// overloads have none. Their arguments are named apart: torch's TorchScript registry tells overloads apart by name,
// argument types and argument names only (canonicalSchemaString), and two that it cannot tell apart made the
// interpreter's exit abort (torch 2.13, tests/op test_a_process_that_used_the_op_exits_cleanly).
#define IMG2GRAY_CHW_SCHEMA "img2gray.chw(Tensor input_chw) -> Tensor"
#define IMG2GRAY_HWC_SCHEMA "img2gray.hwc(Tensor input_hwc) -> Tensor"

namespace img2gray {

// The defaults of IMG2GRAY_ARGUMENTS, for the overloads that leave them out (tests/op
// test_calls_without_weights_use_the_schemas_default).
constexpr double kDefaultWeights[3] = {0.299, 0.587, 0.114};
// The channel dims of IMG2GRAY_CHW_SCHEMA and IMG2GRAY_HWC_SCHEMA.
constexpr int64_t kChwDim = -3;
constexpr int64_t kHwcDim = -1;

using IntArray = torch::headeronly::IntHeaderOnlyArrayRef;
using DoubleArray = torch::headeronly::HeaderOnlyArrayRef<double>;

// The refusal of img2gray.out when autograd would record a graph (torch's out= ops refuse alike:
// torch.mul(x, 2, out=o) with x.requires_grad); each build reads requires_grad in its own way.
constexpr const char* kOutRecordsNoGraph =
    "img2gray.out(): functions with out=... arguments don't support automatic differentiation, but one of the "
    "arguments requires grad; call img2gray without out= (or under torch.no_grad())";
// torch.func.vmap cannot write one result per batch element into `out`: refused as torch refuses its own out= ops
// there (aten::add.out), with the way out.
constexpr const char* kOutUnderVmap =
    "Batching rule not implemented for img2gray.out; the fallback path doesn't work on out= or view ops; call img2gray "
    "without out= inside torch.func.vmap (its result is batched) and copy vmap's result into out";
// torch's own out= ops refuse a tangent in the same words (mul_out under torch.autograd.forward_ad).
constexpr const char* kOutCarriesNoTangent =
    "Trying to use forward AD with img2gray.out that does not support it because it is an out= function; call "
    "img2gray without out=";

// What the checks read of a tensor.
struct TensorView {
  c10::ScalarType dtype;
  IntArray sizes;
  IntArray strides;
  const void* data;
  int64_t element_size;
  c10::DeviceType device_type;
  int32_t device_index;  // -1 on the CPU
};

template <typename T>
std::string describe(torch::headeronly::HeaderOnlyArrayRef<T> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

// As torch's Device::str() names the devices the op runs on.
inline std::string device_name(const TensorView& tensor) {
  if (tensor.device_type == c10::DeviceType::CPU) return "cpu";
  return (tensor.device_type == c10::DeviceType::CUDA ? std::string("cuda:") : std::string("device:")) +
         std::to_string(tensor.device_index);
}

inline std::vector<int64_t> output_shape(IntArray sizes, int64_t dim) {
  std::vector<int64_t> shape(sizes.begin(), sizes.end());
  shape[dim] = 1;
  return shape;
}

template <typename Failure>
void check_dtype(c10::ScalarType dtype) {
  using c10::ScalarType;
  if (!(dtype == ScalarType::Byte || dtype == ScalarType::Half || dtype == ScalarType::BFloat16 ||
        dtype == ScalarType::Float || dtype == ScalarType::Double)) {
    Failure::error(std::string("img2gray: unsupported dtype ") + c10::toString(dtype) +
                   "; supported are uint8, float16, bfloat16, float32 and float64 (convert with .to(torch.float32))");
  }
}

template <typename Failure>
void check_weights(DoubleArray weights, c10::ScalarType dtype) {
  if (weights.size() != 3) {
    Failure::error("img2gray: expected 3 channel weights (R, G, B), got " + std::to_string(weights.size()));
  }
  // Checked in the precision they are applied in: float64 for float64 inputs, float32 for every other dtype
  // (acc_t), where e.g. 1e39 is already inf.
  const bool in_double = dtype == c10::ScalarType::Double;
  for (double w : weights) {
    if (!(in_double ? std::isfinite(w) : std::isfinite(static_cast<float>(w)))) {
      Failure::error(std::string("img2gray: channel weights must be finite in ") + (in_double ? "float64" : "float32") +
                     " (the precision they are applied in for this input dtype), got " + describe(weights));
    }
  }
}

// `dim` as a non-negative index; the text of the out-of-range error is c10::maybe_wrap_dim's.
template <typename Failure>
int64_t checked_channel_dim(IntArray sizes, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  if (rank < 1) {
    Failure::error("img2gray: expected an image tensor with a channel dimension of size 3, got a 0-d tensor");
  }
  if (dim < -rank || dim >= rank) {
    Failure::index_error("Dimension out of range (expected to be in range of [" + std::to_string(-rank) + ", " +
                         std::to_string(rank - 1) + "], but got " + std::to_string(dim) + ")");
  }
  dim = dim < 0 ? dim + rank : dim;
  if (sizes[dim] != 3) {
    Failure::error("img2gray: expected 3 channels (R, G, B) at dim " + std::to_string(dim) + ", got size " +
                   std::to_string(sizes[dim]) + " in input of shape " + describe(sizes) +
                   "; use dim=-3 for (..., 3, H, W) tensors and dim=-1 for (..., H, W, 3) images");
  }
  return dim;
}

// The checks of img2gray(input, dim, weights); returns `dim` as a non-negative index.
template <typename Failure>
int64_t checked_inputs(const TensorView& input, int64_t dim, DoubleArray weights) {
  check_dtype<Failure>(input.dtype);
  check_weights<Failure>(weights, input.dtype);
  return checked_channel_dim<Failure>(input.sizes, dim);
}

// True when two elements of `tensor` share memory for certain (a size > 1 with stride 0), as
// at::has_internal_overlap answers YES: strides that only may overlap are let through, as torch's out= ops do.
inline bool has_internal_overlap(const TensorView& tensor) {
  for (size_t d = 0; d < tensor.sizes.size(); ++d) {
    if (tensor.sizes[d] > 1 && tensor.strides[d] == 0) return true;
  }
  return false;
}

// The further checks of img2gray.out(input, dim, weights, out=out), after checked_inputs gave `dim`.
template <typename Failure>
void check_out(const TensorView& input, int64_t dim, const TensorView& out) {
  if (out.device_type != input.device_type || out.device_index != input.device_index) {
    Failure::error("img2gray: out is on " + device_name(out) + " but input is on " + device_name(input) +
                   "; both must be on the same device");
  }
  if (out.dtype != input.dtype) {
    Failure::error(std::string("img2gray: out has dtype ") + c10::toString(out.dtype) + " but input has dtype " +
                   c10::toString(input.dtype) + "; out must have the input's dtype");
  }
  const std::vector<int64_t> expected = output_shape(input.sizes, dim);
  if (!out.sizes.equals(IntArray(expected.data(), expected.size()))) {
    Failure::error("img2gray: out has shape " + describe(out.sizes) + " but the result has shape " +
                   describe(IntArray(expected.data(), expected.size())));
  }
  if (has_internal_overlap(out)) {  // at::assert_no_internal_overlap's text
    Failure::error("unsupported operation: more than one element of the written-to tensor refers to a single memory "
                   "location. Please clone() the tensor before performing the operation.");
  }
  // Not at::assert_no_overlap: it lets through any pair it finds too hard to decide (a non-dense input), and a
  // contiguous out inside a strided input's memory was then read after being written.
  if (extents_intersect(memory_extent(out.data, out.sizes, out.strides, out.element_size),
                        memory_extent(input.data, input.sizes, input.strides, input.element_size))) {
    Failure::error("img2gray: out overlaps the input's memory (some elements of out and input may refer to a single "
                   "memory location); write into a tensor that shares no memory with the input, or clone() the input");
  }
}

}  // namespace img2gray
