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
//
// The backward (ge_csr_aggregate_transposed) needs the transposed product, out = A^T g.
// Building A^T is a sort of the entries by column, which cost about as much as the product
// (GraphSAGE's three blocks of a batch: 15 ms of sorting beside 21 ms of products).
// Instead each thread walks the rows of A in order and adds w * g[r] into the output rows
// of its own range of columns, so no output row is written by two threads: g is read in
// order, once, and the output rows are written where the entries point, each prefetched
// kAhead entries ahead. Each output row's sum is taken in increasing row order, from 0:
// the order of the transposed matrix's own product, so both give the same floats.

#include "common/errors.h"
#include "common/parallel.h"
#include "graphemb_kernels.h"
#include "nn/hashed_mask.h"

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
                                                           const HashedMask<T>& mask, T* out,
                                                           int64_t begin, int64_t end) {
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
      if (mask.masked) {  // the dropout's output, d[f] * factor, as it is read
        mask.for_each_factor(col[e] * F, F,
                             [&](auto f, T factor) { o[f] += w * (d[f] * factor); });
      } else {
        for (int64_t f = 0; f < F; ++f) o[f] += w * d[f];
      }
    }
    if (mean && e1 > e0) {
      const T count = static_cast<T>(e1 - e0);
      for (int64_t f = 0; f < F; ++f) o[f] /= count;
    }
  }
}

__attribute__((target_clones("avx2", "default"))) void aggregate_floats(
    const int64_t* crow, const int64_t* col, const float* values, const float* dense, int64_t F,
    bool mean, const HashedMask<float>& mask, float* out, int64_t begin, int64_t end) {
  aggregate_range(crow, col, values, dense, F, mean, mask, out, begin, end);
}

__attribute__((target_clones("avx2", "default"))) void aggregate_doubles(
    const int64_t* crow, const int64_t* col, const double* values, const double* dense,
    int64_t F, bool mean, const HashedMask<double>& mask, double* out, int64_t begin,
    int64_t end) {
  aggregate_range(crow, col, values, dense, F, mean, mask, out, begin, end);
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
               int64_t F, bool mean, const HashedMask<T>& mask, T* o, Kernel kernel) {
  // many more tasks than threads, taken from a shared counter (common/parallel.h)
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(rows, 16 * num_threads()));
  const std::vector<int64_t> bounds = balanced_bounds(c, rows, tasks);
  for_each_task(tasks,
                [&](int64_t t) { kernel(c, k, v, d, F, mean, mask, o, bounds[t], bounds[t + 1]); });
}

// Columns [bounds[p], bounds[p + 1]) of the transposed product: about equal entries each,
// read from a histogram of the columns in at most 4096 bins (a scan of col; every column
// checked against `columns` on the way).
std::vector<int64_t> column_parts(const int64_t* col, int64_t entries, int64_t columns,
                                  int64_t parts) {
  const int64_t bins = std::max<int64_t>(1, std::min<int64_t>(columns, 4096));
  std::vector<int64_t> histogram(bins + 1, 0);
  for (int64_t e = 0; e < entries; ++e) {
    require(static_cast<uint64_t>(col[e]) < static_cast<uint64_t>(columns), GE_INDEX_ERROR,
            "graphemb_kernels.csr_aggregate_transposed: col[", e, "] = ", col[e],
            " is out of range for ", columns, " output rows");
    ++histogram[col[e] * bins / columns + 1];
  }
  for (int64_t b = 0; b < bins; ++b) histogram[b + 1] += histogram[b];
  std::vector<int64_t> bounds(parts + 1, columns);
  bounds[0] = 0;
  int64_t bin = 0;
  for (int64_t p = 1; p < parts; ++p) {
    while (bin < bins && histogram[bin] < entries * p / parts) ++bin;
    bounds[p] = std::max(bounds[p - 1], (bin * columns + bins - 1) / bins);
  }
  return bounds;
}

// Output rows [lo, hi) of out (columns, F) = A^T (w g) (+ addend on its first rows): A's
// rows in order, each entry in [lo, hi) added into its output row, zeroed on first touch.
template <typename T>
inline __attribute__((always_inline)) void scatter_range(const int64_t* crow, int64_t rows,
                                                         const int64_t* col, const T* grad,
                                                         int64_t F, bool mean, const T* addend,
                                                         int64_t addend_rows,
                                                         const HashedMask<T>& mask, T* out,
                                                         uint8_t* touched, int64_t lo,
                                                         int64_t hi) {
  const int64_t row_bytes = F * static_cast<int64_t>(sizeof(T));
  const int64_t last = crow[rows];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t e0 = crow[r], e1 = crow[r + 1];
    if (e0 == e1) continue;
    const T w = mean ? T(1) / static_cast<T>(e1 - e0) : T(1);  // the transpose's values
    const T* g = grad + r * F;
    for (int64_t e = e0; e < e1; ++e) {
      if (e + kAhead < last) {
        const int64_t ahead = col[e + kAhead];
        if (ahead >= lo && ahead < hi)
          prefetch_row(reinterpret_cast<const char*>(out + ahead * F), row_bytes);
      }
      const int64_t c = col[e];
      if (c < lo || c >= hi) continue;
      T* o = out + c * F;
      if (!touched[c]) {
        touched[c] = 1;
        for (int64_t f = 0; f < F; ++f) o[f] = T(0);
      }
      for (int64_t f = 0; f < F; ++f) o[f] += w * g[f];
    }
  }
  for (int64_t c = lo; c < hi; ++c) {
    T* o = out + c * F;
    if (!touched[c])
      for (int64_t f = 0; f < F; ++f) o[f] = T(0);
    if (c < addend_rows)
      for (int64_t f = 0; f < F; ++f) o[f] += addend[c * F + f];
    if (mask.masked)  // the dropout's backward on the summed row
      mask.for_each_factor(c * F, F, [&](auto f, T factor) { o[f] *= factor; });
  }
}

__attribute__((target_clones("avx2", "default"))) void scatter_floats(
    const int64_t* crow, int64_t rows, const int64_t* col, const float* grad, int64_t F,
    bool mean, const float* addend, int64_t addend_rows, const HashedMask<float>& mask,
    float* out, uint8_t* touched, int64_t lo, int64_t hi) {
  scatter_range(crow, rows, col, grad, F, mean, addend, addend_rows, mask, out, touched, lo, hi);
}

__attribute__((target_clones("avx2", "default"))) void scatter_doubles(
    const int64_t* crow, int64_t rows, const int64_t* col, const double* grad, int64_t F,
    bool mean, const double* addend, int64_t addend_rows, const HashedMask<double>& mask,
    double* out, uint8_t* touched, int64_t lo, int64_t hi) {
  scatter_range(crow, rows, col, grad, F, mean, addend, addend_rows, mask, out, touched, lo, hi);
}

// out = A^T (w g) (+ addend), one part of the columns per thread.
template <typename T, typename Kernel>
void aggregate_transposed(const int64_t* crow, int64_t rows, const int64_t* col,
                          int64_t entries, const T* grad, int64_t F, bool mean,
                          const T* addend, int64_t addend_rows, const HashedMask<T>& mask,
                          T* out, int64_t columns, Kernel kernel) {
  // Every part reads all of A's rows: as many parts as threads, no more.
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(columns, num_threads()));
  const std::vector<int64_t> bounds = column_parts(col, entries, columns, parts);
  std::vector<uint8_t> touched(columns, 0);
  for_each_task(parts, [&](int64_t p) {
    kernel(crow, rows, col, grad, F, mean, addend, addend_rows, mask, out, touched.data(),
           bounds[p], bounds[p + 1]);
  });
}

template <typename T>
HashedMask<T> mask_of(const ge_dropout_mask* mask) {
  if (mask == nullptr) return HashedMask<T>{false, 0, T(0), 0};
  return HashedMask<T>{true, mask->threshold, static_cast<T>(mask->scale), mask->key};
}

}  // namespace
}  // namespace ge

extern "C" int ge_csr_aggregate_transposed(const int64_t* crow, int64_t rows,
                                           const int64_t* col, int64_t entries,
                                           const void* grad, int64_t features, int dtype,
                                           int mean, const void* addend, int64_t addend_rows,
                                           const ge_dropout_mask* mask, void* out,
                                           int64_t out_rows) {
  using namespace ge;
  return guarded([&] {
    require(rows >= 0 && crow[0] == 0 && crow[rows] == entries, GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate_transposed: crow must run from 0 to the ", entries,
            " entries, got ", crow[0], " to ", crow[rows]);
    require(addend_rows >= 0 && addend_rows <= out_rows, GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate_transposed: addend has ", addend_rows,
            " rows, more than the ", out_rows, " output rows");
    if (dtype == GE_FLOAT32) {
      aggregate_transposed(crow, rows, col, entries, static_cast<const float*>(grad), features,
                           mean != 0, static_cast<const float*>(addend), addend_rows,
                           mask_of<float>(mask), static_cast<float*>(out), out_rows,
                           scatter_floats);
      return;
    }
    require(dtype == GE_FLOAT64, GE_TYPE_ERROR,
            "graphemb_kernels.csr_aggregate_transposed: grad must be float32 or float64");
    aggregate_transposed(crow, rows, col, entries, static_cast<const double*>(grad), features,
                         mean != 0, static_cast<const double*>(addend), addend_rows,
                         mask_of<double>(mask), static_cast<double*>(out), out_rows,
                         scatter_doubles);
  });
}

extern "C" int ge_csr_aggregate(const int64_t* crow, int64_t rows, const int64_t* col,
                                int64_t entries, const void* values, const void* dense,
                                int64_t dense_rows, int64_t features, int dtype, int mean,
                                const ge_dropout_mask* mask, void* out) {
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
                static_cast<const float*>(dense), features, mean != 0, mask_of<float>(mask),
                static_cast<float*>(out), aggregate_floats);
      return;
    }
    require(dtype == GE_FLOAT64, GE_TYPE_ERROR,
            "graphemb_kernels.csr_aggregate: dense must be float32 or float64");
    aggregate(crow, rows, col, static_cast<const double*>(values),
              static_cast<const double*>(dense), features, mean != 0, mask_of<double>(mask),
              static_cast<double*>(out), aggregate_doubles);
  });
}
