// The CUDA entry point, free of ATen: the binding plans the call (layout.h) and hands over raw pointers, so the
// CUDA translation unit compiles without ATen's headers (nvcc parses them once per architecture: a build for the
// release's capabilities took 24% longer with them).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include "layout.h"

namespace img2gray {

// Preconditions as for the binding's device kernels (torch_binding.h), with `plan` made from `input`, both
// pointers on CUDA device `device`, and `dtype` one of uint8, float16, bfloat16, float32, float64.
void img2gray_cuda(const Plan& plan, c10::ScalarType dtype, const void* input, void* out, c10::ArrayRef<double> weights,
                   c10::DeviceIndex device);

}  // namespace img2gray
