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
// counter (common/parallel.h).

#include "common/errors.h"
#include "common/parallel.h"
#include "graphemb_kernels.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ge {
namespace {

constexpr int64_t kAhead = 8;  // prefetch distance, in entries
constexpr int64_t kCacheLine = 64;

inline void prefetch_row(const char* row, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += kCacheLine) __builtin_prefetch(row + b);
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

// out = the aggregation of rows [0, rows), in tasks of about equal work.
template <typename T, typename Kernel>
void aggregate(const int64_t* c, int64_t rows, const int64_t* k, const T* v, const T* d,
               int64_t F, bool mean, T* o, Kernel kernel) {
  // many more tasks than threads, taken from a shared counter (common/parallel.h)
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(rows, 16 * num_threads()));
  const std::vector<int64_t> bounds = balanced_bounds(c, rows, tasks);
  for_each_task(tasks, [&](int64_t t) { kernel(c, k, v, d, F, mean, o, bounds[t], bounds[t + 1]); });
}

}  // namespace
}  // namespace ge

extern "C" int ge_csr_aggregate(const int64_t* crow, int64_t rows, const int64_t* col,
                                int64_t entries, const void* values, const void* dense,
                                int64_t dense_rows, int64_t features, int dtype, int mean,
                                void* out) {
  using namespace ge;
  return guarded([&] {
    require(rows >= 0 && crow[0] == 0 && crow[rows] == entries, GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate: crow must run from 0 to the ", entries,
            " entries, got ", crow[0], " to ", crow[rows]);
    for (int64_t e = 0; e < entries; ++e) {
      require(static_cast<uint64_t>(col[e]) < static_cast<uint64_t>(dense_rows), GE_INDEX_ERROR,
              "graphemb_kernels.csr_aggregate: col[", e, "] = ", col[e],
              " is out of range for dense of ", dense_rows, " rows");
    }
    if (dtype == GE_FLOAT32) {
      aggregate(crow, rows, col, static_cast<const float*>(values),
                static_cast<const float*>(dense), features, mean != 0, static_cast<float*>(out),
                aggregate_floats);
      return;
    }
    require(dtype == GE_FLOAT64, GE_TYPE_ERROR,
            "graphemb_kernels.csr_aggregate: dense must be float32 or float64");
    aggregate(crow, rows, col, static_cast<const double*>(values),
              static_cast<const double*>(dense), features, mean != 0, static_cast<double*>(out),
              aggregate_doubles);
  });
}
