// The operator's per-device registrations and its autograd on libtorch's C++ ABI. The schema and the argument
// checks are the contract both builds share (contract.h).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <vector>

#include "contract.h"
#include "img2gray_cpu.h"
#include "layout.h"
#include "registration.h"
#ifdef IMG2GRAY_WITH_CUDA
#include "img2gray_cuda.h"
#endif

namespace img2gray {
namespace {

using Kernel = void (*)(const at::Tensor&, const Plan&, at::ArrayRef<double>, at::Tensor&);

// contract.h's failures as TORCH_CHECK raises them (c10::Error, c10::IndexError).
struct TorchCheckFailure {
  [[noreturn]] static void error(const std::string& message) { TORCH_CHECK(false, message); }
  [[noreturn]] static void index_error(const std::string& message) { TORCH_CHECK_INDEX(false, message); }
};

TensorView view(const at::Tensor& tensor) {
  return {tensor.scalar_type(), tensor.sizes(), tensor.strides(), tensor.const_data_ptr(),
          static_cast<int64_t>(tensor.element_size()), tensor.device().type(), tensor.device().index()};
}

int64_t checked_inputs(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights) {
  return img2gray::checked_inputs<TorchCheckFailure>(view(input), dim, weights);
}

at::Tensor& run_into(Kernel kernel, const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights,
                     at::Tensor& out) {
  if (input.numel() == 0) return out;
  // Planned here, once, for either device (the CUDA translation unit has no ATen to plan with).
  const Plan plan = make_plan(input.sizes(), input.strides(), dim, input.is_contiguous());
  if (out.is_contiguous()) {
    kernel(input, plan, weights, out);
    return out;
  }
  // Kernels write densely; a strided `out` is filled through a temporary.
  at::Tensor dense = at::empty(out.sizes(), out.options());
  kernel(input, plan, weights, dense);
  out.copy_(dense);
  return out;
}

// The device kernels take raw pointers (csrc/img2gray_cpu.h, csrc/img2gray_cuda.h), shared with the stable-ABI
// binding; these adapt them.
void img2gray_cpu_tensors(const at::Tensor& input, const Plan& plan, at::ArrayRef<double> weights, at::Tensor& out) {
  img2gray_cpu(plan, input.scalar_type(), input.const_data_ptr(), out.mutable_data_ptr(), weights.data());
}

#ifdef IMG2GRAY_WITH_CUDA
void img2gray_cuda_tensors(const at::Tensor& input, const Plan& plan, at::ArrayRef<double> weights, at::Tensor& out) {
  img2gray_cuda(plan, input.scalar_type(), input.const_data_ptr(), out.mutable_data_ptr(), weights.data(),
                input.device().index());
}
#endif

template <Kernel kernel>
at::Tensor img2gray(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights) {
  dim = checked_inputs(input, dim, weights);
  at::Tensor out = at::empty(output_shape(input.sizes(), dim), input.options());
  return run_into(kernel, input, dim, weights, out);
}

// img2gray.chw(input) and img2gray.hwc(input): img2gray with the default weights and dim -3 or -1 (contract.h).
template <Kernel kernel, int64_t dim>
at::Tensor img2gray_default_weights(const at::Tensor& input) {
  return img2gray<kernel>(input, dim, kDefaultWeights);
}

template <Kernel kernel>
void img2gray_out(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out) {
  dim = checked_inputs(input, dim, weights);
  check_out<TorchCheckFailure>(view(input), dim, view(out));
  run_into(kernel, input, dim, weights, out);
}

// Autograd lives in C++ so that a call that needs no gradient never enters Python: a Python autograd
// kernel (torch.library.register_autograd) measured 4.2 us of the 5.8 us of a small CPU call.
// The op is linear: d out / d input[c] = weights[c], broadcast along the channel dim.
class Img2grayFunction : public torch::autograd::Function<Img2grayFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, int64_t dim,
                            std::vector<double> weights) {
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["weights"] = weights;
    return call_below_autograd(input, dim, weights);
  }

  static at::Tensor call_below_autograd(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow(IMG2GRAY_STRINGIFY(TORCH_EXTENSION_NAME) "::img2gray", "")
                               .typed<at::Tensor(const at::Tensor&, int64_t, at::ArrayRef<double>)>();
    return op.call(input, dim, weights);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor& grad = grads[0];
    const int64_t dim = c10::maybe_wrap_dim(ctx->saved_data["dim"].toInt(), grad.dim());
    const auto weights = ctx->saved_data["weights"].toDoubleVector();
    // Scalar products only: no tensor built from host data, so the backward also traces under torch.compile.
    const at::Tensor grad_input = at::cat({grad * weights[0], grad * weights[1], grad * weights[2]}, dim);
    return {grad_input, at::Tensor(), at::Tensor()};
  }
};

// This build's op through the whole dispatcher (autograd included).
at::Tensor call_op(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow(IMG2GRAY_STRINGIFY(TORCH_EXTENSION_NAME) "::img2gray", "")
                             .typed<at::Tensor(const at::Tensor&, int64_t, at::ArrayRef<double>)>();
  return op.call(input, dim, weights);
}

// This build's out= overload through the dispatcher from wherever the caller is (below autograd, or all of it).
void call_out_op(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow(IMG2GRAY_STRINGIFY(TORCH_EXTENSION_NAME) "::img2gray", "out")
                             .typed<void(const at::Tensor&, int64_t, at::ArrayRef<double>, at::Tensor&)>();
  op.call(input, dim, weights, out);
}

// Forward-mode AD (torch.autograd.forward_ad, torch.func.jvp) is torch's level 0: torch allows one forward level at
// a time, and its generated kernels read that one alike. A C++ autograd.Function has no jvp, and this kernel's
// calls below autograd set no tangent (the result's tangent was silently zero), so it is set here.
constexpr uint64_t kForwardLevel = 0;

at::Tensor img2gray_autograd(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights) {
  if (const at::Tensor& tangent = input._fw_grad(kForwardLevel); tangent.defined()) {
    // The op is linear in its input: the result's tangent is the op on the input's tangent, through the
    // dispatcher so that a tangent that requires grad records its graph.
    at::Tensor result = call_op(input._fw_primal(kForwardLevel), dim, weights);
    result._set_fw_grad(call_op(tangent, dim, weights), kForwardLevel, /*is_inplace_op=*/false);
    return result;
  }
  // Inference calls skip the graph node and its saved state altogether.
  if (!(at::GradMode::is_enabled() && input.requires_grad())) {
    return Img2grayFunction::call_below_autograd(input, dim, weights);
  }
  return Img2grayFunction::apply(input, dim, weights.vec());
}

template <int64_t dim>
at::Tensor img2gray_default_weights_autograd(const at::Tensor& input) {
  return img2gray_autograd(input, dim, kDefaultWeights);
}

// The out= overload records no graph, so with a gradient required it refuses, as torch's own out= ops do
// (torch.mul(x, 2, out=o) with x.requires_grad); without this kernel it silently returned `out` detached.
void img2gray_out_autograd(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && (input.requires_grad() || out.requires_grad())), kOutRecordsNoGraph);
  TORCH_CHECK_NOT_IMPLEMENTED(!(input._fw_grad(kForwardLevel).defined() || out._fw_grad(kForwardLevel).defined()),
                              kOutCarriesNoTangent);
  at::AutoDispatchBelowAutograd below_autograd;  // ADInplaceOrView still bumps out's version counter
  call_out_op(input, dim, weights, out);
}

// The out= overload under torch.func.vmap (both namespaces): torch's batching fallback refused it too, but without
// the way out, and named the op below the public name.
void img2gray_out_batched(const at::Tensor&, int64_t, at::ArrayRef<double>, at::Tensor&) {
  TORCH_CHECK(false, kOutUnderVmap);
}

// `torch.ops.img2gray.img2gray` is the documented entry point. Each build registers under its own namespace
// so that several can be loaded in one process; the first one loaded also defines the public name, which
// forwards to its own op through the dispatcher (call_op, call_out_op; CompositeImplicitAutograd: autograd and
// compile follow).
// In C++ rather than Python: a Python forwarding kernel measured 1.21x of a small call's floor.
// Runs once, when the library is loaded. The Library object must outlive the process's use of the op
// (its destructor would deregister it), so it is never freed.
bool define_public_alias() {
  if (c10::Dispatcher::singleton().findSchema({"img2gray::img2gray", ""}).has_value()) return false;
  auto* library = new torch::Library(torch::Library::FRAGMENT, "img2gray", std::nullopt, __FILE__, __LINE__);
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  library->def(IMG2GRAY_SCHEMA, tags);
  library->def(IMG2GRAY_OUT_SCHEMA, tags);
  library->impl("img2gray", torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd, &call_op));
  library->impl("img2gray.out", torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd, &call_out_op));
  library->impl("img2gray.out", torch::dispatch(c10::DispatchKey::FuncTorchBatched, &img2gray_out_batched));
  return true;
}

}  // namespace
}  // namespace img2gray

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def(IMG2GRAY_SCHEMA, tags);
  m.def(IMG2GRAY_OUT_SCHEMA, tags);
  m.def(IMG2GRAY_CHW_SCHEMA, tags);
  m.def(IMG2GRAY_HWC_SCHEMA, tags);
}

// After this build's own namespace (static initialisers of one file run in order of definition).
static const bool img2gray_public_alias_defined = img2gray::define_public_alias();

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, Autograd, m) {
  m.impl("img2gray", &img2gray::img2gray_autograd);
  m.impl("img2gray.out", &img2gray::img2gray_out_autograd);
  m.impl("img2gray.chw", &img2gray::img2gray_default_weights_autograd<img2gray::kChwDim>);
  m.impl("img2gray.hwc", &img2gray::img2gray_default_weights_autograd<img2gray::kHwcDim>);
}

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, FuncTorchBatched, m) {
  m.impl("img2gray.out", &img2gray::img2gray_out_batched);
}

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, m) {
  m.impl("img2gray", &img2gray::img2gray<img2gray::img2gray_cpu_tensors>);
  m.impl("img2gray.out", &img2gray::img2gray_out<img2gray::img2gray_cpu_tensors>);
  m.impl("img2gray.chw", &img2gray::img2gray_default_weights<img2gray::img2gray_cpu_tensors, img2gray::kChwDim>);
  m.impl("img2gray.hwc", &img2gray::img2gray_default_weights<img2gray::img2gray_cpu_tensors, img2gray::kHwcDim>);
}

#ifdef IMG2GRAY_WITH_CUDA
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, m) {
  m.impl("img2gray", &img2gray::img2gray<img2gray::img2gray_cuda_tensors>);
  m.impl("img2gray.out", &img2gray::img2gray_out<img2gray::img2gray_cuda_tensors>);
  m.impl("img2gray.chw", &img2gray::img2gray_default_weights<img2gray::img2gray_cuda_tensors, img2gray::kChwDim>);
  m.impl("img2gray.hwc", &img2gray::img2gray_default_weights<img2gray::img2gray_cuda_tensors, img2gray::kHwcDim>);
}
#endif
