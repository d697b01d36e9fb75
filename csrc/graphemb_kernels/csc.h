// Compressed sparse column arrays from an edge list (csc.cpp).
#pragma once

#include <torch/extension.h>

#include <functional>
#include <tuple>

std::tuple<at::Tensor, at::Tensor, at::Tensor> csc_from_edges(
    const at::Tensor& src, const at::Tensor& dst, int64_t num_nodes, bool undirected,
    const std::function<std::tuple<at::Tensor, at::Tensor>(int64_t)>& allocate);
