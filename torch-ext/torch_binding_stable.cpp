// The operator's kernels on PyTorch's stable ABI (torch/csrc/stable, C shims only): one library serves every
// torch from the target version on (build.toml [torch.stable-abi], -DTORCH_TARGET_VERSION). The schemas, the
// fake kernels and the gradient are registered from Python (img2gray/stable_abi.py): the stable ABI has no C++
// autograd, and schema tags need 2.12 there. Python calls img2gray_register_kernels once per namespace (this
// build's own, and the public `img2gray` when no other build defined it first). The op's Autograd kernels are
// C++ routers (below), so that a call that needs no gradient never enters Python.
//
// The argument checks are the exact build's (contract.h), made inside this library: an error thrown here reaches
// Python with its message on every torch; one raised inside libtorch during a shim call would lose it below torch
// 2.13, so nothing is left for libtorch to refuse.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract.h"
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

// contract.h's failures: the message alone, as the exact build's TORCH_CHECK shows it (STD_TORCH_CHECK prefixes
// function, file and line), kept for the routers. The stable ABI raises no IndexError: img2gray/functional.py
// tells that one case apart.
struct StableFailure {
  [[noreturn]] static void error(const std::string& message) {
    last_error = message;
    throw std::runtime_error(message);
  }
  [[noreturn]] static void index_error(const std::string& message) { error(message); }
};

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::string message;
  ((message += parts), ...);
  StableFailure::error(message);
}
#define IMG2GRAY_CHECK(condition, ...) \
  do {                                 \
    if (!(condition)) fail(__VA_ARGS__); \
  } while (false)

using torch::headeronly::IntHeaderOnlyArrayRef;
using torch::stable::Tensor;

// Through the shims the library already uses: only "cpu", "cuda" or another device (named "device:<index>",
// whatever its type) matter to the checks.
TensorView view(const Tensor& tensor) {
  const c10::DeviceType type =
      tensor.is_cpu() ? c10::DeviceType::CPU : tensor.is_cuda() ? c10::DeviceType::CUDA : c10::DeviceType::Meta;
  return {tensor.scalar_type(), tensor.sizes(), tensor.strides(), tensor.const_data_ptr(),
          static_cast<int64_t>(tensor.element_size()), type, tensor.get_device_index()};
}

std::string device_name(const Tensor& tensor) { return img2gray::device_name(view(tensor)); }

int64_t checked_inputs(const Tensor& input, int64_t dim, const std::vector<double>& weights) {
  return img2gray::checked_inputs<StableFailure>(view(input), dim, DoubleArray(weights.data(), weights.size()));
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
  Tensor dense = empty_like_shape(out, output_shape(input.sizes(), dim));
  run_dense(input, plan, weights, dense);
  torch::stable::copy_(out, dense);
}

Tensor img2gray_functional(Tensor input, int64_t dim, std::vector<double> weights) {
  dim = checked_inputs(input, dim, weights);
  Tensor out = empty_like_shape(input, output_shape(input.sizes(), dim));
  run_into(input, dim, weights, out);
  return out;
}

void img2gray_out(Tensor input, int64_t dim, std::vector<double> weights, Tensor out) {
  dim = checked_inputs(input, dim, weights);
  check_out<StableFailure>(view(input), dim, view(out));
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
                 kOutRecordsNoGraph);
  call_op(routed_op().c_str(), "no_grad_out", stack);
}

}  // namespace
}  // namespace img2gray

// Python's fake kernels run inside the routers' nested dispatcher calls too (torch.compile traces through them), and
// torch passes their error text no more than its own: they leave it here before raising (img2gray/functional.py).
extern "C" __attribute__((visibility("default"))) void img2gray_leave_error_text(const char* message) {
  img2gray::last_error = message;
}

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
