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
  NoiseSource(const Tables& t, SplitMix64& rng) : reuse_(t.noise_reuse), left_(t.noise_reuse) {
    pool_.resize(static_cast<size_t>(t.noise_pool));
    for (auto& slot : pool_) slot = alias_draw(t, rng);
  }

  int64_t draw(const Tables& t, SplitMix64& rng) {
    if (pool_.empty()) return alias_draw(t, rng);
    if (--left_ == 0) {
      pool_[next_] = alias_draw(t, rng);
      next_ = next_ + 1 == pool_.size() ? 0 : next_ + 1;
      left_ = reuse_;
    }
    return pool_[rng.below(pool_.size())];
  }

 private:
  std::vector<int64_t> pool_;
  size_t next_ = 0;
  int64_t reuse_, left_;
};

}  // namespace ge::skipgram
