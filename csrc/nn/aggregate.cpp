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
// torch builds A^T by a comparison sort of the entries (GraphSAGE's three blocks of a
// batch: 15 ms of sorting beside 21 ms of products). Here A^T's pattern comes from a
// parallel counting sort by column (each column's rows in increasing order; int32 indices
// where they fit), then each output row is a gather of g's rows like the forward's:
// written once, finished (addend, dropout) while it is in the cache. Measured on a
// sampled 620k-entry block, 64 features: 17-19 ms against 24 ms for threads that each
// walk all of A and add into the output rows of their own range of columns (random
// read-modify-writes all over the output), 40 ms against 22 with the dropout. Each output
// row's sum is taken in increasing row order, from 0: the order of the transposed
// matrix's own product, so both give the same floats.
//
// A GraphSAGE layer multiplies the aggregate and the destination's own row by two weight
// matrices and sums them. With `with_self` the forward writes each output row as the pair
// [aggregate | own row, dropped], so the layer takes one product of width 2F instead of two
// of width F and a second pass over its output; the backward's `paired` gradient is the
// same pair, whose second half is added to the own rows' gradient. With `relu` the rows are
// read through the ReLU of the layer below (its output never written), and the backward
// zeroes the gradient where that layer's output was not above 0.
//
// With `dense_ids` the forward reads source i's row at dense[dense_ids[i]]: a model's first
// layer aggregates the rows of the embedding table in place, instead of a lookup copying
// the batch's input rows out first (at 1M nodes, 290k rows of 256 bytes: as long as the
// aggregation itself). The dropout's mask and the element order stay those of the copy
// (source i's elements are i * F + f), so the floats are the copy's.
//
// The loops are compiled in the clones of common/clones.h: AVX-512, AVX2 and baseline,
// chosen at run time, all giving the same floats.

#include "common/clones.h"
#include "common/errors.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "graphemb_kernels.h"
#include "nn/hashed_mask.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace ge {
namespace {

constexpr int64_t kAhead = 8;  // prefetch distance, in entries
constexpr int64_t kTransposeGrain = 1 << 15;  // entries per thread of the transpose, at least

// x where it is not below 0: ReLU, NaN kept (as torch's relu).
template <typename T>
inline T positive(T x) {
  return x < T(0) ? T(0) : x;
}

// How the forward reads the dense rows: through a ReLU (relu), then dropped by the mask:
// the activation and the dropout between two layers, applied as the rows are read, so
// that neither is written out.
template <typename T>
struct Reading {
  HashedMask<T> mask;
  bool relu;

  // body(f, element first + f of dense as read) for f in [0, F), d = that row.
  template <typename Body>
  inline __attribute__((always_inline)) void row(const T* d, int64_t first, int64_t F,
                                                 Body body) const {
    if (relu && mask.masked) {
      mask.for_each_factor(first, F, [&](auto f, T factor) { body(f, positive(d[f]) * factor); });
    } else if (relu) {
      for (int64_t f = 0; f < F; ++f) body(f, positive(d[f]));
    } else if (mask.masked) {
      mask.for_each_factor(first, F, [&](auto f, T factor) { body(f, d[f] * factor); });
    } else {
      for (int64_t f = 0; f < F; ++f) body(f, d[f]);
    }
  }
};

// The dense rows the forward reads: source i's row at rows + ids[i] * F (ids null: i).
template <typename T>
struct SourceRows {
  const T* rows;
  const int64_t* ids;
  int64_t F;

  inline const T* of(int64_t i) const { return rows + (ids != nullptr ? ids[i] : i) * F; }
  // Prefetch source i's row, and the id of source j (read later, when j's row is).
  inline void prefetch(int64_t i, int64_t j) const {
    prefetch_bytes(of(i), F * static_cast<int64_t>(sizeof(T)));
    if (ids != nullptr) prefetch_line(ids + j);
  }
};

// One task's rows [begin, end) of the aggregation; F columns.
template <typename T>
inline __attribute__((always_inline)) void aggregate_range(const int64_t* crow,
                                                           const int64_t* col, const T* values,
                                                           const SourceRows<T>& dense,
                                                           bool mean, const Reading<T>& reading,
                                                           bool with_self, T* out,
                                                           int64_t begin, int64_t end) {
  const int64_t F = dense.F;
  const int64_t last = crow[end];
  const int64_t stride = with_self ? 2 * F : F;
  for (int64_t r = begin; r < end; ++r) {
    T* o = out + r * stride;
    for (int64_t f = 0; f < F; ++f) o[f] = T(0);
    const int64_t e0 = crow[r], e1 = crow[r + 1];
    for (int64_t e = e0; e < e1; ++e) {
      if (e + 2 * kAhead < last) {
        dense.prefetch(col[e + kAhead], col[e + 2 * kAhead]);
      } else if (e + kAhead < last) {
        dense.prefetch(col[e + kAhead], col[e + kAhead]);
      }
      const T w = values != nullptr ? values[e] : T(1);
      reading.row(dense.of(col[e]), col[e] * F, F, [&](auto f, T v) { o[f] += w * v; });
    }
    if (mean && e1 > e0) {
      const T count = static_cast<T>(e1 - e0);
      for (int64_t f = 0; f < F; ++f) o[f] /= count;
    }
    if (with_self) {  // the destination's own row: source r, read as the others
      T* own = o + F;
      reading.row(dense.of(r), r * F, F, [&](auto f, T v) { own[f] = v; });
    }
  }
}

GE_FLOAT_CLONES void aggregate_floats(
    const int64_t* crow, const int64_t* col, const float* values,
    const SourceRows<float>& dense, bool mean, const Reading<float>& reading, bool with_self,
    float* out, int64_t begin, int64_t end) {
  aggregate_range(crow, col, values, dense, mean, reading, with_self, out, begin, end);
}

GE_FLOAT_CLONES void aggregate_doubles(
    const int64_t* crow, const int64_t* col, const double* values,
    const SourceRows<double>& dense, bool mean, const Reading<double>& reading,
    bool with_self, double* out, int64_t begin, int64_t end) {
  aggregate_range(crow, col, values, dense, mean, reading, with_self, out, begin, end);
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

// out = the aggregation of rows [0, rows) (with_self: beside each row's own), in tasks of
// about equal work.
template <typename T, typename Kernel>
void aggregate(const int64_t* c, int64_t rows, const int64_t* k, const T* v,
               const SourceRows<T>& d, bool mean, const Reading<T>& reading, bool with_self,
               T* o, Kernel kernel) {
  // many more tasks than threads, taken from a shared counter (common/parallel.h)
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(rows, 16 * num_threads()));
  const std::vector<int64_t> bounds = balanced_bounds(c, rows, tasks);
  for_each_task(tasks,
                [&](int64_t t) {
                  kernel(c, k, v, d, mean, reading, with_self, o, bounds[t], bounds[t + 1]);
                });
}

// The transpose of A's pattern, (columns, rows): entries grouped by column, each column's
// rows increasing (a stable counting sort by column), in indices of type I (int32 where
// they fit: half the bytes to move). Threads take contiguous ranges of A's rows: each
// counts its entries per column, the counts become positions column by column (thread 0's
// first, so rows stay in order), and each thread places its entries. Every column is
// checked against `columns` on the way.
template <typename I>
struct Transpose {
  std::vector<int64_t> starts;  // (columns + 1): column c's entries are [starts[c], starts[c+1])
  std::vector<I> rows;          // (entries): the row of each entry, increasing per column
};

template <typename I>
Transpose<I> transpose_pattern(const int64_t* crow, int64_t rows, const int64_t* col,
                               int64_t entries, int64_t columns) {
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(num_threads(), entries / kTransposeGrain));
  const std::vector<int64_t> bounds = balanced_bounds(crow, rows, parts);
  std::vector<std::vector<I>> next(parts);  // per part: counts, then next positions
  for_each_task(parts, [&](int64_t p) {
    std::vector<I>& count = next[p];
    count.assign(columns, 0);
    for (int64_t e = crow[bounds[p]], stop = crow[bounds[p + 1]]; e < stop; ++e) {
      require(static_cast<uint64_t>(col[e]) < static_cast<uint64_t>(columns), GE_INDEX_ERROR,
              "graphemb_kernels.csr_aggregate_transposed: col[", e, "] = ", col[e],
              " is out of range for ", columns, " output rows");
      ++count[col[e]];
    }
  });
  Transpose<I> t{std::vector<int64_t>(columns + 1), std::vector<I>(entries)};
  int64_t position = 0;
  for (int64_t c = 0; c < columns; ++c) {
    t.starts[c] = position;
    for (int64_t p = 0; p < parts; ++p) {
      const I count = next[p][c];
      next[p][c] = static_cast<I>(position);
      position += count;
    }
  }
  t.starts[columns] = position;
  for_each_task(parts, [&](int64_t p) {
    I* slot = next[p].data();
    for (int64_t r = bounds[p]; r < bounds[p + 1]; ++r) {
      for (int64_t e = crow[r]; e < crow[r + 1]; ++e)
        t.rows[slot[col[e]]++] = static_cast<I>(r);
    }
  });
  return t;
}

// The gradient's rows and what is added to the first rows of the output: row r of the
// gradient at grad + r * stride; row c of the addend at addend + c * addend_stride.
// relu_input: the output rows' values before the ReLU the forward read them through
// (columns, F), or null.
template <typename T>
struct GradientRows {
  const T* grad;
  int64_t stride;
  const T* addend;
  int64_t addend_stride;
  int64_t addend_rows;
  const T* relu_input;
};

// Output rows [begin, end) of out (columns, F) = A^T (w g) (+ addend on its first rows),
// then dropped by the mask and kept where relu_input is above 0: each row summed over its
// column's rows in increasing order, from 0, and finished while it is in the cache.
template <typename T, typename I>
inline __attribute__((always_inline)) void gather_columns(
    const Transpose<I>& t, const int64_t* crow, const GradientRows<T>& g_rows, int64_t F,
    bool mean, const HashedMask<T>& mask, T* out, int64_t begin, int64_t end) {
  const T* grad = g_rows.grad;
  const int64_t stride = g_rows.stride;
  const int64_t row_bytes = F * static_cast<int64_t>(sizeof(T));
  const I* rows = t.rows.data();
  const int64_t last = t.starts[end];
  for (int64_t c = begin; c < end; ++c) {
    T* o = out + c * F;
    for (int64_t f = 0; f < F; ++f) o[f] = T(0);
    for (int64_t k = t.starts[c], stop = t.starts[c + 1]; k < stop; ++k) {
      if (k + kAhead < last) {
        prefetch_bytes(grad + int64_t{rows[k + kAhead]} * stride, row_bytes);
      }
      const int64_t r = rows[k];
      const T w = mean ? T(1) / static_cast<T>(crow[r + 1] - crow[r]) : T(1);  // A^T's values
      const T* g = grad + r * stride;
      for (int64_t f = 0; f < F; ++f) o[f] += w * g[f];
    }
    if (c < g_rows.addend_rows) {
      const T* a = g_rows.addend + c * g_rows.addend_stride;
      for (int64_t f = 0; f < F; ++f) o[f] += a[f];
    }
    if (mask.masked)  // the dropout's backward on the summed row
      mask.for_each_factor(c * F, F, [&](auto f, T factor) { o[f] *= factor; });
    if (g_rows.relu_input != nullptr) {  // the ReLU's backward: 0 where its input was <= 0
      const T* x = g_rows.relu_input + c * F;
      for (int64_t f = 0; f < F; ++f) o[f] = x[f] > T(0) ? o[f] : T(0);
    }
  }
}

// gather_columns for one value type T and index type I, in the clones of common/clones.h.
#define GE_GATHER_CLONE(NAME, T, I)                                                        \
  GE_FLOAT_CLONES void NAME(                                                               \
      const Transpose<I>& t, const int64_t* crow, const GradientRows<T>& g_rows,           \
      int64_t F, bool mean, const HashedMask<T>& mask, T* out, int64_t begin,              \
      int64_t end) {                                                                       \
    gather_columns(t, crow, g_rows, F, mean, mask, out, begin, end);                       \
  }
GE_GATHER_CLONE(gather_floats, float, int32_t)
GE_GATHER_CLONE(gather_floats, float, int64_t)
GE_GATHER_CLONE(gather_doubles, double, int32_t)
GE_GATHER_CLONE(gather_doubles, double, int64_t)
#undef GE_GATHER_CLONE

// out = A^T (w g) (+ addend): the transpose's pattern (int32 indices where entries and
// rows fit), then its rows in tasks of about equal work.
template <typename T, typename I>
void gather_transposed(const int64_t* crow, int64_t rows, const int64_t* col, int64_t entries,
                       const GradientRows<T>& g_rows, int64_t F, bool mean,
                       const HashedMask<T>& mask, T* out, int64_t columns) {
  const Transpose<I> t = transpose_pattern<I>(crow, rows, col, entries, columns);
  const int64_t tasks = std::max<int64_t>(1, std::min<int64_t>(columns, 16 * num_threads()));
  const std::vector<int64_t> bounds = balanced_bounds(t.starts.data(), columns, tasks);
  for_each_task(tasks, [&](int64_t k) {
    if constexpr (std::is_same_v<T, float>) {
      gather_floats(t, crow, g_rows, F, mean, mask, out, bounds[k], bounds[k + 1]);
    } else {
      gather_doubles(t, crow, g_rows, F, mean, mask, out, bounds[k], bounds[k + 1]);
    }
  });
}

// paired: grad's rows hold 2F values, the aggregate's gradient then the own row's, which
// is the addend of output row r (r < rows). relu_input: see GradientRows.
template <typename T>
void aggregate_transposed(const int64_t* crow, int64_t rows, const int64_t* col,
                          int64_t entries, const T* grad, int64_t F, bool mean,
                          const T* addend, int64_t addend_rows, bool paired,
                          const T* relu_input, const HashedMask<T>& mask, T* out,
                          int64_t columns) {
  const GradientRows<T> g_rows =
      paired ? GradientRows<T>{grad, 2 * F, grad + F, 2 * F, rows, relu_input}
             : GradientRows<T>{grad, F, addend, F, addend != nullptr ? addend_rows : 0,
                               relu_input};
  constexpr int64_t kInt32 = std::numeric_limits<int32_t>::max();
  if (entries <= kInt32 && rows <= kInt32) {
    gather_transposed<T, int32_t>(crow, rows, col, entries, g_rows, F, mean, mask, out,
                                  columns);
  } else {
    gather_transposed<T, int64_t>(crow, rows, col, entries, g_rows, F, mean, mask, out,
                                  columns);
  }
}

template <typename T>
HashedMask<T> mask_of(const ge_dropout_mask* mask) {
  if (mask == nullptr) return HashedMask<T>::none();
  require(mask->threshold < kMaskLevels, GE_VALUE_ERROR,
          "graphemb_kernels: the dropout's threshold = ", mask->threshold, " is not in [0, 2^16)");
  return HashedMask<T>::of(mask->threshold, static_cast<T>(mask->scale), mask->key);
}

}  // namespace
}  // namespace ge

extern "C" int ge_csr_aggregate_transposed(const int64_t* crow, int64_t rows,
                                           const int64_t* col, int64_t entries,
                                           const void* grad, int64_t features, int dtype,
                                           int mean, const void* addend, int64_t addend_rows,
                                           const ge_dropout_mask* mask, void* out,
                                           int64_t out_rows, int paired,
                                           const void* relu_input) {
  using namespace ge;
  return guarded([&] {
    require(rows >= 0 && crow[0] == 0 && crow[rows] == entries, GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate_transposed: crow must run from 0 to the ", entries,
            " entries, got ", crow[0], " to ", crow[rows]);
    require(addend_rows >= 0 && addend_rows <= out_rows, GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate_transposed: addend has ", addend_rows,
            " rows, more than the ", out_rows, " output rows");
    require(!paired || (addend == nullptr && rows <= out_rows), GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate_transposed: a paired gradient of ", rows,
            " rows adds its own rows' half to as many output rows: needs no addend and at most ",
            out_rows, " rows");
    if (dtype == GE_FLOAT32) {
      aggregate_transposed(crow, rows, col, entries, static_cast<const float*>(grad), features,
                           mean != 0, static_cast<const float*>(addend), addend_rows,
                           paired != 0, static_cast<const float*>(relu_input),
                           mask_of<float>(mask), static_cast<float*>(out), out_rows);
      return;
    }
    require(dtype == GE_FLOAT64, GE_TYPE_ERROR,
            "graphemb_kernels.csr_aggregate_transposed: grad must be float32 or float64");
    aggregate_transposed(crow, rows, col, entries, static_cast<const double*>(grad), features,
                         mean != 0, static_cast<const double*>(addend), addend_rows,
                         paired != 0, static_cast<const double*>(relu_input),
                         mask_of<double>(mask), static_cast<double*>(out), out_rows);
  });
}

extern "C" int ge_csr_aggregate(const int64_t* crow, int64_t rows, const int64_t* col,
                                int64_t entries, const void* values, const void* dense,
                                int64_t dense_rows, int64_t features, int dtype, int mean,
                                const ge_dropout_mask* mask, void* out, int with_self,
                                int relu, const int64_t* dense_ids, int64_t sources) {
  using namespace ge;
  return guarded([&] {
    require(rows >= 0 && crow[0] == 0 && crow[rows] == entries, GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate: crow must run from 0 to the ", entries,
            " entries, got ", crow[0], " to ", crow[rows]);
    const bool indirect = sources >= 0;  // else dense's own rows, dense_ids ignored
    if (!indirect) {
      dense_ids = nullptr;
      sources = dense_rows;
    }
    require(!indirect || sources == 0 || dense_ids != nullptr, GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate: ", sources, " sources need their dense_ids");
    for (int64_t i = 0; indirect && i < sources; ++i) {
      require(static_cast<uint64_t>(dense_ids[i]) < static_cast<uint64_t>(dense_rows),
              GE_INDEX_ERROR, "graphemb_kernels.csr_aggregate: dense_ids[", i, "] = ",
              dense_ids[i], " is out of range for dense of ", dense_rows, " rows");
    }
    for (int64_t e = 0; e < entries; ++e) {
      require(static_cast<uint64_t>(col[e]) < static_cast<uint64_t>(sources), GE_INDEX_ERROR,
              "graphemb_kernels.csr_aggregate: col[", e, "] = ", col[e],
              " is out of range for ", sources, indirect ? " sources" : " rows of dense");
    }
    require(!with_self || rows <= sources, GE_VALUE_ERROR,
            "graphemb_kernels.csr_aggregate: with its own rows, the ", rows,
            " rows must be the first of the ", sources, " sources");
    if (dtype == GE_FLOAT32) {
      aggregate(crow, rows, col, static_cast<const float*>(values),
                SourceRows<float>{static_cast<const float*>(dense), dense_ids, features},
                mean != 0, Reading<float>{mask_of<float>(mask), relu != 0}, with_self != 0,
                static_cast<float*>(out), aggregate_floats);
      return;
    }
    require(dtype == GE_FLOAT64, GE_TYPE_ERROR,
            "graphemb_kernels.csr_aggregate: dense must be float32 or float64");
    aggregate(crow, rows, col, static_cast<const double*>(values),
              SourceRows<double>{static_cast<const double*>(dense), dense_ids, features},
              mean != 0, Reading<double>{mask_of<double>(mask), relu != 0}, with_self != 0,
              static_cast<double*>(out), aggregate_doubles);
  });
}
