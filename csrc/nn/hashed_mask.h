// Dropout's mask as a hash, shared by the dropout kernel and the aggregation kernels that
// apply a dropout to the rows they read or write (so that the dropped rows are never
// written out): element i of a call is kept when a 16-bit half of a hash of (key, i) is at
// least `threshold`, and then scaled by `scale`. See dropout.cpp for the hash and its tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ge {

// murmur3's 32-bit finalizer, of one word or of each lane of a vector of words (Words).
template <typename Word>
inline __attribute__((always_inline)) Word fmix32(Word h) {
  h ^= h >> 16;
  h *= 0x85EBCA6BU;
  h ^= h >> 13;
  h *= 0xC2B2AE35U;
  h ^= h >> 16;
  return h;
}

// The hash of word `low` + 2^32 `high_bits` of a call whose key's halves are low_key and
// high_key (high = high_key + the word index's high word): one finalizer over
// (low ^ low_key) * golden + fmix32(high). Every step is a bijection of 32 bits, so over
// the 2^32 words that share `high` every word comes out once. The key enters twice, by
// xor and by addition: with the offset alone, two calls whose offsets differed by a
// multiple of golden would draw shifted copies of one mask. `high` is the same for a span
// of 2^32 words, so its finalizer is computed once per loop, not per word.
inline uint32_t mask_word(uint32_t low, uint32_t high, uint32_t low_key) {
  return fmix32((low ^ low_key) * 0x9E3779B9U + fmix32(high));
}

// Each word decides two elements, one per 16-bit half: in every aligned block of 16
// elements, element k < 8 takes the low half of the block's word k, element 8 + k the high
// half. A block's 8 words are consecutive, so one vector of 8 hashes serves 16 elements
// with no shuffle, and the finalizer's avalanche leaves the two halves of a word unrelated.
inline uint64_t word_of(uint64_t i) { return ((i >> 4) << 3) | (i & 7); }
inline uint32_t half_of(uint32_t word, uint64_t i) { return (i & 8) ? word >> 16 : word & 0xFFFFU; }

using Words = uint32_t __attribute__((vector_size(32)));  // 8 words: one block of 16 elements
using Halves = int32_t __attribute__((vector_size(32)));
constexpr Words kLanes = {0, 1, 2, 3, 4, 5, 6, 7};

// 8 factors written to out: `kept` where a lane of `keep` is all ones, else 0 (bitwise,
// so that no lane is taken out of the vector).
template <typename T>
struct FactorBits;  // the integers of T's width, 8 to a vector
template <>
struct FactorBits<float> {
  using Lanes = int32_t __attribute__((vector_size(32)));
  using Bits = int32_t;
};
template <>
struct FactorBits<double> {
  using Lanes = int64_t __attribute__((vector_size(64)));
  using Bits = int64_t;
};

template <typename T>
inline __attribute__((always_inline)) void select_factors(Halves keep, T kept, T* out) {
  using Lanes = typename FactorBits<T>::Lanes;
  typename FactorBits<T>::Bits kept_bits;
  std::memcpy(&kept_bits, &kept, sizeof kept);
  const Lanes factors = __builtin_convertvector(keep, Lanes) & kept_bits;  // 0 or -1 first
  std::memcpy(out, &factors, sizeof factors);
}

constexpr uint32_t kMaskLevels = 1U << 16;  // the values of a half: a threshold is one

// A call's mask: x[i] -> x[i] * factor(i), factor = scale or 0 (masked = false: no mask).
// threshold is in [0, 2^16): an element is kept when its half is at least threshold.
template <typename T>
struct HashedMask {
  bool masked;
  uint32_t threshold;
  T scale;
  uint64_t key;
  uint32_t first_offset;  // fmix32 of the key's high half: the words below 2^32 (of())

  static HashedMask of(uint32_t threshold, T scale, uint64_t key) {
    return {true, threshold, scale, key, fmix32(static_cast<uint32_t>(key >> 32))};
  }
  static HashedMask none() { return {false, 0, T(0), 0, 0}; }

  // The factor of element i, alone (for_each_factor's blocks give the same).
  inline T factor(uint64_t i) const {
    const uint64_t w = word_of(i);
    const uint32_t high = static_cast<uint32_t>(key >> 32) + static_cast<uint32_t>(w >> 32);
    const uint32_t word = mask_word(static_cast<uint32_t>(w), high, static_cast<uint32_t>(key));
    return half_of(word, i) >= threshold ? scale : T(0);
  }

  // body(f, factor(first + f)) for f in [0, count), in order. Where the range is whole
  // aligned blocks of 16 elements (a row of a multiple of 16 features: the layers' rows),
  // each block takes one vector of 8 hashes, and the body runs on the block's 16 factors as
  // one SIMD loop. Any other range goes one element at a time. The checks are few: most
  // calls are one row of a few hundred elements.
  template <typename Body>
  inline __attribute__((always_inline)) void for_each_factor(int64_t first, int64_t count,
                                                             Body body) const {
    const auto start = static_cast<uint64_t>(first);
    const uint64_t word0 = start >> 1, last_word = (start + static_cast<uint64_t>(count)) / 2 - 1;
    if (__builtin_expect(((start | static_cast<uint64_t>(count)) & 15) != 0 || count == 0 ||
                             (word0 >> 32) != (last_word >> 32), 0)) {
      for (int64_t f = 0; f < count; ++f) body(f, factor(start + static_cast<uint64_t>(f)));
      return;
    }
    // locals, not members: the body's stores could alias them, which keeps the loop scalar
    const auto high = static_cast<uint32_t>(word0 >> 32);
    const uint32_t offset =
        high == 0 ? first_offset : fmix32(static_cast<uint32_t>(key >> 32) + high);
    const auto low = static_cast<uint32_t>(word0);
    const auto low_key = static_cast<uint32_t>(key);
    const Halves cut = Halves{} + static_cast<int32_t>(threshold);
    const T kept = scale;
    for (int64_t b = 0; b < count; b += 16) {
      const uint32_t block_low = low + static_cast<uint32_t>(b / 2);
      const Words words = fmix32(((block_low + kLanes) ^ low_key) * 0x9E3779B9U + offset);
      alignas(64) T factors[16];
      select_factors(reinterpret_cast<Halves>(words & 0xFFFFU) >= cut, kept, factors);
      select_factors(reinterpret_cast<Halves>(words >> 16) >= cut, kept, factors + 8);
#pragma omp simd
      for (int64_t k = 0; k < 16; ++k) body(b + k, factors[k]);
    }
  }
};

}  // namespace ge
