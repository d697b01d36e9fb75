// The loop of the fused optimizer update over the distinct rows of a step: each row's
// gradient contributions summed (duplicates in the batch, or rows pushed by several
// ranks), divided by the world size, and handed to the formula's per-row update, in
// parallel over rows with the next rows prefetched.
#pragma once

#include "common/parallel.h"
#include "common/prefetch.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ge {

// Positions ahead: a row of each of the formula's tables (and the gradient's) in flight for
// each, enough to keep the memory busy while the rows at hand are computed.
constexpr int64_t kPrefetchPositions = 16;
constexpr int64_t kPositionsPerBlock = 1024;  // positions a thread takes at a time

// The gradient parts read as one table: row k of their concatenation, found by a scan of
// the few part ends (one part per sender rank at most).
template <typename C>
class GradRows {
 public:
  GradRows(const void* const* parts, const int64_t* part_rows, int64_t num_parts, int64_t dim)
      : dim_(dim) {
    int64_t end = 0;
    for (int64_t p = 0; p < num_parts; ++p) {
      bases_.push_back(static_cast<const C*>(parts[p]));
      starts_.push_back(end);
      end += part_rows[p];
      ends_.push_back(end);
    }
  }
  const C* row(int64_t k) const {
    size_t p = 0;
    while (k >= ends_[p]) ++p;  // k < the last end: checked by the caller
    return bases_[p] + (k - starts_[p]) * dim_;
  }

 private:
  int64_t dim_;
  std::vector<const C*> bases_;
  std::vector<int64_t> starts_, ends_;
};

// One step's rows: `index` (count,) sorted, runs of equal rows being duplicates, and
// `order` the gradient row of each position.
template <typename C>
struct StepRows {
  const int64_t* index;
  const int64_t* order;
  int64_t count;
  const GradRows<C>& grads;
  int64_t dim;
  double divisor;
};

// The first position at or after p where a run of equal rows starts (count if none).
inline int64_t run_start_from(const int64_t* index, int64_t count, int64_t p) {
  while (p > 0 && p < count && index[p] == index[p - 1]) ++p;
  return std::min(p, count);
}

// Calls update(row, summed_grad) once per distinct row, in parallel over blocks of
// positions taken from a shared counter (a block updates the runs that start in it), with
// update = make_update() made once per thread (it may keep per-thread state);
// prefetch_row(row) runs a few positions ahead of update(row, ...).
template <typename C, typename MakeUpdate, typename Prefetch>
void for_each_row(const StepRows<C>& step, MakeUpdate make_update, Prefetch prefetch_row) {
  const int64_t dim = step.dim;
  const int64_t* idx = step.index;
  const int64_t* ord = step.order;
  const int64_t count = step.count;
  const GradRows<C>& g = step.grads;
  if (count <= 0) return;
  const double divisor = step.divisor;
  const C div = static_cast<C>(divisor);
  const int64_t blocks = (count + kPositionsPerBlock - 1) / kPositionsPerBlock;
  for_each_task_with(blocks, [&] {
    return [&, sum = std::vector<C>(dim), update = make_update()](int64_t block) mutable {
      const int64_t end = run_start_from(idx, count, (block + 1) * kPositionsPerBlock);
      int64_t first = run_start_from(idx, count, block * kPositionsPerBlock);
      int64_t fetched = first;  // positions before it have been prefetched
      while (first < end) {
        // every position up to kPrefetchPositions ahead: a run of duplicates moves `first`
        // by its length, and the positions it skips need their rows too
        for (const int64_t ahead = std::min(first + kPrefetchPositions, count); fetched < ahead;
             ++fetched) {
          prefetch_bytes(g.row(ord[fetched]), dim * static_cast<int64_t>(sizeof(C)));
          if (fetched == 0 || idx[fetched] != idx[fetched - 1]) prefetch_row(idx[fetched]);
        }
        int64_t last = first + 1;
        while (last < count && idx[last] == idx[first]) ++last;
        const C* row_grad = g.row(ord[first]);
        if (last - first > 1 || divisor != 1.0) {  // else: the gradient row as it is
          for (int64_t j = 0; j < dim; ++j) sum[j] = row_grad[j];
          for (int64_t i = first + 1; i < last; ++i) {
            const C* more = g.row(ord[i]);
            for (int64_t j = 0; j < dim; ++j) sum[j] += more[j];
          }
          if (divisor != 1.0) {
            for (int64_t j = 0; j < dim; ++j) sum[j] /= div;
          }
          row_grad = sum.data();
        }
        update(idx[first], row_grad);
        first = last;
      }
    };
  });
}

}  // namespace ge
