// The neighbour aggregation of GNN layers: a CSR x dense product, summed or averaged per row.
//
// In every layer, forward and backward, each destination (each source, for the backward's
// transposed matrix) reads the rows of its neighbours at scattered ids: each row read is a
// cache miss, and torch's row-parallel kernel (_sparse_mm_reduce_impl, what PyG's SAGEConv
// runs on adj_t) waits on them one at a time and zero-fills its output first. This loop
// prefetches the row kAhead entries ahead, so several misses are in flight at once, and
// writes each output row once. The arithmetic is torch's: products summed in the tensor's
// dtype in the entries' order, divided by the entry count for the mean.
//
// The aggregation splits its rows into tasks of about equal work (entries + rows), since
// a hub row can hold a large share of the entries, and threads take them from a shared
// counter (tasks.h).

#include "aggregate.h"
#include "tasks.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int64_t kAhead = 8;  // prefetch distance, in entries
constexpr int64_t kCacheLine = 64;

inline void prefetch_row(const char* row, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += kCacheLine) __builtin_prefetch(row + b);
}

void check_index(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kLong, "graphemb_kernels: ", name,
                   " must be int64, got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.device().is_cpu() && t.dim() == 1 && t.is_contiguous(),
                    "graphemb_kernels: ", name, " must be a contiguous 1-D CPU tensor");
}

// One task's rows [begin, end) of the aggregation; F columns.
template <typename T>
inline __attribute__((always_inline)) void aggregate_range(const int64_t* crow,
                                                           const int64_t* col, const T* values,
                                                           const T* dense, int64_t F, bool mean,
                                                           T* out, int64_t begin, int64_t end) {
  const int64_t last = crow[end];
  const int64_t row_bytes = F * static_cast<int64_t>(sizeof(T));
  for (int64_t r = begin; r < end; ++r) {
    T* o = out + r * F;
    for (int64_t f = 0; f < F; ++f) o[f] = T(0);
    const int64_t e0 = crow[r], e1 = crow[r + 1];
    for (int64_t e = e0; e < e1; ++e) {
      if (e + kAhead < last) {
        prefetch_row(reinterpret_cast<const char*>(dense + col[e + kAhead] * F), row_bytes);
      }
      const T* d = dense + col[e] * F;
      const T w = values != nullptr ? values[e] : T(1);
      for (int64_t f = 0; f < F; ++f) o[f] += w * d[f];
    }
    if (mean && e1 > e0) {
      const T count = static_cast<T>(e1 - e0);
      for (int64_t f = 0; f < F; ++f) o[f] /= count;
    }
  }
}

__attribute__((target_clones("avx2", "default"))) void aggregate_floats(
    const int64_t* crow, const int64_t* col, const float* values, const float* dense, int64_t F,
    bool mean, float* out, int64_t begin, int64_t end) {
  aggregate_range(crow, col, values, dense, F, mean, out, begin, end);
}

__attribute__((target_clones("avx2", "default"))) void aggregate_doubles(
    const int64_t* crow, const int64_t* col, const double* values, const double* dense,
    int64_t F, bool mean, double* out, int64_t begin, int64_t end) {
  aggregate_range(crow, col, values, dense, F, mean, out, begin, end);
}

// Task boundaries: rows [bounds[k], bounds[k + 1]) hold about equal shares of
// entries + rows (crow[r] + r is non-decreasing in r).
std::vector<int64_t> balanced_bounds(const int64_t* crow, int64_t rows, int64_t tasks) {
  std::vector<int64_t> bounds(tasks + 1, rows);
  bounds[0] = 0;
  const int64_t total = crow[rows] + rows;
  for (int64_t k = 1; k < tasks; ++k) {
    const int64_t target = total * k / tasks;
    int64_t lo = bounds[k - 1], hi = rows;
    while (lo < hi) {  // first r with crow[r] + r >= target
      const int64_t mid = lo + (hi - lo) / 2;
      if (crow[mid] + mid < target) lo = mid + 1; else hi = mid;
    }
    bounds[k] = lo;
  }
  return bounds;
}

}  // namespace

at::Tensor csr_aggregate(const at::Tensor& crow, const at::Tensor& col,
                         const std::optional<at::Tensor>& values, const at::Tensor& dense,
                         bool mean) {
  RECORD_FUNCTION("graphemb_kernels::csr_aggregate", std::vector<c10::IValue>());
  check_index(crow, "crow");
  check_index(col, "col");
  TORCH_CHECK_VALUE(dense.device().is_cpu() && dense.is_contiguous() && dense.dim() == 2,
                    "graphemb_kernels.csr_aggregate: dense must be a contiguous 2-D CPU tensor");
  TORCH_CHECK_VALUE(crow.numel() >= 1, "graphemb_kernels.csr_aggregate: crow is empty");
  const int64_t rows = crow.numel() - 1, F = dense.size(1);
  const int64_t* c = crow.data_ptr<int64_t>();
  TORCH_CHECK_VALUE(c[0] == 0 && c[rows] == col.numel(),
                    "graphemb_kernels.csr_aggregate: crow must run from 0 to the ", col.numel(),
                    " entries, got ", c[0], " to ", c[rows]);
  if (values.has_value()) {
    TORCH_CHECK_VALUE(values->scalar_type() == dense.scalar_type() && values->is_contiguous() &&
                          values->numel() == col.numel(),
                      "graphemb_kernels.csr_aggregate: values must be contiguous, one per "
                      "entry, of dense's dtype");
  }
  at::Tensor out = at::empty({rows, F}, dense.options());
  // many more tasks than threads, taken from a shared counter (tasks.h)
  const int64_t threads = at::get_num_threads();
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(rows, 16 * threads));
  const std::vector<int64_t> bounds = balanced_bounds(c, rows, tasks);
  const int64_t* k = col.data_ptr<int64_t>();
  auto run = [&](auto&& body) {
    for_each_task(tasks, [&](int64_t t) { body(bounds[t], bounds[t + 1]); });
  };
  if (dense.scalar_type() == at::kFloat) {
    const float* v = values.has_value() ? values->data_ptr<float>() : nullptr;
    const float* d = dense.data_ptr<float>();
    float* o = out.data_ptr<float>();
    run([&](int64_t b, int64_t e) { aggregate_floats(c, k, v, d, F, mean, o, b, e); });
  } else {
    TORCH_CHECK_TYPE(dense.scalar_type() == at::kDouble,
                     "graphemb_kernels.csr_aggregate: dense must be float32 or float64, got ",
                     dense.scalar_type());
    const double* v = values.has_value() ? values->data_ptr<double>() : nullptr;
    const double* d = dense.data_ptr<double>();
    double* o = out.data_ptr<double>();
    run([&](int64_t b, int64_t e) { aggregate_doubles(c, k, v, d, F, mean, o, b, e); });
  }
  return out;
}

void bind_aggregate(pybind11::module_& module) {
  module.def("csr_aggregate", &csr_aggregate,
             "CSR (crow, col, values or None) x dense (N, F) -> (R, F), summed or averaged per "
             "row (rows without entries: 0), source rows prefetched ahead",
             pybind11::arg("crow"), pybind11::arg("col"), pybind11::arg("values"),
             pybind11::arg("dense"), pybind11::arg("mean"),
             pybind11::call_guard<pybind11::gil_scoped_release>());
}
