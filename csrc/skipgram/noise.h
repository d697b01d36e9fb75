// Where a thread's noise nodes come from (plan.h): the alias table of the noise
// distribution, or a small pool of recent draws from it.
//
// Without a pool (noise_pool 0, word2vec) every noise node is a fresh draw: a column below
// the table's size, then its coin (keep the column's node, else its alias). Each draw
// names a random row of the output table, and once the tables outgrow the caches that row
// is read from memory.
//
// With a pool of P slots (filled with P fresh draws when the thread starts) a noise node is
// the node of a uniform slot; before every noise_reuse-th of them, the next slot in turn
// takes a fresh draw. Every slot holds an independent draw from the noise distribution, so
// each noise node still follows it; a fresh draw serves noise_reuse noise nodes on average,
// and the pool's P rows (P * D floats, sized by the caller to stay in the core's cache)
// are read from the cache, not from memory. Draws close in time are no longer independent:
// a node in the pool serves about noise_reuse contexts within P * noise_reuse draws.
// A fresh draw's column is read from the alias table only when its slot is first used,
// long after the draw (see NoiseSource::refresh): the same nodes, without waiting on memory.
#pragma once

#include "skipgram/tables.h"

#include <cstdint>
#include <vector>

namespace ge::skipgram {

// One draw of the alias table: a column, then its coin.
inline int64_t alias_draw(const Tables& t, SplitMix64& rng) {
  const uint64_t column = rng.below(t.noise_size);
  const double coin = rng.uniform();
  return coin < t.noise_keep[column] ? t.noise_node[column] : t.noise_alias[column];
}

class NoiseSource {
 public:
  // A thread's source: the pool (if any) filled with its first fresh draws.
  NoiseSource(const Tables& t, SplitMix64& rng)
      : reuse_(t.noise_reuse), left_(t.noise_reuse) {
    pool_.resize(static_cast<size_t>(t.noise_pool));
    for (Slot& slot : pool_) refresh(t, rng, slot);
  }

  // The next noise node; `cold` says whether its row may be outside the cache (a fresh
  // draw, or a pool slot read for the first time), so that only those rows are prefetched.
  int64_t draw(const Tables& t, SplitMix64& rng, bool& cold) {
    cold = true;
    if (pool_.empty()) return alias_draw(t, rng);
    if (--left_ == 0) {
      refresh(t, rng, pool_[next_]);
      next_ = next_ + 1 == pool_.size() ? 0 : next_ + 1;
      left_ = reuse_;
    }
    Slot& slot = pool_[rng.below(pool_.size())];
    cold = slot.node == kPending;
    if (cold) resolve(t, slot);
    return slot.node;
  }

 private:
  static constexpr int64_t kPending = -1;
  // One fresh draw: its node, or kPending until first read, with the column and coin that
  // name it.
  struct Slot {
    int64_t node = kPending;
    uint64_t column = 0;
    double coin = 0.0;
  };

  // A fresh draw into `slot`: its column and coin now (the stream's order of alias_draw),
  // its node when the slot is first read. A slot is read about pool-size draws later on
  // average, so the prefetched column has arrived by then instead of stalling this draw.
  void refresh(const Tables& t, SplitMix64& rng, Slot& slot) {
    const uint64_t column = rng.below(t.noise_size);
    slot.coin = rng.uniform();
    slot.column = column;
    slot.node = kPending;
    __builtin_prefetch(t.noise_keep + column, 0, 3);
    __builtin_prefetch(t.noise_node + column, 0, 3);
    __builtin_prefetch(t.noise_alias + column, 0, 3);
  }

  void resolve(const Tables& t, Slot& slot) {
    slot.node = slot.coin < t.noise_keep[slot.column] ? t.noise_node[slot.column]
                                                      : t.noise_alias[slot.column];
  }

  std::vector<Slot> pool_;
  size_t next_ = 0;
  int64_t reuse_, left_;
};

}  // namespace ge::skipgram
