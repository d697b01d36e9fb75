// Integer edge lists parsed on all threads (edge_list.cpp).
#pragma once

#include <torch/extension.h>

#include <optional>
#include <string>
#include <tuple>

std::optional<std::tuple<at::Tensor, at::Tensor, int64_t, int64_t, bool>>
parse_integer_edges(const std::string& path, int64_t skip_lines, const std::string& delimiter,
                    int64_t columns, bool weighted, int64_t parts);
