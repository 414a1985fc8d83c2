#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

namespace img2gray {

// Device kernels. Preconditions (checked by the binding): `input` has 3 channels at `dim` (already
// wrapped), a supported dtype and at least one element; `out` is contiguous, of the output shape, dtype
// and device, and does not overlap `input`; `weights` holds three finite numbers.
void img2gray_cpu(const at::Tensor& input, int64_t dim, at::ArrayRef<double> weights, at::Tensor& out);
// The CUDA kernel takes a plan and raw pointers instead (csrc/img2gray_cuda.h); torch_binding.cpp adapts it.

}  // namespace img2gray
