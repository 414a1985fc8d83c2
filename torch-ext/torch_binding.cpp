// The operator's schema (declared once) and its per-device registrations.
//
// Error messages never stream numbers into a std::ostream (c10::str does that for int and double
// arguments): on the H200 image (torch 2.11, gcc 13.3) std::ostream::_M_insert<long> crashed inside the
// extension. Numbers are turned into text with std::to_string first.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <string>
#include <vector>

#include "img2gray_cpu.h"
#include "layout.h"
#include "registration.h"
#ifdef IMG2GRAY_WITH_CUDA
#include "img2gray_cuda.h"
#endif

namespace img2gray {
namespace {

using Kernel = void (*)(const at::Tensor&, const Plan&, at::ArrayRef<double>, at::Tensor&);

template <typename T>
std::string describe(at::ArrayRef<T> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

int64_t checked_channel_dim(const at::Tensor& input, int64_t dim) {
  TORCH_CHECK(input.dim() >= 1, "img2gray: expected an image tensor with a channel dimension of size 3, "
                    "got a 0-d tensor");
  dim = c10::maybe_wrap_dim(dim, input.dim());
  TORCH_CHECK(input.size(dim) == 3, "img2gray: expected 3 channels (R, G, B) at dim ", std::to_string(dim),
              ", got size ", std::to_string(input.size(dim)), " in input of shape ", describe(input.sizes()),
              "; use dim=-3 for (..., 3, H, W) tensors and dim=-1 for (..., H, W, 3) images");
  return dim;
}

void check_dtype(const at::Tensor& input) {
  const auto dtype = input.scalar_type();
  TORCH_CHECK(dtype == at::kByte || dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat ||
                  dtype == at::kDouble,
              "img2gray: unsupported dtype ", dtype,
              "; supported are uint8, float16, bfloat16, float32 and float64 (convert with .to(torch.float32))");
}

void check_weights(at::ArrayRef<double> weights, at::ScalarType dtype) {
  TORCH_CHECK(weights.size() == 3, "img2gray: expected 3 channel weights (R, G, B), got ",
              std::to_string(weights.size()));
  // Checked in the precision they are applied in: float64 for float64 inputs, float32 for every other
  // dtype (acc_t), where e.g. 1e39 is already inf.
  const bool in_double = dtype == at::kDouble;
  for (double w : weights) {
    const bool finite = in_double ? std::isfinite(w) : std::isfinite(static_cast<float>(w));
    TORCH_CHECK(finite, "img2gray: channel weights must be finite in ", in_double ? "float64" : "float32",
                " (the precision they are applied in for this input dtype), got ", describe(weights));
  }
}

std::vector<int64_t> output_shape(const at::Tensor& input, int64_t dim) {
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  shape[dim] = 1;
  return shape;
}

int64_t checked_inputs(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights) {
  check_dtype(input);
  check_weights(weights, input.scalar_type());
  return checked_channel_dim(input, dim);
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
  at::Tensor out = at::empty(output_shape(input, dim), input.options());
  return run_into(kernel, input, dim, weights, out);
}

template <Kernel kernel>
void img2gray_out(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out) {
  dim = checked_inputs(input, dim, weights);
  TORCH_CHECK(out.device() == input.device(), "img2gray: out is on ", out.device().str(), " but input is on ",
              input.device().str(), "; both must be on the same device");
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), "img2gray: out has dtype ", out.scalar_type(),
                    " but input has dtype ", input.scalar_type(), "; out must have the input's dtype");
  const auto expected = output_shape(input, dim);
  TORCH_CHECK(out.sizes() == at::IntArrayRef(expected), "img2gray: out has shape ", describe(out.sizes()),
              " but the result has shape ", describe(at::IntArrayRef(expected)));
  at::assert_no_internal_overlap(out);
  // Not at::assert_no_overlap: it lets through any pair it finds too hard to decide (a non-dense input), and a
  // contiguous out inside a strided input's memory was then read after being written.
  TORCH_CHECK(!extents_intersect(memory_extent(out.const_data_ptr(), out.sizes(), out.strides(), out.element_size()),
                                 memory_extent(input.const_data_ptr(), input.sizes(), input.strides(),
                                               input.element_size())),
              "img2gray: out overlaps the input's memory (some elements of out and input may refer to a single memory "
              "location); write into a tensor that shares no memory with the input, or clone() the input");
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

at::Tensor img2gray_autograd(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights) {
  // Inference calls skip the graph node and its saved state altogether.
  if (!(at::GradMode::is_enabled() && input.requires_grad())) {
    return Img2grayFunction::call_below_autograd(input, dim, weights);
  }
  return Img2grayFunction::apply(input, dim, weights.vec());
}

// The out= overload records no graph, so with a gradient required it refuses, as torch's own out= ops do
// (torch.mul(x, 2, out=o) with x.requires_grad); without this kernel it silently returned `out` detached.
void img2gray_out_autograd(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && (input.requires_grad() || out.requires_grad())),
              "img2gray.out(): functions with out=... arguments don't support automatic differentiation, but one "
              "of the arguments requires grad; call img2gray without out= (or under torch.no_grad())");
  at::AutoDispatchBelowAutograd below_autograd;  // ADInplaceOrView still bumps out's version counter
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow(IMG2GRAY_STRINGIFY(TORCH_EXTENSION_NAME) "::img2gray", "out")
                             .typed<void(const at::Tensor&, int64_t, at::ArrayRef<double>, at::Tensor&)>();
  op.call(input, dim, weights, out);
}

// The schemas, shared by this build's namespace and the public `img2gray` namespace.
constexpr const char* kSchema = "img2gray(Tensor input, int dim=-3, float[] weights=[0.299, 0.587, 0.114]) -> Tensor";
// Returns nothing: custom ops may mutate `out` but not return an alias of it (functionalization).
constexpr const char* kOutSchema =
    "img2gray.out(Tensor input, int dim=-3, float[] weights=[0.299, 0.587, 0.114], *, Tensor(a!) out) -> ()";

// `torch.ops.img2gray.img2gray` is the documented entry point. Each build registers under its own namespace
// so that several can be loaded in one process; the first one loaded also defines the public name, which
// forwards to its own op through the dispatcher (CompositeImplicitAutograd: autograd and compile follow).
// In C++ rather than Python: a Python forwarding kernel measured 1.21x of a small call's floor.
at::Tensor public_img2gray(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow(IMG2GRAY_STRINGIFY(TORCH_EXTENSION_NAME) "::img2gray", "")
                             .typed<at::Tensor(const at::Tensor&, int64_t, at::ArrayRef<double>)>();
  return op.call(input, dim, weights);
}

void public_img2gray_out(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow(IMG2GRAY_STRINGIFY(TORCH_EXTENSION_NAME) "::img2gray", "out")
                             .typed<void(const at::Tensor&, int64_t, at::ArrayRef<double>, at::Tensor&)>();
  op.call(input, dim, weights, out);
}

// Runs once, when the library is loaded. The Library object must outlive the process's use of the op
// (its destructor would deregister it), so it is never freed.
bool define_public_alias() {
  if (c10::Dispatcher::singleton().findSchema({"img2gray::img2gray", ""}).has_value()) return false;
  auto* library = new torch::Library(torch::Library::FRAGMENT, "img2gray", std::nullopt, __FILE__, __LINE__);
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  library->def(kSchema, tags);
  library->def(kOutSchema, tags);
  library->impl("img2gray", torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd, &public_img2gray));
  library->impl("img2gray.out", torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd, &public_img2gray_out));
  return true;
}

}  // namespace
}  // namespace img2gray

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def(img2gray::kSchema, tags);
  m.def(img2gray::kOutSchema, tags);
}

// After this build's own namespace (static initialisers of one file run in order of definition).
static const bool img2gray_public_alias_defined = img2gray::define_public_alias();

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, Autograd, m) {
  m.impl("img2gray", &img2gray::img2gray_autograd);
  m.impl("img2gray.out", &img2gray::img2gray_out_autograd);
}

TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, m) {
  m.impl("img2gray", &img2gray::img2gray<img2gray::img2gray_cpu_tensors>);
  m.impl("img2gray.out", &img2gray::img2gray_out<img2gray::img2gray_cpu_tensors>);
}

#ifdef IMG2GRAY_WITH_CUDA
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, m) {
  m.impl("img2gray", &img2gray::img2gray<img2gray::img2gray_cuda_tensors>);
  m.impl("img2gray.out", &img2gray::img2gray_out<img2gray::img2gray_cuda_tensors>);
}
#endif
