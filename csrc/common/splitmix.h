// splitmix64 (Steele, Lea and Flood, 2014): the PRNG of the sampler (sampler.cpp), the
// walker (walks.cpp) and the skip-gram trainer (skipgram/). A state advanced by a fixed odd
// constant, passed through a 64-bit finaliser (mix); one 64-bit draw per step.
#pragma once

#include <cstdint>

namespace splitmix {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;

// splitmix64's output function, also a good 64-bit hash for seeding a stream.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    state += kGamma;
    return mix(state);
  }
  // Uniform in [0, n) up to a bias below n / 2^64: the high 64 bits of x * n.
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }
  // Uniform in [0, n), n >= 1, without bias (Lemire's multiply and reject).
  uint64_t below_exact(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Uniform in [0, 1): the top 53 bits of a draw.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

// The stream of item (major, minor) of a call keyed `key` (a sampler's layer and seed, a
// walker): a draw depends on the key and the item only, never on which thread takes it.
inline SplitMix64 stream(uint64_t key, uint64_t major, uint64_t minor = 0) {
  return SplitMix64{mix(key ^ mix(major * 0xD1B54A32D192ED03ULL + minor))};
}

}  // namespace splitmix
