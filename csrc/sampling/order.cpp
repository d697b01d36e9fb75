// A seeded pseudo-random order of 0 .. n - 1 at consecutive positions: the CPU path of
// graphemb/sampling/permutation.py's RandomOrder, whose docstring gives the construction (a
// keyed Feistel network on k-bit halves, lowbias32 as its round function, restricted to
// [0, n) by cycle walking, then 0 and 1 swapped when the seed says so). The same values as
// the pure-torch code, position for position, written straight into the caller's array:
// where a dozen torch temporaries per block were freed into the C heap each chunk of walks
// (in a different place each time, so that a long run kept ever more of the heap's pages),
// this allocates nothing.
#include "common/errors.h"
#include "common/parallel.h"
#include "graphemb_kernels.h"

#include <cstdint>

namespace ge {
namespace {

// Positions a thread takes at least (about 0.1 ms of work).
constexpr int64_t kOrderGrain = 1 << 14;

// lowbias32 of half ^ key, its top `bits` bits (the torch code's _round_function).
inline uint64_t round_function(uint64_t half, uint32_t key, int bits) {
  uint32_t x = static_cast<uint32_t>(half) ^ key;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x >> (32 - bits);
}

struct Feistel {
  const int64_t* keys;
  int64_t rounds;
  int bits;
  bool odd;

  // One pass of the network over [0, 4**bits) (the torch code's _encrypt).
  uint64_t encrypt(uint64_t value) const {
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    uint64_t left = value >> bits, right = value & mask;
    for (int64_t r = 0; r < rounds; ++r) {
      const uint64_t next = left ^ round_function(right, static_cast<uint32_t>(keys[r]), bits);
      left = right;
      right = next;
    }
    value = left << bits | right;
    return odd && value < 2 ? value ^ 1 : value;
  }
};

}  // namespace
}  // namespace ge

extern "C" int ge_random_order(int64_t num_nodes, int64_t half_bits, const int64_t* keys,
                               int64_t rounds, int odd, int64_t start, int64_t count,
                               int64_t* out, int64_t out_stride) {
  using namespace ge;
  return guarded([&] {
    require(half_bits >= 1 && half_bits <= 31, GE_VALUE_ERROR,
            "graphemb_kernels.random_order: half_bits = ", half_bits, " must lie in [1, 31]");
    require(num_nodes >= 0 && num_nodes <= (int64_t{1} << (2 * half_bits)), GE_VALUE_ERROR,
            "graphemb_kernels.random_order: num_nodes = ", num_nodes, " outside [0, 4**",
            half_bits, "]");
    require(start >= 0 && count >= 0 && start + count <= num_nodes, GE_VALUE_ERROR,
            "graphemb_kernels.random_order: positions [", start, ", ", start + count,
            ") outside [0, ", num_nodes, ")");
    require(out_stride >= 1, GE_VALUE_ERROR, "graphemb_kernels.random_order: out_stride = ",
            out_stride, " must be at least 1");
    const Feistel network{keys, rounds, static_cast<int>(half_bits), odd != 0};
    const auto n = static_cast<uint64_t>(num_nodes);
    parallel_for(0, count, kOrderGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        uint64_t value = network.encrypt(static_cast<uint64_t>(start + i));
        while (value >= n) value = network.encrypt(value);  // cycle walking
        out[i * out_stride] = static_cast<int64_t>(value);
      }
    });
  });
}
