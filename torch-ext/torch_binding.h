#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include "layout.h"

namespace img2gray {

// Device kernels. Preconditions (checked by the binding): `input` has 3 channels at the channel dim, a
// supported dtype and at least one element, and `plan` is its make_plan (layout.h); `out` is contiguous, of
// the output shape, dtype and device, and does not overlap `input`; `weights` holds three finite numbers.
void img2gray_cpu(const at::Tensor& input, const Plan& plan, at::ArrayRef<double> weights, at::Tensor& out);
// The CUDA kernel takes raw pointers instead (csrc/img2gray_cuda.h); torch_binding.cpp adapts it.

}  // namespace img2gray
