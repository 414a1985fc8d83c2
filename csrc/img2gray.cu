// CUDA entry point: dtype dispatch onto the kernels of img2gray_kernels.cuh. All launches go to the
// current stream of the input's device (graph capture included).
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAMacros.h>
#include <c10/cuda/CUDAStream.h>

#include "img2gray.h"
#include "img2gray_kernels.cuh"
#include "layout.h"

namespace img2gray {

void img2gray_cuda(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out) {
  const c10::cuda::CUDAGuard guard(input.device());
  const Plan plan = make_plan(input, dim);
  const int device = input.device().index();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device);
  AT_DISPATCH_FLOATING_TYPES_AND3(at::kByte, at::kHalf, at::kBFloat16, input.scalar_type(), "img2gray_cuda", [&] {
    using acc = acc_t<scalar_t>;
    const Weights<acc> w{static_cast<acc>(weights[0]), static_cast<acc>(weights[1]), static_cast<acc>(weights[2])};
    kernels::launch<scalar_t>(input.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), plan, w, device,
                              stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace img2gray
