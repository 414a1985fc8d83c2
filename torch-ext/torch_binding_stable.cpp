// The operator's kernels on PyTorch's stable ABI (torch/csrc/stable, C shims only): one library serves every
// torch from the target version on (build.toml [torch.stable-abi], -DTORCH_TARGET_VERSION). The schemas, the
// fake kernels and the gradient are registered from Python (img2gray/stable_abi.py): the stable ABI has no C++
// autograd, and schema tags need 2.12 there. Python calls img2gray_register_kernels once per namespace (this
// build's own, and the public `img2gray` when no other build defined it first). The op's Autograd kernels are
// C++ routers (below), so that a call that needs no gradient never enters Python.
//
// Every check of the exact binding (torch_binding.cpp) is made here too, with the same text: an error thrown in
// this library reaches Python with its message on every torch; one raised inside libtorch during a shim call
// would lose it below torch 2.13, so nothing is left for libtorch to refuse. Numbers are turned into text with
// std::to_string (see torch_binding.cpp on streaming numbers into std::ostream).
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "img2gray_cpu.h"
#include "layout.h"
#ifdef IMG2GRAY_WITH_CUDA
#include "img2gray_cuda.h"
#endif

namespace img2gray {
namespace {

// The text of this thread's last error raised here: a router reads it back when its nested dispatcher call
// failed, since torch below 2.13 passes a stable-ABI library no error text across the C shim.
thread_local std::string last_error;

// The message alone, as the exact build's TORCH_CHECK shows it (STD_TORCH_CHECK prefixes function, file and line).
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::string message;
  ((message += parts), ...);
  last_error = message;
  throw std::runtime_error(message);
}
#define IMG2GRAY_CHECK(condition, ...) \
  do {                                 \
    if (!(condition)) fail(__VA_ARGS__); \
  } while (false)

using torch::headeronly::IntHeaderOnlyArrayRef;
using torch::stable::Tensor;
using Dtype = torch::headeronly::ScalarType;

template <typename T>
std::string describe(torch::headeronly::HeaderOnlyArrayRef<T> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string device_name(const Tensor& tensor) {
  if (tensor.is_cpu()) return "cpu";
  return (tensor.is_cuda() ? std::string("cuda:") : std::string("device:")) + std::to_string(tensor.get_device_index());
}

int64_t checked_channel_dim(const Tensor& input, int64_t dim) {
  const int64_t rank = input.dim();
  IMG2GRAY_CHECK(rank >= 1, "img2gray: expected an image tensor with a channel dimension of size 3, got a 0-d tensor");
  IMG2GRAY_CHECK(-rank <= dim && dim < rank, "Dimension out of range (expected to be in range of [",
                  std::to_string(-rank), ", ", std::to_string(rank - 1), "], but got ", std::to_string(dim), ")");
  dim = dim < 0 ? dim + rank : dim;
  IMG2GRAY_CHECK(input.size(dim) == 3, "img2gray: expected 3 channels (R, G, B) at dim ", std::to_string(dim),
                  ", got size ", std::to_string(input.size(dim)), " in input of shape ", describe(input.sizes()),
                  "; use dim=-3 for (..., 3, H, W) tensors and dim=-1 for (..., H, W, 3) images");
  return dim;
}

void check_dtype(const Tensor& input) {
  const Dtype dtype = input.scalar_type();
  IMG2GRAY_CHECK(dtype == Dtype::Byte || dtype == Dtype::Half || dtype == Dtype::BFloat16 || dtype == Dtype::Float ||
                      dtype == Dtype::Double,
                  "img2gray: unsupported dtype ", c10::toString(dtype),
                  "; supported are uint8, float16, bfloat16, float32 and float64 (convert with .to(torch.float32))");
}

void check_weights(const std::vector<double>& weights, Dtype dtype) {
  IMG2GRAY_CHECK(weights.size() == 3, "img2gray: expected 3 channel weights (R, G, B), got ",
                  std::to_string(weights.size()));
  // Checked in the precision they are applied in (see torch_binding.cpp).
  const bool in_double = dtype == Dtype::Double;
  for (double w : weights) {
    const bool finite = in_double ? std::isfinite(w) : std::isfinite(static_cast<float>(w));
    IMG2GRAY_CHECK(finite, "img2gray: channel weights must be finite in ", in_double ? "float64" : "float32",
                    " (the precision they are applied in for this input dtype), got ",
                    describe(torch::headeronly::HeaderOnlyArrayRef<double>(weights.data(), weights.size())));
  }
}

std::vector<int64_t> output_shape(const Tensor& input, int64_t dim) {
  const IntHeaderOnlyArrayRef sizes = input.sizes();
  std::vector<int64_t> shape(sizes.begin(), sizes.end());
  shape[dim] = 1;
  return shape;
}

int64_t checked_inputs(const Tensor& input, int64_t dim, const std::vector<double>& weights) {
  check_dtype(input);
  check_weights(weights, input.scalar_type());
  return checked_channel_dim(input, dim);
}

// A dense tensor of `shape` like `like` (dtype, device): the C shim, not an aten::empty call through the boxed
// dispatcher, which costs more than a small image's whole conversion.
Tensor empty_like_shape(const Tensor& like, const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d] > 1 ? shape[d] : 1;
  }
  int32_t dtype = 0;
  int32_t device_type = 0;
  IMG2GRAY_CHECK(aoti_torch_get_dtype(like.get(), &dtype) == AOTI_TORCH_SUCCESS &&
                      aoti_torch_get_device_type(like.get(), &device_type) == AOTI_TORCH_SUCCESS,
                  "img2gray: cannot read the input's dtype and device");
  AtenTensorHandle handle = nullptr;
  IMG2GRAY_CHECK(aoti_torch_empty_strided(static_cast<int64_t>(shape.size()), shape.data(), strides.data(), dtype,
                                           device_type, like.get_device_index(), &handle) == AOTI_TORCH_SUCCESS,
                  "img2gray: cannot allocate the result (", describe(IntHeaderOnlyArrayRef(shape.data(), shape.size())),
                  " elements of ", c10::toString(like.scalar_type()), " on ", device_name(like), ")");
  return Tensor(handle);
}

// Kernels write densely into `out` (contiguous, of the output shape, not overlapping `input`).
void run_dense(const Tensor& input, const Plan& plan, const std::vector<double>& weights, Tensor& out) {
  if (input.is_cpu()) {
    img2gray_cpu(plan, input.scalar_type(), input.const_data_ptr(), out.mutable_data_ptr(), weights.data());
    return;
  }
#ifdef IMG2GRAY_WITH_CUDA
  IMG2GRAY_CHECK(input.is_cuda(), "img2gray: input is on ", device_name(input), "; supported are cpu and cuda");
  img2gray_cuda(plan, input.scalar_type(), input.const_data_ptr(), out.mutable_data_ptr(), weights.data(),
                input.get_device_index());
#else
  IMG2GRAY_CHECK(false, "img2gray: input is on ", device_name(input), "; this build supports cpu only");
#endif
}

void run_into(const Tensor& input, int64_t dim, const std::vector<double>& weights, Tensor& out) {
  if (input.numel() == 0) return;
  const Plan plan = make_plan(input.sizes(), input.strides(), dim, input.is_contiguous());
  if (out.is_contiguous()) {
    run_dense(input, plan, weights, out);
    return;
  }
  // A strided `out` is filled through a temporary.
  Tensor dense = empty_like_shape(out, output_shape(input, dim));
  run_dense(input, plan, weights, dense);
  torch::stable::copy_(out, dense);
}

Tensor img2gray_functional(Tensor input, int64_t dim, std::vector<double> weights) {
  dim = checked_inputs(input, dim, weights);
  Tensor out = empty_like_shape(input, output_shape(input, dim));
  run_into(input, dim, weights, out);
  return out;
}

bool has_internal_overlap(const Tensor& tensor) {
  const IntHeaderOnlyArrayRef sizes = tensor.sizes();
  const IntHeaderOnlyArrayRef strides = tensor.strides();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && strides[d] == 0) return true;
  }
  return false;
}

void img2gray_out(Tensor input, int64_t dim, std::vector<double> weights, Tensor out) {
  dim = checked_inputs(input, dim, weights);
  IMG2GRAY_CHECK(out.is_cpu() == input.is_cpu() && out.is_cuda() == input.is_cuda() &&
                      out.get_device_index() == input.get_device_index(),
                  "img2gray: out is on ", device_name(out), " but input is on ", device_name(input),
                  "; both must be on the same device");
  IMG2GRAY_CHECK(out.scalar_type() == input.scalar_type(), "img2gray: out has dtype ", c10::toString(out.scalar_type()),
                  " but input has dtype ", c10::toString(input.scalar_type()), "; out must have the input's dtype");
  const std::vector<int64_t> expected = output_shape(input, dim);
  const IntHeaderOnlyArrayRef out_sizes = out.sizes();
  IMG2GRAY_CHECK(std::vector<int64_t>(out_sizes.begin(), out_sizes.end()) == expected, "img2gray: out has shape ",
                  describe(out_sizes), " but the result has shape ",
                  describe(IntHeaderOnlyArrayRef(expected.data(), expected.size())));
  IMG2GRAY_CHECK(!has_internal_overlap(out),
                  "unsupported operation: more than one element of the written-to tensor refers to a single memory "
                  "location. Please clone() the tensor before performing the operation.");
  IMG2GRAY_CHECK(!extents_intersect(memory_extent(out.const_data_ptr(), out.sizes(), out.strides(),
                                                   static_cast<int64_t>(out.element_size())),
                                     memory_extent(input.const_data_ptr(), input.sizes(), input.strides(),
                                                   static_cast<int64_t>(input.element_size()))),
                  "img2gray: out overlaps the input's memory (some elements of out and input may refer to a single "
                  "memory location); write into a tensor that shares no memory with the input, or clone() the input");
  run_into(input, dim, weights, out);
}

// Autograd without Python on calls that need no gradient. The gradient is a Python autograd.Function on the
// build namespace's overload `img2gray.differentiable` (torch.library.register_autograd); a Python autograd
// kernel on the op itself would run on every call (dispatcher -> Python -> dispatcher: 1.9x a small CUDA call).
// So the op's Autograd kernel is a C++ router: a call that records no graph goes to `img2gray.no_grad`, which
// has no autograd kernel (torch's C++ fallback passes it through), one that does to `img2gray.differentiable`;
// both dispatch on from there as the op would (fake tensors, modes and subclasses included). The out= router
// refuses a gradient as torch's out= ops do and sends the rest to `img2gray.no_grad_out`.
//
// The stable ABI reads no requires_grad (torch 2.11-2.14): an input requires grad exactly when its alias, a
// differentiable view, is not a leaf (it has a grad_fn), which two boxed aten calls tell.
std::string& routed_op() {  // "<build namespace>::img2gray", set when the build namespace registers
  static std::string name;
  return name;
}

void call_op(const char* op, const char* overload, StableIValue* stack) {
  last_error.clear();
  if (torch_call_dispatcher(op, overload, stack, TORCH_ABI_VERSION) == AOTI_TORCH_SUCCESS) return;
  // An error raised here (our checks, in the nested kernel) keeps its text; one raised by torch itself or a fake
  // kernel reaches this library as a bare failure code below torch 2.13, which logs its text to stderr.
  throw std::runtime_error(!last_error.empty() ? last_error
                                               : std::string("img2gray: torch failed in ") + op + "." + overload +
                                                     "; its message is in torch's log above (torch < 2.13 passes "
                                                     "no error text to a stable-ABI library)");
}

bool requires_grad(AtenTensorHandle tensor) {
  AtenTensorHandle copy = nullptr;
  IMG2GRAY_CHECK(aoti_torch_new_tensor_handle(tensor, &copy) == AOTI_TORCH_SUCCESS,
                  "img2gray: cannot read the input's autograd state");
  std::array<StableIValue, 1> stack{torch::stable::detail::from(copy)};
  call_op("aten::alias", "", stack.data());
  call_op("aten::is_leaf", "", stack.data());
  return !torch::stable::detail::to<bool>(stack[0]);
}

bool records_graph(AtenTensorHandle tensor) {
  return aoti_torch_grad_mode_is_enabled() && requires_grad(tensor);
}

// Boxed kernels: `stack` holds the schema's arguments, owned by the callee; the nested call consumes them and
// leaves the result in stack[0].
void route_functional(StableIValue* stack, uint64_t, uint64_t) {
  const bool differentiable = records_graph(torch::stable::detail::to<AtenTensorHandle>(stack[0]));
  call_op(routed_op().c_str(), differentiable ? "differentiable" : "no_grad", stack);
}

void route_out(StableIValue* stack, uint64_t, uint64_t) {  // input, dim, weights, out
  IMG2GRAY_CHECK(!records_graph(torch::stable::detail::to<AtenTensorHandle>(stack[0])) &&
                     !records_graph(torch::stable::detail::to<AtenTensorHandle>(stack[3])),
                 "img2gray.out(): functions with out=... arguments don't support automatic differentiation, but "
                 "one of the arguments requires grad; call img2gray without out= (or under torch.no_grad())");
  call_op(routed_op().c_str(), "no_grad_out", stack);
}

}  // namespace
}  // namespace img2gray

// Registers this library's kernels for the ops of `ns`, whose schemas Python has defined: CPU (and CUDA) kernels
// for `img2gray` and `img2gray.out` and the routers as their Autograd kernels; with `build_namespace` also the
// overloads the routers call (`no_grad`, `no_grad_out`, `differentiable`), which must be registered first.
// Returns 0, or 1 when torch refused (Python then says so). The library objects must outlive the process's use
// of the op (their destructors would deregister the kernels), so they are never freed.
extern "C" __attribute__((visibility("default"))) int img2gray_register_kernels(const char* ns, int build_namespace) {
  using torch::stable::detail::StableLibrary;
  const auto library_for = [&](const char* key) {
    return new StableLibrary(StableLibrary::Kind::IMPL, ns, key, __FILE__, __LINE__);
  };
  const auto register_kernels = [&](const char* key) {
    StableLibrary* library = library_for(key);
    library->impl("img2gray", TORCH_BOX(&img2gray::img2gray_functional));
    library->impl("img2gray.out", TORCH_BOX(&img2gray::img2gray_out));
    if (!build_namespace) return;
    library->impl("img2gray.no_grad", TORCH_BOX(&img2gray::img2gray_functional));
    library->impl("img2gray.no_grad_out", TORCH_BOX(&img2gray::img2gray_out));
    library->impl("img2gray.differentiable", TORCH_BOX(&img2gray::img2gray_functional));
  };
  try {
    if (build_namespace) img2gray::routed_op() = std::string(ns) + "::img2gray";
    register_kernels("CPU");
#ifdef IMG2GRAY_WITH_CUDA
    register_kernels("CUDA");
#endif
    StableLibrary* autograd = library_for("Autograd");
    autograd->impl("img2gray", &img2gray::route_functional);
    autograd->impl("img2gray.out", &img2gray::route_out);
  } catch (const std::exception&) {  // an exception must not cross the C boundary into ctypes
    return 1;
  }
  return 0;
}
