// The CUDA entry point, free of ATen: the binding plans the call (layout.h) and hands over raw pointers, so the
// CUDA translation unit compiles without ATen's headers (nvcc parses them once per architecture: a build for the
// release's capabilities took 24% longer with them), and both bindings (the exact one and the stable-ABI one) call it.
#pragma once

#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>

#include "layout.h"

namespace img2gray {

// Preconditions as for img2gray_cpu (img2gray_cpu.h; checked by the bindings), with `plan` made from `input`, both
// pointers on CUDA device `device`, `dtype` one of uint8, float16, bfloat16, float32, float64, and `weights`
// pointing at three numbers.
void img2gray_cuda(const Plan& plan, c10::ScalarType dtype, const void* input, void* out, const double* weights,
                   int32_t device);

}  // namespace img2gray
