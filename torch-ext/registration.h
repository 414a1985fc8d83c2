// Registration macros that expand TORCH_EXTENSION_NAME before TORCH_LIBRARY pastes it into a symbol,
// so every build registers its ops under its own namespace (`_img2gray_<build id>`).
#pragma once

#include <torch/library.h>

#define IMG2GRAY_STRINGIFY_(x) #x
#define IMG2GRAY_STRINGIFY(x) IMG2GRAY_STRINGIFY_(x)

#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
