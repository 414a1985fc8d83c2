// CUDA entry point: dtype dispatch onto the kernels of img2gray_kernels.cuh. All launches go to the
// current stream of the input's device (graph capture included). No ATen header (img2gray_cuda.h).
// Compiled for either build: with TORCH_TARGET_VERSION (the stable-ABI build) the device guard, the current
// stream and the launch check come from torch's stable C shims instead of c10/cuda.
#ifdef TORCH_TARGET_VERSION
#include <torch/csrc/inductor/aoti_torch/c/shim.h>  // aoti_torch_get_current_cuda_stream (under USE_CUDA)
#include <torch/csrc/stable/accelerator.h>
#include <torch/headeronly/util/Exception.h>

#include <optional>
#else
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "img2gray.h"
#include "img2gray_cuda.h"
#include "img2gray_kernels.cuh"
#include "layout.h"

namespace img2gray {
namespace {

template <typename scalar_t>
void run(const Plan& plan, const void* input, void* out, const double* weights, int device, cudaStream_t stream) {
  kernels::launch<scalar_t>(static_cast<const scalar_t*>(input), static_cast<scalar_t*>(out), plan,
                            weights_as<acc_t<scalar_t>>(weights), device, stream);
}

}  // namespace

void img2gray_cuda(const Plan& plan, c10::ScalarType dtype, const void* input, void* out, const double* weights,
                   int32_t device) {
#ifdef TORCH_TARGET_VERSION
  // A guard only off the current device: the stable one is created and freed inside torch on every call (the exact
  // build's CUDAGuard lives on the stack), and most calls run on the current device. The current device is the CUDA
  // runtime's, which torch's CUDA guard reads too (c10::cuda::GetDevice), without the stable accelerator API's
  // generic path through torch (which accelerator, then its guard implementation) on every call.
  int current_device = -1;
  STD_TORCH_CHECK(cudaGetDevice(&current_device) == cudaSuccess, "img2gray: cannot read the current CUDA device");
  std::optional<torch::stable::accelerator::DeviceGuard> guard;
  if (current_device != device) guard.emplace(device);
  void* current = nullptr;
  STD_TORCH_CHECK(aoti_torch_get_current_cuda_stream(device, &current) == AOTI_TORCH_SUCCESS,
                  "img2gray: cannot get the current CUDA stream of device ", device);
  const auto stream = static_cast<cudaStream_t>(current);
#else
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device));
#endif
  switch (dtype) {
    case c10::ScalarType::Byte: run<uint8_t>(plan, input, out, weights, device, stream); break;
    case c10::ScalarType::Half: run<c10::Half>(plan, input, out, weights, device, stream); break;
    case c10::ScalarType::BFloat16: run<c10::BFloat16>(plan, input, out, weights, device, stream); break;
    case c10::ScalarType::Float: run<float>(plan, input, out, weights, device, stream); break;
    case c10::ScalarType::Double: run<double>(plan, input, out, weights, device, stream); break;
    default: STD_TORCH_CHECK(false, "img2gray_cuda: unsupported dtype");  // the binding checked it already
  }
#ifdef TORCH_TARGET_VERSION
  const cudaError_t launched = cudaGetLastError();
  STD_TORCH_CHECK(launched == cudaSuccess, "img2gray: CUDA kernel launch failed: ", cudaGetErrorString(launched));
#else
  C10_CUDA_KERNEL_LAUNCH_CHECK();
#endif
}

}  // namespace img2gray
