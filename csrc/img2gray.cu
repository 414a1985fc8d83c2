// CUDA entry point: dtype dispatch onto the kernels of img2gray_kernels.cuh. All launches go to the
// current stream of the input's device (graph capture included). No ATen header (img2gray_cuda.h).
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "img2gray.h"
#include "img2gray_cuda.h"
#include "img2gray_kernels.cuh"
#include "layout.h"

namespace img2gray {
namespace {

template <typename scalar_t>
void run(const Plan& plan, const void* input, void* out, c10::ArrayRef<double> weights, int device,
         cudaStream_t stream) {
  kernels::launch<scalar_t>(static_cast<const scalar_t*>(input), static_cast<scalar_t*>(out), plan,
                            weights_as<acc_t<scalar_t>>(weights.data()), device, stream);
}

}  // namespace

void img2gray_cuda(const Plan& plan, c10::ScalarType dtype, const void* input, void* out, c10::ArrayRef<double> weights,
                   c10::DeviceIndex device) {
  const c10::cuda::CUDAGuard guard(device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device);
  switch (dtype) {
    case c10::ScalarType::Byte: run<uint8_t>(plan, input, out, weights, device, stream); break;
    case c10::ScalarType::Half: run<c10::Half>(plan, input, out, weights, device, stream); break;
    case c10::ScalarType::BFloat16: run<c10::BFloat16>(plan, input, out, weights, device, stream); break;
    case c10::ScalarType::Float: run<float>(plan, input, out, weights, device, stream); break;
    case c10::ScalarType::Double: run<double>(plan, input, out, weights, device, stream); break;
    default: TORCH_CHECK(false, "img2gray_cuda: unsupported dtype ", dtype);  // the binding checked it already
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace img2gray
