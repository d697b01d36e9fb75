// The skip-gram trainer's tables and counters, shared by its entry point (train.cpp), the
// plan of a walk's draws (plan.h) and the per-thread loop (loop.h).
#pragma once

#include "common/splitmix.h"

#include <cstdint>

namespace ge::skipgram {

using splitmix::kGamma;
using splitmix::mix;
using splitmix::SplitMix64;

// Which contexts share a draw of noise nodes (plan.h): each (context, node) pair its own
// (word2vec), or every context of a position the same (HogBatch).
enum class Sharing : int64_t { kPair = 0, kPosition = 1 };

struct Tables {
  const int64_t* walks;
  int64_t length;
  float* syn0;
  void* syn1;             // in one of the formats of output_rows.h
  int64_t syn1_row_bytes;
  int64_t dim;
  const double* keep;
  // The alias table of the noise distribution: column k holds node noise_node[k] with
  // probability noise_keep[k], else noise_alias[k]. Read in place: packing the columns
  // into one block each (one cache line a draw) took a pass over the table per call, about
  // 1 s a call on 10M nodes, where the driver calls once per chunk of walks.
  const int64_t* noise_node;
  const double* noise_keep;
  const int64_t* noise_alias;
  uint64_t noise_size;
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
