// The skip-gram trainer's tables and counters, shared by its entry point (train.cpp), the
// plan of a walk's draws (plan.h) and the per-thread loop (loop.h).
#pragma once

#include "common/splitmix.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ge::skipgram {

using splitmix::kGamma;
using splitmix::mix;
using splitmix::SplitMix64;

// Which contexts share a draw of noise nodes (plan.h): each (context, node) pair its own
// (word2vec), or every context of a position the same (HogBatch).
enum class Sharing : int64_t { kPair = 0, kPosition = 1 };

// How often each node occurs in the walks, up to a constant (word2vec's counts): the
// differences of an indptr (a graph's in-degrees, read from the graph: no array of N
// values of its own), or one value per node (weighted in-degrees).
struct NodeCounts {
  const int64_t* indptr;  // (N + 1,), or nullptr
  const double* values;   // (N,) when indptr is nullptr

  double count(int64_t node) const {
    return indptr != nullptr ? static_cast<double>(indptr[node + 1] - indptr[node]) : values[node];
  }
  const void* address(int64_t node) const {
    return indptr != nullptr ? static_cast<const void*>(indptr + node)
                             : static_cast<const void*>(values + node);
  }
};

// The noise distribution, counts ** 0.75, in one of two forms (noise.h draws from either):
//   alias table alone (slots nullptr): column k of `columns` holds node[k] with probability
//     keep[k], else alias[k] (Walker's method over any weights);
//   slots (slots non-null): every node v appears count(v) times among the `slot_count`
//     slots (the out-neighbour lists of a graph hold v once per in-edge), so a uniform slot
//     is v with probability count(v) / total. Accepting it with probability
//     min(1, (floor / count(v)) ** 0.25) leaves v in proportion to count(v) ** 0.75 times
//     floor ** 0.25 for every count >= floor, and to count(v) below it; the alias table then
//     holds only what those nodes lack, lack(c) = c ** 0.75 * floor ** 0.25 - c, drawn
//     instead of the slots with probability alias_share. With floor at a low quantile of the
//     counts most draws are accepted at the first slot, and the alias table has few columns.
//     Or no alias table at all (lack_bound > 0): a uniform node of count c in (0, floor) is
//     accepted with probability lack(c) / lack_bound (lack_bound >= every such lack(c)),
//     else another: the rare draws below the floor cost a few more reads, and the table's
//     memory and its construction's are gone. Read in place from the graph: nothing of N
//     entries is built.
// The alias table is read in place too: packing its columns into one block each (one cache
// line a draw) took a pass over the table per call, about 1 s a call on 10M nodes, where the
// driver calls once per chunk of walks.
struct NoiseTable {
  const int64_t* node;
  const double* keep;
  const int64_t* alias;
  uint64_t columns;
  const int64_t* slots;
  uint64_t slot_count;
  double floor;
  double alias_share;
  uint64_t num_nodes;    // uniform candidates below the floor are drawn from [0, num_nodes)
  double lack_bound;     // > 0: below the floor by rejection, no alias table
  double floor_quarter;  // floor ** 0.25

  // What a node of count c in (0, floor) lacks of c ** 0.75 * floor ** 0.25.
  double lack(double count) const { return std::pow(count, 0.75) * floor_quarter - count; }
};

struct Tables {
  const int64_t* walks;
  int64_t length;
  float* syn0;
  void* syn1;             // in one of the formats of output_rows.h
  int64_t syn1_row_bytes;
  int64_t dim;
  NodeCounts counts;
  // Subsampling: a token of count c is kept with probability min(1, (sqrt(c / s) + 1) * s / c)
  // (word2vec's formula with s = sample * the counts' total); s = 0 keeps every token.
  double subsample_threshold;
  NoiseTable noise;
  int64_t window;
  int64_t negatives;
  double lr;
  double final_rate;  // the last learning rate as a share of lr
  int64_t walks_before;
  int64_t total_walks;
  int64_t hold_walks;
  Sharing sharing;
  int64_t noise_pool;   // slots of the pool of noise nodes (noise.h); 0: no pool
  int64_t noise_reuse;  // noise nodes taken from the pool per fresh draw put into it
};

// Subsampling's keep probability of `node` (word2vec's formula, in float64 as
// graphemb.skipgram.keep_probabilities computes it).
inline double keep_probability(const Tables& t, int64_t node) {
  const double threshold = t.subsample_threshold;
  if (threshold <= 0.0) return 1.0;
  const double count = std::max(t.counts.count(node), 1e-300);
  return std::min((std::sqrt(count / threshold) + 1.0) * threshold / count, 1.0);
}

// A row of either table, as the prefetcher sees it (loop.h).
struct RowSpan {
  const char* start;
  int64_t bytes;
};

inline RowSpan input_row(const Tables& t, int64_t node) {
  return {reinterpret_cast<const char*>(t.syn0 + node * t.dim), t.dim * 4};
}

inline RowSpan output_row(const Tables& t, int64_t node) {
  return {static_cast<const char*>(t.syn1) + node * t.syn1_row_bytes, t.syn1_row_bytes};
}

struct Counts {
  int64_t nonfinite = 0;
  int64_t products = 0;
};

}  // namespace ge::skipgram
