// Uniform neighbour sampling without replacement into DGL-style blocks (sampler.cpp).
#pragma once

#include <torch/extension.h>

#include <tuple>
#include <vector>

// One layer's draws: (src (E,) global ids, seed position (E,), CSC positions (E,)).
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_layer(const at::Tensor& indptr,
                                                            const at::Tensor& indices,
                                                            const at::Tensor& seeds,
                                                            int64_t fanout, int64_t key);

// Every layer, seeds outwards: per layer (src_nodes, edge_index (2, E), positions, rowptr).
std::vector<std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>> sample_blocks(
    const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& seeds,
    const std::vector<int64_t>& fanouts, int64_t key, const at::Tensor& marker,
    int64_t scan_fraction);

// Adds the functions above to the module.
void bind_sampler(pybind11::module_& module);
