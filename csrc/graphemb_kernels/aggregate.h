// The CSR aggregation of GNN layers, its source rows prefetched (aggregate.cpp).
#pragma once

#include <torch/extension.h>

#include <optional>

// out (R, F): row r = sum over e in [crow[r], crow[r + 1]) of values[e] (1 when absent) *
// dense[col[e]], divided by the row's entry count when mean (rows without entries: 0).
at::Tensor csr_aggregate(const at::Tensor& crow, const at::Tensor& col,
                         const std::optional<at::Tensor>& values, const at::Tensor& dense,
                         bool mean);

// Adds the function above to the module.
void bind_aggregate(pybind11::module_& module);
