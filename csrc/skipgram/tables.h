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
  float* syn1;
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

struct Counts {
  int64_t nonfinite = 0;
  int64_t products = 0;
};

}  // namespace ge::skipgram
