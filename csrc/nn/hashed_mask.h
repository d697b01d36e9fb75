// Dropout's mask as a hash, shared by the dropout kernel and the aggregation kernels that
// apply a dropout to the rows they read or write (so that the dropped rows are never
// written out): element i of a call is kept when a 32-bit hash of (key, i) is at least
// `threshold`, and then scaled by `scale`. See dropout.cpp for the hash and its tests.
#pragma once

#include <cstdint>

namespace ge {

inline uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6BU;
  h ^= h >> 13;
  h *= 0xC2B2AE35U;
  h ^= h >> 16;
  return h;
}

// The hash of element `low` + 2^32 `high_bits` of a call whose key's halves are low_key and
// high_key (high = high_key + the element index's high word): one finalizer over
// (low ^ low_key) * golden + fmix32(high). Every step is a bijection of 32 bits, so over
// the 2^32 elements that share `high` every word comes out once. The key enters twice, by
// xor and by addition: with the offset alone, two calls whose offsets differed by a
// multiple of golden would draw shifted copies of one mask. `high` is the same for a span
// of 2^32 elements, so its finalizer is computed once per loop, not per element.
inline uint32_t mask_word(uint32_t low, uint32_t high, uint32_t low_key) {
  return fmix32((low ^ low_key) * 0x9E3779B9U + fmix32(high));
}

// A call's mask: x[i] -> x[i] * factor(i), factor = scale or 0 (masked = false: no mask).
template <typename T>
struct HashedMask {
  bool masked;
  uint32_t threshold;
  T scale;
  uint64_t key;

  // body(f, factor(first + f)) for f in [0, count), in order: in 32-bit arithmetic
  // wherever the indices keep their high word (all but one span in 2^32 elements).
  template <typename Body>
  inline __attribute__((always_inline)) void for_each_factor(int64_t first, int64_t count,
                                                             Body body) const {
    // locals, not members: the body's stores could alias them, which keeps the loop scalar
    const uint32_t cut = threshold;
    const T kept = scale;
    const auto low_key = static_cast<uint32_t>(key);
    const auto start = static_cast<uint64_t>(first);
    const auto low = static_cast<uint32_t>(start);
    const auto high_key = static_cast<uint32_t>(key >> 32);
    if (static_cast<uint64_t>(low) + static_cast<uint64_t>(count) <= (uint64_t{1} << 32)) {
      const uint32_t high = high_key + static_cast<uint32_t>(start >> 32);
      for (uint32_t f = 0; f < static_cast<uint32_t>(count); ++f)
        body(f, mask_word(low + f, high, low_key) >= cut ? kept : T(0));
      return;
    }
    for (int64_t f = 0; f < count; ++f) {  // the index's high word changes in this span
      const uint64_t i = start + static_cast<uint64_t>(f);
      const uint32_t high = high_key + static_cast<uint32_t>(i >> 32);
      body(f, mask_word(static_cast<uint32_t>(i), high, low_key) >= cut ? kept : T(0));
    }
  }
};

}  // namespace ge
