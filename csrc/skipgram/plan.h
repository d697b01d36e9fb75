// The draws of one walk (subsampling, windows, noise nodes), made before any of its rows is
// trained, and the order in which training first reads its rows that may be outside the
// cache (what the loop prefetches).
//
// The draws come from the thread's stream in word2vec's order, walk after walk:
//   1. one uniform draw per token whose keep probability is < 1 (subsampling);
//   2. per position t of the kept walk: the reduced window r (one draw below `window`), then
//      the noise nodes, K of them (one fresh draw each, noise.h):
//        sharing kPair      K per context c of the window, drawn before c is planned
//                           (word2vec.c, gensim: a pair's negatives are its own);
//        sharing kPosition  K per position, drawn once after r when the window holds a
//                           context, the same targets for all of its contexts (HogBatch,
//                           BlazingText: the window's rows are read once).
//      A noise node equal to the position's node is skipped, as in word2vec.c. The noise
//      nodes come from the thread's NoiseSource (noise.h): fresh draws, or a pool of them.
// None of the draws depends on the rows, so planning a walk before training it (or while the
// walk before it trains) gives the result of drawing each context's nodes just before its
// training.
#pragma once

#include "skipgram/noise.h"
#include "skipgram/tables.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ge::skipgram {

// A walk's contexts in training order: context i trains input row syn0[input[i]] against
// the target list list[i] (its first target the position's node, label 1; then its noise
// nodes). A list of sharing kPosition serves every context of its position.
struct WalkPlan {
  std::vector<int64_t> kept;     // the kept tokens
  std::vector<int64_t> input;    // per context: its node
  std::vector<int32_t> list;     // per context: its target list
  std::vector<int64_t> targets;  // target list j: targets[j * width, j * width + size[j])
  std::vector<int32_t> size;     // per list: its targets
  std::vector<uint8_t> distinct; // per list: no node twice (trained side by side)
  // The rows that may be outside the cache (each context's input row, each position's own
  // output row, cold noise rows: see draw_targets) in the order training first reads them,
  // and per context how many of them precede its own last one: prefetching rows[...] up to
  // need[i] + distance keeps the loop `distance` such rows ahead.
  std::vector<RowSpan> rows;
  std::vector<int64_t> need;
  int64_t contexts = 0, lists = 0;

  void reserve(int64_t length, int64_t window, int64_t width) {
    const int64_t most = length * 2 * window;  // contexts of one walk at most
    kept.resize(length);
    input.resize(most);
    list.resize(most);
    need.resize(most);
    targets.resize(most * width);
    size.resize(most);
    distinct.resize(most);
    rows.reserve(most * (width + 1));
  }
};

inline bool all_distinct(const int64_t* ids, int64_t count) {
  for (int64_t i = 1; i < count; ++i)
    for (int64_t j = 0; j < i; ++j)
      if (ids[i] == ids[j]) return false;
  return true;
}

// A new target list for the position of node `word`: word, then K noise nodes other than it.
// Only rows that may be outside the cache join plan.rows (the prefetch order): the word's
// on its position's first list, and the noise nodes the source calls cold.
inline void draw_targets(const Tables& t, SplitMix64& rng, NoiseSource& noise, int64_t word,
                         bool first, WalkPlan& plan) {
  const int64_t width = t.negatives + 1;
  int64_t* drawn = plan.targets.data() + plan.lists * width;
  int64_t count = 0;
  drawn[count++] = word;
  if (first) plan.rows.push_back(output_row(t, word));
  for (int64_t k = 0; k < t.negatives; ++k) {
    bool cold = true;
    const int64_t target = noise.draw(t, rng, cold);
    if (target == word) continue;  // word2vec skips the node itself
    drawn[count++] = target;
    if (cold) plan.rows.push_back(output_row(t, target));
  }
  plan.size[plan.lists] = static_cast<int32_t>(count);
  plan.distinct[plan.lists] = all_distinct(drawn, count);
  ++plan.lists;
}

// Subsamples walk `w` into plan.kept; returns the kept tokens.
inline int64_t subsample(const Tables& t, SplitMix64& rng, int64_t w, WalkPlan& plan) {
  const int64_t* walk = t.walks + w * t.length;
  int64_t size = 0;
  for (int64_t i = 0; i < t.length && walk[i] >= 0; ++i) {
    const double keep = keep_probability(t, walk[i]);
    if (keep >= 1.0 || rng.uniform() < keep) plan.kept[size++] = walk[i];
  }
  return size;
}

// The plan of walk `w` (the draws of the header comment, in their order).
inline void plan_walk(const Tables& t, SplitMix64& rng, NoiseSource& noise, int64_t w,
                      WalkPlan& plan) {
  plan.contexts = plan.lists = 0;
  plan.rows.clear();
  const int64_t size = subsample(t, rng, w, plan);
  int64_t seen = -1;  // the furthest kept token whose input row is in plan.rows
  for (int64_t pos = 0; pos < size; ++pos) {
    const int64_t word = plan.kept[pos];
    const int64_t radius = 1 + static_cast<int64_t>(rng.below(t.window));
    const int64_t lo = std::max<int64_t>(pos - radius, 0);
    const int64_t hi = std::min<int64_t>(pos + radius, size - 1);
    if (t.sharing == Sharing::kPosition && lo < hi) draw_targets(t, rng, noise, word, true, plan);
    for (int64_t c = lo; c <= hi; ++c) {
      if (c == pos) continue;
      const bool first = c == (lo == pos ? pos + 1 : lo);
      if (t.sharing == Sharing::kPair) draw_targets(t, rng, noise, word, first, plan);
      for (; seen < c; ++seen) plan.rows.push_back(input_row(t, plan.kept[seen + 1]));
      plan.input[plan.contexts] = plan.kept[c];
      plan.list[plan.contexts] = static_cast<int32_t>(plan.lists - 1);
      plan.need[plan.contexts++] = static_cast<int64_t>(plan.rows.size());
    }
  }
}

}  // namespace ge::skipgram
