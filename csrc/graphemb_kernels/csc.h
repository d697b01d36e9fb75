// Compressed sparse column arrays from an edge list (csc.cpp).
#pragma once

#include <torch/extension.h>

at::Tensor csc_from_edges(const at::Tensor& src, const at::Tensor& dst, int64_t num_nodes,
                          bool undirected, at::Tensor indices, at::Tensor edge_ids);
