// The skip-gram trainer's per-thread loop (train.cpp), for a vector width kLanes (lanes.h).
//
// Walk after walk: the next walk's draws are planned (plan.h) before this walk trains, and
// training runs through the contexts of the plan, prefetching the rows that the coming
// contexts read first and that may be outside the cache (this walk's, then the next walk's;
// see WalkPlan::rows) kPrefetchRows rows ahead of the current context's last such row.
// Random rows of a table larger than the caches are the loop's main cost once the tables
// outgrow them; the plan says which rows come next, so their reads overlap the arithmetic
// of the rows before them.
#pragma once

#include "skipgram/lanes.h"
#include "skipgram/plan.h"
#include "skipgram/tables.h"
#include "skipgram/workspace.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

// Forced inline, like lanes.h's functions, so that the loop is compiled for the target of
// the function that instantiates it (train.cpp).
#define GE_ALWAYS_INLINE __attribute__((always_inline)) inline

namespace ge::skipgram {

// Rows in flight ahead of the current context (benchmarks/bench_deepwalk_scale.py times it).
constexpr int64_t kPrefetchRows = 24;

// Every cache line of a row, for writing.
GE_INLINE void prefetch_row(RowSpan row) {
  for (int64_t b = 0; b < row.bytes; b += 64) __builtin_prefetch(row.start + b, 1, 3);
  __builtin_prefetch(row.start + row.bytes - 1, 1, 3);
}

// How far the prefetches have gone: rows of the current walk's plan, then of the next's.
struct PrefetchCursor {
  int64_t now = 0, next = 0;

  // Prefetches the rows up to `goal` of now's reading order, and those past its end from
  // next's (when there is a next walk).
  GE_ALWAYS_INLINE void advance(const WalkPlan& plan, const WalkPlan* following, int64_t goal) {
    const auto total = static_cast<int64_t>(plan.rows.size());
    for (; now < std::min(goal, total); ++now) prefetch_row(plan.rows[now]);
    if (following == nullptr || goal <= total) return;
    const int64_t further = std::min(goal - total, static_cast<int64_t>(following->rows.size()));
    for (; next < further; ++next) prefetch_row(following->rows[next]);
  }

  // The next walk becomes the current one.
  GE_ALWAYS_INLINE void turn() {
    now = next;
    next = 0;
  }
};

// The rate of the block of hold_walks walks that the run's progress falls in (word2vec's
// rate held for 10,000 tokens, see train.cpp), read when a walk starts.
GE_INLINE float walk_rate(const Tables& t, const std::atomic<int64_t>* done) {
  const int64_t started = t.walks_before + done->load();
  const double progress = static_cast<double>(started / t.hold_walks * t.hold_walks) /
                          static_cast<double>(t.total_walks);
  return static_cast<float>(t.lr * std::max(1.0 - (1.0 - t.final_rate) * progress,
                                            t.final_rate));
}

// Format: the output rows' format (output_rows.h).
template <int kLanes, typename Format>
struct Loop {
  using Rows = LaneKernels<kLanes, Format>;
  using Row = typename Rows::Row;
  using Writes = typename Rows::Writes;

  // Trains the contexts of `plan` at rate alpha; rows: width pointers, scratch: at least
  // dim * width floats.
  GE_INLINE void train_walk(const Tables& t, const WalkPlan& plan, const WalkPlan* following,
                            PrefetchCursor& cursor, float alpha, Row* rows, float* scratch,
                            Writes& writes, Counts& counts) {
    const int64_t width = t.negatives + 1, dim = t.dim;
    for (int64_t i = 0; i < plan.contexts; ++i) {
      cursor.advance(plan, following, plan.need[i] + kPrefetchRows);
      const int32_t list = plan.list[i];
      const int count = plan.size[list];
      const int64_t* drawn = plan.targets.data() + list * width;
      for (int j = 0; j < count; ++j) rows[j] = output_row_at<typename Rows::Io>(t.syn1, drawn[j], dim);
      float* in = t.syn0 + plan.input[i] * dim;
      counts.nonfinite +=
          plan.distinct[list]
              ? Rows::train_distinct(in, rows, count, dim, alpha, scratch, writes)
              : Rows::train_context_in_order(in, rows, count, dim, alpha, scratch, writes);
      counts.products += count;
    }
  }

  // Thread `thread`'s share [first, last) of the walks (see train.cpp's header comment), in
  // `space` (reserved for t's walks: workspace.h).
  GE_INLINE void train_range(const Tables& t, int64_t first, int64_t last, uint64_t seed,
                             int thread, Workspace* space, std::atomic<int64_t>* done,
                             Counts* counts) {
    SplitMix64 rng{mix(seed ^ (static_cast<uint64_t>(thread) * kGamma))};
    const int64_t width = t.negatives + 1;
    WalkPlan* plans = space->plans;
    std::vector<Row> rows(width);
    float* scratch = space->scratch.data();
    // Writes' own stream (output_rows.h): the thread's draws stay those of float32 rows.
    Writes writes(mix(~seed ^ (static_cast<uint64_t>(thread) * kGamma)));
    PrefetchCursor cursor;
    Counts mine;
    NoiseSource noise(t, rng);  // a pool's first draws come first in the thread's stream
    if (first < last) plan_walk(t, rng, noise, first, plans[0]);
    for (int64_t w = first; w < last; ++w) {
      const WalkPlan& plan = plans[(w - first) & 1];
      WalkPlan& following = plans[(w - first + 1) & 1];
      const bool more = w + 1 < last;
      if (more) plan_walk(t, rng, noise, w + 1, following);
      train_walk(t, plan, more ? &following : nullptr, cursor, walk_rate(t, done), rows.data(),
                 scratch, writes, mine);
      cursor.turn();
      done->fetch_add(1, std::memory_order_relaxed);
    }
    *counts = mine;
  }
};

}  // namespace ge::skipgram

#undef GE_INLINE
#undef GE_ALWAYS_INLINE
