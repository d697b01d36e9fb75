// Where a thread's noise nodes come from (plan.h): fresh draws of the noise distribution
// (tables.h's NoiseTable), or a small pool of recent ones.
//
// A fresh draw is one 64-bit key from the thread's stream; its node is a function of the
// key alone (resolve), read from the stream SplitMix64{key}. With slots (tables.h), its
// first uniform picks the nodes below the floor with probability alias_share; then each
// attempt is an index (below the alias table's columns, the slots, or the nodes), then a
// coin. The alias table decides at once (the column's node if the coin is below its keep,
// else its alias); a slot's node is accepted if coin^4 * count < floor (the coin below
// (floor / count) ** 0.25), a uniform node if its count c is in (0, floor) and
// coin * lack_bound < lack(c); else the next attempt. Because the node depends on the key
// only, resolving it early, late or in steps gives the same node: a pool resolves its fresh
// draws in steps, between other draws, so that each step's read has arrived from memory by
// the time it is needed.
//
// Without a pool (noise_pool 0, word2vec) every noise node is a fresh draw, resolved at
// once: each names a random row of the output table, and once the tables outgrow the
// caches that row is read from memory.
//
// With a pool of P slots (filled with P fresh draws when the thread starts) a noise node is
// the node of a uniform slot; before every noise_reuse-th of them, a fresh draw is made for
// the next slot in turn, which takes it kDelay fresh draws later (NoiseSource::refresh).
// Every slot holds an independent draw from the noise distribution, so
// each noise node still follows it; a fresh draw serves noise_reuse noise nodes on average,
// and the pool's P rows (P * D floats, sized by the caller to stay in the core's cache)
// are read from the cache, not from memory. Draws close in time are no longer independent:
// a node in the pool serves about noise_reuse contexts within P * noise_reuse draws.
#pragma once

#include "skipgram/tables.h"

#include <array>
#include <cstdint>
#include <vector>

namespace ge::skipgram {

constexpr int64_t kPendingNode = -1;

// Where a fresh draw's attempts come from.
enum class Source { kAlias, kSlots, kUniform };

// A fresh draw on its way to a node: the key's stream, where its attempts come from, the
// current attempt's index and coin, and (slots) the node read from its slot.
struct PendingDraw {
  uint64_t state;
  Source source = Source::kAlias;
  uint64_t index = 0;
  double coin = 0.0;
  int64_t candidate = kPendingNode;
};

// The next attempt of `draw`: its index and coin from the key's stream, its first read
// prefetched.
inline void start_attempt(const NoiseTable& n, PendingDraw& draw) {
  SplitMix64 stream{draw.state};
  const uint64_t size = draw.source == Source::kAlias   ? n.columns
                        : draw.source == Source::kSlots ? n.slot_count
                                                        : n.num_nodes;
  draw.index = stream.below(size);
  draw.coin = stream.uniform();
  draw.state = stream.state;
  draw.candidate = kPendingNode;
  if (draw.source == Source::kSlots) {
    __builtin_prefetch(n.slots + draw.index, 0, 3);
  } else if (draw.source == Source::kAlias) {
    __builtin_prefetch(n.keep + draw.index, 0, 3);
    __builtin_prefetch(n.node + draw.index, 0, 3);
    __builtin_prefetch(n.alias + draw.index, 0, 3);
  }  // a uniform node's count is prefetched by its first step (advance)
}

inline PendingDraw fresh_draw(const NoiseTable& n, SplitMix64& rng) {
  PendingDraw draw{rng.next()};
  if (n.slots != nullptr) {
    SplitMix64 stream{draw.state};
    const bool below = stream.uniform() < n.alias_share;
    draw.source = !below ? Source::kSlots : n.lack_bound > 0.0 ? Source::kUniform : Source::kAlias;
    draw.state = stream.state;
  }
  start_attempt(n, draw);
  return draw;
}

// One step of `draw`: its node once decided, else kPendingNode (the next read prefetched).
inline int64_t advance(const Tables& t, PendingDraw& draw) {
  const NoiseTable& n = t.noise;
  if (draw.source == Source::kAlias)
    return draw.coin < n.keep[draw.index] ? n.node[draw.index] : n.alias[draw.index];
  if (draw.candidate == kPendingNode) {
    draw.candidate = draw.source == Source::kSlots ? n.slots[draw.index]
                                                   : static_cast<int64_t>(draw.index);
    __builtin_prefetch(t.counts.address(draw.candidate), 0, 3);
    return kPendingNode;
  }
  const double count = t.counts.count(draw.candidate);
  if (draw.source == Source::kSlots) {
    const double square = draw.coin * draw.coin;
    if (square * square * count < n.floor) return draw.candidate;
  } else if (count > 0.0 && count < n.floor && draw.coin * n.lack_bound < n.lack(count)) {
    return draw.candidate;
  }
  start_attempt(n, draw);
  return kPendingNode;
}

inline int64_t resolve(const Tables& t, PendingDraw& draw) {
  int64_t node = advance(t, draw);
  while (node == kPendingNode) node = advance(t, draw);
  return node;
}

class NoiseSource {
 public:
  // A thread's source: the pool (if any) filled with its first fresh draws.
  NoiseSource(const Tables& t, SplitMix64& rng) : reuse_(t.noise_reuse), left_(t.noise_reuse) {
    pool_.reserve(static_cast<size_t>(t.noise_pool));
    for (int64_t i = 0; i < t.noise_pool; ++i) {
      PendingDraw draw = fresh_draw(t.noise, rng);
      pool_.push_back({resolve(t, draw), false});
    }
  }

  // The next noise node; `cold` says whether its row may be outside the cache (a fresh
  // draw, or a pool slot read for the first time), so that only those rows are prefetched.
  int64_t draw(const Tables& t, SplitMix64& rng, bool& cold) {
    cold = true;
    if (pool_.empty()) {
      PendingDraw draw = fresh_draw(t.noise, rng);
      return resolve(t, draw);
    }
    if (--left_ == 0) refresh(t, rng);
    Slot& slot = pool_[rng.below(pool_.size())];
    cold = !slot.read;  // its row is read for the first time
    slot.read = true;
    return slot.node;
  }

 private:
  struct Slot {
    int64_t node;
    bool read;  // drawn as a noise node since it took its node
  };
  // A fresh draw on its way to its slot.
  struct Queued {
    PendingDraw draw;
    int64_t node;  // kPendingNode until resolved
    size_t slot;
  };
  // A fresh draw takes its slot kDelay refreshes after it is drawn (the slot serves its
  // old node meanwhile: still a draw of the noise distribution). In between, each refresh
  // advances it by one step (but in its first kSettle, while its first read is on its way),
  // so that it is nearly always resolved when it lands, without waiting on memory.
  static constexpr size_t kDelay = 16;
  static constexpr size_t kSettle = 2;

  void refresh(const Tables& t, SplitMix64& rng) {
    for (size_t i = 0; i + kSettle < queued_; ++i) {
      Queued& entry = queue_[(head_ + i) % kDelay];
      if (entry.node == kPendingNode) entry.node = advance(t, entry.draw);
    }
    if (queued_ == kDelay) {
      Queued& oldest = queue_[head_];
      if (oldest.node == kPendingNode) oldest.node = resolve(t, oldest.draw);
      pool_[oldest.slot] = {oldest.node, false};
      head_ = (head_ + 1) % kDelay;
      --queued_;
    }
    queue_[(head_ + queued_) % kDelay] = {fresh_draw(t.noise, rng), kPendingNode, next_};
    ++queued_;
    next_ = next_ + 1 == pool_.size() ? 0 : next_ + 1;
    left_ = reuse_;
  }

  std::vector<Slot> pool_;
  std::array<Queued, kDelay> queue_{};
  size_t head_ = 0, queued_ = 0;
  size_t next_ = 0;
  int64_t reuse_, left_;
};

}  // namespace ge::skipgram
