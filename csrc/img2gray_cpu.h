// The CPU entry point, free of ATen (as the CUDA one, img2gray_cuda.h): both bindings, the exact one and the
// stable-ABI one, plan the call (layout.h) and hand over raw pointers.
#pragma once

#include <torch/headeronly/core/ScalarType.h>

#include "layout.h"

namespace img2gray {

// Preconditions (checked by the bindings): `input` has 3 channels at the channel dim, a supported dtype
// (uint8, float16, bfloat16, float32, float64) and at least one element, and `plan` is its make_plan; `out` is
// contiguous, of the output shape and dtype, and does not overlap `input`; `weights` points at three finite numbers.
void img2gray_cpu(const Plan& plan, c10::ScalarType dtype, const void* input, void* out, const double* weights);

}  // namespace img2gray
