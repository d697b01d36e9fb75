// Dropout's masked scaling from a counter-based hash (dropout.cpp).
#pragma once

#include <torch/extension.h>

// out[i] = x[i] * scale if hash(key, i) >= threshold else 0, over x's elements in memory
// order (x contiguous, float32 or float64, on CPU). The same call maps the gradient.
at::Tensor dropout_masked_scale(const at::Tensor& x, int64_t threshold, double scale,
                                int64_t key);

// Adds the function above to the module.
void bind_dropout(pybind11::module_& module);
