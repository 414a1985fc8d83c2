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
#include <torch/csrc/stable/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>  // also completes the StableIValue conversions (boxed::from, boxed::to)
#include <torch/headeronly/core/ScalarType.h>

#include <array>
#include <memory>
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
namespace boxed = torch::stable::detail;  // StableIValue conversions: boxed::from, boxed::to

// The kernels take their boxed arguments as handles, written out rather than wrapped by TORCH_BOX: that wraps each
// tensor in a torch::stable::Tensor (a shared_ptr, so an allocation), copies the weights into a std::vector and
// returns the result through one more handle; and each torch::stable::Tensor accessor is a C shim call (sizes() and
// strides() two each, scalar_type() up to 14). A small call's host time is made of such things, so a kernel reads
// what it needs of a tensor once (Described) and owns its arguments' handles (`stack` holds them) as below.
struct TensorDeleter {
  void operator()(AtenTensorHandle tensor) const { aoti_torch_delete_tensor_object(tensor); }
};
using OwnedTensor = std::unique_ptr<AtenTensorOpaque, TensorDeleter>;

struct ListDeleter {
  void operator()(StableListHandle list) const { torch_delete_list(list); }
};
using OwnedList = std::unique_ptr<StableListOpaque, ListDeleter>;

// What the checks and the kernels read of a tensor (contract.h's view of it), in one pass of shim calls.
struct Described {
  TensorView view;
  int32_t shim_dtype;        // as the shims name dtypes (aoti_torch_empty_strided takes these)
  int32_t shim_device_type;  // likewise
  bool contiguous;           // the tensor's own is_contiguous()
  int64_t numel;
};

Described describe_tensor(AtenTensorHandle tensor) {
  int64_t dim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  int32_t dtype = 0;
  int32_t device_type = 0;
  int32_t device_index = 0;
  const void* data = nullptr;
  bool contiguous = false;
  IMG2GRAY_CHECK(aoti_torch_get_dim(tensor, &dim) == AOTI_TORCH_SUCCESS &&
                     aoti_torch_get_sizes(tensor, &sizes) == AOTI_TORCH_SUCCESS &&
                     aoti_torch_get_strides(tensor, &strides) == AOTI_TORCH_SUCCESS &&
                     aoti_torch_get_dtype(tensor, &dtype) == AOTI_TORCH_SUCCESS &&
                     aoti_torch_get_device_type(tensor, &device_type) == AOTI_TORCH_SUCCESS &&
                     aoti_torch_get_device_index(tensor, &device_index) == AOTI_TORCH_SUCCESS &&
                     torch_get_const_data_ptr(tensor, &data) == AOTI_TORCH_SUCCESS &&
                     aoti_torch_is_contiguous(tensor, &contiguous) == AOTI_TORCH_SUCCESS,
                 "img2gray: cannot read a tensor argument (sizes, strides, dtype, device)");
  // Only "cpu", "cuda" or another device (named "device:<index>", whatever its type) matter to the checks.
  const c10::DeviceType type = device_type == aoti_torch_device_type_cpu()    ? c10::DeviceType::CPU
                               : device_type == aoti_torch_device_type_cuda() ? c10::DeviceType::CUDA
                                                                              : c10::DeviceType::Meta;
  const IntHeaderOnlyArrayRef shape(sizes, static_cast<size_t>(dim));
  int64_t numel = 1;
  for (const int64_t size : shape) numel *= size;
  return {{boxed::to<c10::ScalarType>(boxed::from(dtype)), shape, IntHeaderOnlyArrayRef(strides, static_cast<size_t>(dim)), data,
           static_cast<int64_t>(aoti_torch_dtype_element_size(dtype)), type, device_index},
          dtype, device_type, contiguous, numel};
}

// The float[] argument: three values without an allocation, any other count kept for the checks to refuse.
class ChannelWeights {
 public:
  explicit ChannelWeights(StableIValue argument) {
    const OwnedList list(boxed::to<StableListHandle>(argument));
    size_t size = 0;
    IMG2GRAY_CHECK(torch_list_size(list.get(), &size) == AOTI_TORCH_SUCCESS, "img2gray: cannot read the weights");
    double* values = three_.data();
    if (size != three_.size()) {
      other_.resize(size);
      values = other_.data();
    }
    for (size_t i = 0; i < size; ++i) {
      StableIValue value = 0;
      IMG2GRAY_CHECK(torch_list_get_item(list.get(), i, &value) == AOTI_TORCH_SUCCESS,
                     "img2gray: cannot read the weights");
      values[i] = boxed::to<double>(value);
    }
    values_ = DoubleArray(values, size);
  }
  DoubleArray values() const { return values_; }

 private:
  std::array<double, 3> three_{};
  std::vector<double> other_;
  DoubleArray values_;
};

// Sizes or strides of up to 8 dims (the ranks images have) on the stack, of more on the heap.
class Dims {
 public:
  explicit Dims(size_t rank)
      : heap_(rank > inline_.size() ? rank : 0), data_(heap_.empty() ? inline_.data() : heap_.data()), rank_(rank) {}
  Dims(const Dims&) = delete;
  Dims& operator=(const Dims&) = delete;
  int64_t& operator[](size_t d) { return data_[d]; }
  IntHeaderOnlyArrayRef get() const { return IntHeaderOnlyArrayRef(data_, rank_); }

 private:
  std::array<int64_t, 8> inline_;
  std::vector<int64_t> heap_;
  int64_t* data_;
  size_t rank_;
};

// A dense tensor of `shape` with the dtype and device of `like`: the C shim, not an aten::empty call through the
// boxed dispatcher, which costs more than a small image's whole conversion.
OwnedTensor empty_dense(const Described& like, IntHeaderOnlyArrayRef shape) {
  Dims strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d] > 1 ? shape[d] : 1;
  }
  AtenTensorHandle handle = nullptr;
  IMG2GRAY_CHECK(aoti_torch_empty_strided(static_cast<int64_t>(shape.size()), shape.data(), strides.get().data(),
                                          like.shim_dtype, like.shim_device_type, like.view.device_index,
                                          &handle) == AOTI_TORCH_SUCCESS,
                 "img2gray: cannot allocate the result (", describe(shape), " elements of ",
                 c10::toString(like.view.dtype), " on ", device_name(like.view), ")");
  return OwnedTensor(handle);
}

void* mutable_data(AtenTensorHandle tensor) {
  void* data = nullptr;
  IMG2GRAY_CHECK(torch_get_mutable_data_ptr(tensor, &data) == AOTI_TORCH_SUCCESS,
                 "img2gray: cannot write the result");
  return data;
}

// Kernels write densely into `out` (contiguous, of the output shape, not overlapping `input`).
void run_dense(const Described& input, const Plan& plan, DoubleArray weights, void* out) {
  if (input.view.device_type == c10::DeviceType::CPU) {
    img2gray_cpu(plan, input.view.dtype, input.view.data, out, weights.data());
    return;
  }
#ifdef IMG2GRAY_WITH_CUDA
  IMG2GRAY_CHECK(input.view.device_type == c10::DeviceType::CUDA, "img2gray: input is on ", device_name(input.view),
                 "; supported are cpu and cuda");
  img2gray_cuda(plan, input.view.dtype, input.view.data, out, weights.data(), input.view.device_index);
#else
  IMG2GRAY_CHECK(false, "img2gray: input is on ", device_name(input.view), "; this build supports cpu only");
#endif
}

Plan plan_of(const Described& input, int64_t dim) {
  return make_plan(input.view.sizes, input.view.strides, dim, input.contiguous);
}

// img2gray(input, dim, weights) of the kernel's own input handle, the result left in stack[0].
void functional(StableIValue* stack, const OwnedTensor& input_handle, int64_t dim, DoubleArray weights) {
  const Described input = describe_tensor(input_handle.get());
  dim = checked_inputs<StableFailure>(input.view, dim, weights);
  Dims shape(input.view.sizes.size());  // contract.h's output_shape, without its allocation
  for (size_t d = 0; d < input.view.sizes.size(); ++d) shape[d] = input.view.sizes[d];
  shape[dim] = 1;
  OwnedTensor out = empty_dense(input, shape.get());
  if (input.numel != 0) run_dense(input, plan_of(input, dim), weights, mutable_data(out.get()));
  stack[0] = boxed::from(out.release());
}

// img2gray(input, dim, weights): stack = [input, dim, weights] -> [result].
void img2gray_functional(StableIValue* stack, uint64_t, uint64_t) {
  const OwnedTensor input(boxed::to<AtenTensorHandle>(stack[0]));
  const ChannelWeights weights(stack[2]);
  functional(stack, input, boxed::to<int64_t>(stack[1]), weights.values());
}

// img2gray.no_grad_default_weights(input, dim): stack = [input, dim] -> [result]. The calls that leave the weights
// out take this overload from Python (stable_abi.py): the default weights list is then neither converted to a
// StableIValue list by torch nor read back here, per call.
void img2gray_default_weights(StableIValue* stack, uint64_t, uint64_t) {
  const OwnedTensor input(boxed::to<AtenTensorHandle>(stack[0]));
  functional(stack, input, boxed::to<int64_t>(stack[1]), DoubleArray(kDefaultWeights));
}

// img2gray.no_grad_chw(input) and img2gray.no_grad_hwc(input): stack = [input] -> [result], img2gray with the
// default weights and dim -3 or -1 (contract.h), for Python's calls on (..., 3, H, W) and (..., H, W, 3) images
// (stable_abi.py), which then convert no argument but the input.
template <int64_t dim>
void img2gray_default_weights_at(StableIValue* stack, uint64_t, uint64_t) {
  const OwnedTensor input(boxed::to<AtenTensorHandle>(stack[0]));
  functional(stack, input, dim, DoubleArray(kDefaultWeights));
}

// img2gray.out(input, dim, weights, *, out): stack = [input, dim, weights, out] -> [].
void img2gray_out(StableIValue* stack, uint64_t, uint64_t) {
  const OwnedTensor input_handle(boxed::to<AtenTensorHandle>(stack[0]));
  const OwnedTensor out_handle(boxed::to<AtenTensorHandle>(stack[3]));
  const ChannelWeights weights(stack[2]);
  const Described input = describe_tensor(input_handle.get());
  const int64_t dim = checked_inputs<StableFailure>(input.view, boxed::to<int64_t>(stack[1]), weights.values());
  const Described out = describe_tensor(out_handle.get());
  check_out<StableFailure>(input.view, dim, out.view);
  if (input.numel == 0) return;
  if (out.contiguous) {
    run_dense(input, plan_of(input, dim), weights.values(), mutable_data(out_handle.get()));
    return;
  }
  // A strided `out` is filled through a temporary.
  const OwnedTensor dense = empty_dense(out, out.view.sizes);
  run_dense(input, plan_of(input, dim), weights.values(), mutable_data(dense.get()));
  IMG2GRAY_CHECK(aoti_torch_copy_(out_handle.get(), dense.get(), 0) == AOTI_TORCH_SUCCESS,
                 "img2gray: cannot copy the result into out");
}

// Autograd without Python on calls that need no gradient. The gradient is a Python autograd.Function on the
// build namespace's overload `img2gray.differentiable` (its Python Autograd kernel, stable_abi.py); a Python autograd
// kernel on the op itself would run on every call (dispatcher -> Python -> dispatcher: 1.9x a small CUDA call).
// So the op's Autograd kernel is a C++ router: a call that records no graph goes to `img2gray.no_grad`, which
// has no autograd kernel (torch's C++ fallback passes it through, dropping a forward-mode tangent), one that records
// a graph or carries a tangent to `img2gray.differentiable`; both dispatch on from there as the op would (fake
// tensors, modes and subclasses included). The out= router refuses a gradient and a tangent as torch's out= ops do
// and sends the rest to `img2gray.no_grad_out`.
//
// The stable ABI reads no requires_grad and no forward-mode tangent (torch 2.11-2.14), so they are read through
// boxed aten calls: `aten::_unpack_dual` gives the tangent of torch's forward-AD level 0 (torch allows one level at
// a time; torch.autograd.forward_ad and torch.func.jvp use it) and the primal, a differentiable view, which in
// grad mode requires grad exactly when it is not a leaf.
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

struct AutogradState {
  bool records_graph;  // grad mode is on and the tensor requires grad
  bool has_tangent;    // a forward-mode tangent
};

AutogradState autograd_state(AtenTensorHandle tensor) {
  AtenTensorHandle copy = nullptr;
  IMG2GRAY_CHECK(aoti_torch_new_tensor_handle(tensor, &copy) == AOTI_TORCH_SUCCESS,
                 "img2gray: cannot read the input's autograd state");
  std::array<StableIValue, 2> stack{boxed::from(copy), boxed::from(int64_t{0})};
  call_op("aten::_unpack_dual", "", stack.data());  // -> [primal, tangent]
  OwnedTensor primal(boxed::to<AtenTensorHandle>(stack[0]));
  const OwnedTensor tangent(boxed::to<AtenTensorHandle>(stack[1]));
  bool has_tangent = false;
  IMG2GRAY_CHECK(aoti_torch_is_defined(tangent.get(), &has_tangent) == AOTI_TORCH_SUCCESS,
                 "img2gray: cannot read the input's autograd state");
  if (!aoti_torch_grad_mode_is_enabled()) return {false, has_tangent};
  stack[0] = boxed::from(primal.release());  // the nested call owns it
  call_op("aten::is_leaf", "", stack.data());
  return {!boxed::to<bool>(stack[0]), has_tangent};
}

// Boxed kernels: `stack` holds the schema's arguments, owned by the callee; the nested call consumes them and
// leaves the result in stack[0].
void route_functional(StableIValue* stack, uint64_t, uint64_t) {
  const AutogradState input = autograd_state(boxed::to<AtenTensorHandle>(stack[0]));
  call_op(routed_op().c_str(), input.records_graph || input.has_tangent ? "differentiable" : "no_grad", stack);
}

void route_out(StableIValue* stack, uint64_t, uint64_t) {  // input, dim, weights, out
  const AutogradState input = autograd_state(boxed::to<AtenTensorHandle>(stack[0]));
  const AutogradState out = autograd_state(boxed::to<AtenTensorHandle>(stack[3]));
  IMG2GRAY_CHECK(!input.records_graph && !out.records_graph, kOutRecordsNoGraph);
  IMG2GRAY_CHECK(!input.has_tangent && !out.has_tangent, kOutCarriesNoTangent);
  call_op(routed_op().c_str(), "no_grad_out", stack);
}

// The out= overloads under torch.func.vmap: torch's batching fallback refused them too, but without the way out, and
// named `no_grad_out`, which the caller never called.
void refuse_out_under_vmap(StableIValue* stack, uint64_t, uint64_t) {  // input, dim, weights, out
  const OwnedTensor input(boxed::to<AtenTensorHandle>(stack[0]));
  const OwnedList weights(boxed::to<StableListHandle>(stack[2]));
  const OwnedTensor out(boxed::to<AtenTensorHandle>(stack[3]));
  StableFailure::error(kOutUnderVmap);
}

}  // namespace
}  // namespace img2gray

// Python's fake kernels run inside the routers' nested dispatcher calls too (torch.compile traces through them), and
// torch passes their error text no more than its own: they leave it here before raising (img2gray/functional.py).
extern "C" __attribute__((visibility("default"))) void img2gray_leave_error_text(const char* message) {
  img2gray::last_error = message;
}

// Registers this library's kernels for the ops of `ns`, whose schemas Python has defined: CPU (and CUDA) kernels
// for `img2gray` and `img2gray.out`, the routers as their Autograd kernels and vmap's refusal of the out=
// overloads; with `build_namespace` also the overloads the routers call (`no_grad`, `no_grad_out`, `differentiable`), which must be registered first, and
// `no_grad_default_weights`, `no_grad_chw` and `no_grad_hwc` (Python's calls that give no weights).
// Returns 0, or 1 when torch refused (Python then says so). The library objects must outlive the process's use
// of the op (their destructors would deregister the kernels), so they are never freed.
extern "C" __attribute__((visibility("default"))) int img2gray_register_kernels(const char* ns, int build_namespace) {
  using torch::stable::detail::StableLibrary;
  const auto library_for = [&](const char* key) {
    return new StableLibrary(StableLibrary::Kind::IMPL, ns, key, __FILE__, __LINE__);
  };
  const auto register_kernels = [&](const char* key) {
    StableLibrary* library = library_for(key);
    library->impl("img2gray", &img2gray::img2gray_functional);
    library->impl("img2gray.out", &img2gray::img2gray_out);
    if (!build_namespace) return;
    library->impl("img2gray.no_grad", &img2gray::img2gray_functional);
    library->impl("img2gray.no_grad_out", &img2gray::img2gray_out);
    library->impl("img2gray.no_grad_default_weights", &img2gray::img2gray_default_weights);
    library->impl("img2gray.no_grad_chw", &img2gray::img2gray_default_weights_at<img2gray::kChwDim>);
    library->impl("img2gray.no_grad_hwc", &img2gray::img2gray_default_weights_at<img2gray::kHwcDim>);
    library->impl("img2gray.differentiable", &img2gray::img2gray_functional);
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
    StableLibrary* batched = library_for("FuncTorchBatched");
    batched->impl("img2gray.out", &img2gray::refuse_out_under_vmap);
    if (build_namespace) batched->impl("img2gray.no_grad_out", &img2gray::refuse_out_under_vmap);
  } catch (const std::exception&) {  // an exception must not cross the C boundary into ctypes
    return 1;
  }
  return 0;
}
