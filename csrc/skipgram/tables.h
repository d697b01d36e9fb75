// The skip-gram trainer's tables and counters, shared by its entry point (train.cpp) and
// its per-thread loop (lanes.h).
#pragma once

#include "common/splitmix.h"

#include <cstdint>

namespace ge::skipgram {

using splitmix::kGamma;
using splitmix::mix;
using splitmix::SplitMix64;

// One column of the noise alias table, in one 32-byte block (one cache line per draw
// instead of one per array). A draw's coin (x >> 11) * 2^-53 < keep, x its 64-bit draw,
// is the integer test (x >> 11) < threshold with threshold = ceil(keep * 2^53): the same
// outcome for every draw, without a conversion to double.
struct alignas(32) NoiseColumn {
  uint64_t threshold;
  int64_t node;
  int64_t alias;
};

struct Tables {
  const int64_t* walks;
  int64_t length;
  float* syn0;
  float* syn1;
  int64_t dim;
  const double* keep;
  const NoiseColumn* noise;
  uint64_t noise_size;
  int64_t window;
  int64_t negatives;
  double lr;
  double final_rate;  // the last learning rate as a share of lr
  int64_t walks_before;
  int64_t total_walks;
  int64_t hold_walks;
};

struct Counts {
  int64_t nonfinite = 0;
  int64_t products = 0;
};

}  // namespace ge::skipgram
