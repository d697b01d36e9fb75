// How the skip-gram trainer reads and writes its output rows (syn1), in one of three formats,
// always with float32 arithmetic:
//
//   Float32Rows   float32 (4 bytes a value);
//   Float24Rows   a float32 less its 8 lowest significand bits (3 bytes a value: 15 bits of
//                 significand, a relative step of 2^-15), packed in blocks of 8 values: their
//                 8 high halves (a bfloat16 each), then their 8 third bytes, 24 bytes a
//                 block, a row padded to whole blocks;
//   BFloat16Rows  bfloat16 (2 bytes a value, a relative step of 2^-7).
//
// Reading a narrow value is a shift. Writing one rounds stochastically: a uniform number
// below the dropped part's unit is added to the float's bits before they are dropped, so
// the stored value is the float32 result rounded up or down with probabilities that make it
// exact on average. Round-to-nearest would lose every update below half a step: late in a
// run, when the learning rate is small, most of them. Still, each write adds noise of up to
// a step; with bfloat16's step that costs a run F1 points (benchmarks/results), with
// float24's (256 times finer) it is below the updates' own noise.
//
// The random bits come from per-thread generators (StochasticRounding), seeded apart from the
// thread's stream of draws, so that the draws (and a float32 run) do not change with the
// output rows' format. A function that writes rows works on a local copy of the generator:
// the row stores could alias a state reached through a reference, which would keep it in
// memory, a store and a load per write.
#pragma once

#include "common/splitmix.h"

#include <cstdint>
#include <cstring>

#include <immintrin.h>

#define GE_ROWS_INLINE __attribute__((always_inline)) static inline

namespace ge::skipgram {

// The output rows' formats (the header comment), as ge_skipgram_config's syn1_format.
struct Float32Rows {};
struct BFloat16Rows {};
struct Float24Rows {};

// The bits of `from` as a To of the same size (std::bit_cast of C++20).
template <typename To, typename From>
GE_ROWS_INLINE To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

// kLanes floats and 32-, 16- and 8-bit integers in a vector (spelled out per width: GCC drops a
// vector_size that depends on a template parameter from an integer typedef).
template <int kLanes>
struct BitLanes;
template <>
struct BitLanes<4> {
  typedef float Floats __attribute__((vector_size(16)));
  typedef uint32_t Bits __attribute__((vector_size(16)));
  typedef uint16_t Halves __attribute__((vector_size(8)));
  typedef uint8_t Bytes __attribute__((vector_size(4)));
};
template <>
struct BitLanes<8> {
  typedef float Floats __attribute__((vector_size(32)));
  typedef uint32_t Bits __attribute__((vector_size(32)));
  typedef uint16_t Halves __attribute__((vector_size(16)));
  typedef uint8_t Bytes __attribute__((vector_size(8)));
};

// No state: float32 rows are written as computed.
struct ExactWrites {
  explicit ExactWrites(uint64_t) {}
  void refresh() {}
};

// Per lane, a Weyl sequence (a counter advanced by an odd constant, whose top bits are
// evenly spread) that an xorshift32 generator re-randomises once per context (refresh):
// each write's random bits cost one addition, without the chain of dependent operations
// that stepping a generator per write would put between a row's writes.
template <int kLanes>
struct StochasticRounding {
  using Bits = typename BitLanes<kLanes>::Bits;
  Bits weyl, state;

  explicit StochasticRounding(uint64_t seed) {
    for (int i = 0; i < kLanes; ++i) {
      const uint64_t bits = splitmix::mix(seed + i * splitmix::kGamma);
      state[i] = static_cast<uint32_t>(bits) | 1u;  // xorshift32 never leaves 0
      weyl[i] = static_cast<uint32_t>(bits >> 32);
    }
  }
  __attribute__((always_inline)) inline void refresh() {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    weyl ^= state;
  }
  // kLanes uniform numbers below 2^kDropped.
  template <int kDropped>
  __attribute__((always_inline)) inline Bits next() {
    weyl += 0x9E3779B9u;  // 2^32 / golden ratio, odd
    return weyl >> (32 - kDropped);
  }
};

// OutputLanes<kLanes, Format>: a row of the table (Row, row_bytes), kLanes values of it at
// index d as float lanes (load, store; d a multiple of kLanes) or one value (get, put), and
// the per-thread state that writes need (Writes).
template <int kLanes, typename Format>
struct OutputLanes;

template <int kLanes>
struct OutputLanes<kLanes, Float32Rows> {
  using Lanes = typename BitLanes<kLanes>::Floats;
  using Row = float*;
  using Writes = ExactWrites;

  static constexpr int64_t row_bytes(int64_t dim) { return 4 * dim; }
  GE_ROWS_INLINE Lanes load(Row r, int64_t d) {
    Lanes v;
    std::memcpy(&v, r + d, sizeof v);
    return v;
  }
  GE_ROWS_INLINE void store(Row r, int64_t d, Lanes v, Writes&) {
    std::memcpy(r + d, &v, sizeof v);
  }
  GE_ROWS_INLINE float get(Row r, int64_t d) { return r[d]; }
  GE_ROWS_INLINE void put(Row r, int64_t d, float v, Writes&) { r[d] = v; }
};

template <int kLanes>
struct OutputLanes<kLanes, BFloat16Rows> {
  using Lanes = typename BitLanes<kLanes>::Floats;
  using Bits = typename BitLanes<kLanes>::Bits;
  using Halves = typename BitLanes<kLanes>::Halves;
  using Row = uint16_t*;
  using Writes = StochasticRounding<kLanes>;

  static constexpr int64_t row_bytes(int64_t dim) { return 2 * dim; }
  GE_ROWS_INLINE Lanes load(Row r, int64_t d) {
    Halves h;
    std::memcpy(&h, r + d, sizeof h);
    return bit_cast<Lanes>(__builtin_convertvector(h, Bits) << 16);
  }
  GE_ROWS_INLINE void store(Row r, int64_t d, Lanes v, Writes& w) {
    const Bits bits = (bit_cast<Bits>(v) + w.template next<16>()) >> 16;
    const Halves h = __builtin_convertvector(bits, Halves);
    std::memcpy(r + d, &h, sizeof h);
  }
  GE_ROWS_INLINE float get(Row r, int64_t d) {
    return bit_cast<float>(static_cast<uint32_t>(r[d]) << 16);
  }
  GE_ROWS_INLINE void put(Row r, int64_t d, float v, Writes& w) {
    r[d] = static_cast<uint16_t>((bit_cast<uint32_t>(v) + w.template next<16>()[0]) >> 16);
  }
};

// A whole float24 block as 8 float32s, and back (given the float32s' bits with their
// random addend). Reading is two zero-extending loads (the 16-bit high halves and the third
// bytes to 32 bits, one shuffle each), two shifts and an or; GCC turns conversions of
// 8-bit vectors into scalar code, so they are spelled as intrinsics, compiled for AVX2:
// only the 8-lane loop reads whole blocks, inside functions compiled for AVX2 (train.cpp),
// where the call is inlined. Writing is byte shuffles, which GCC compiles into a few vector
// instructions of the caller's target.
namespace float24 {
typedef uint8_t Bytes32 __attribute__((vector_size(32)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef uint32_t Words8 __attribute__((vector_size(32)));
typedef uint32_t Words4 __attribute__((vector_size(16)));
typedef uint32_t Words2 __attribute__((vector_size(8)));

__attribute__((target("avx2"))) inline Floats8 load_block(const uint8_t* block) {
  const __m256i high =
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block)));
  const __m256i third =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 16)));
  return bit_cast<Floats8>(
      _mm256_or_si256(_mm256_slli_epi32(high, 16), _mm256_slli_epi32(third, 8)));
}

__attribute__((always_inline)) inline void store_block(uint8_t* block, Bytes32 bits) {
  // Within each 16-byte half (one byte shuffle): its 4 high halves, then its 4 third bytes;
  // then the halves' pieces side by side (one 32-bit permute): the block's 24 bytes.
  const Bytes32 grouped = __builtin_shufflevector(
      bits, bits, 2, 3, 6, 7, 10, 11, 14, 15, 1, 5, 9, 13, 0, 0, 0, 0,  //
      18, 19, 22, 23, 26, 27, 30, 31, 17, 21, 25, 29, 16, 16, 16, 16);
  const Words8 words = bit_cast<Words8>(grouped);
  // Stored from the registers as 16 + 8 bytes: one 24-byte copy of the vector goes
  // through the stack, and its 8-byte reload waits on a store it cannot forward from.
  const Words4 high_halves = __builtin_shufflevector(words, words, 0, 1, 4, 5);
  const Words2 third_bytes = __builtin_shufflevector(words, words, 2, 6);
  std::memcpy(block, &high_halves, sizeof high_halves);
  std::memcpy(block + 16, &third_bytes, sizeof third_bytes);
}
}  // namespace float24

template <int kLanes>
struct OutputLanes<kLanes, Float24Rows> {
  using Lanes = typename BitLanes<kLanes>::Floats;
  using Bits = typename BitLanes<kLanes>::Bits;
  using Halves = typename BitLanes<kLanes>::Halves;
  using Bytes = typename BitLanes<kLanes>::Bytes;
  using Row = uint8_t*;
  using Writes = StochasticRounding<kLanes>;
  static constexpr int64_t kBlock = 8;  // values a block: 16 bytes of high halves, 8 of third bytes

  static constexpr int64_t row_bytes(int64_t dim) { return (dim + kBlock - 1) / kBlock * 24; }
  // Where value d's high half and third byte are (kLanes values from d stay in one block).
  GE_ROWS_INLINE uint8_t* high(Row r, int64_t d) {
    const auto i = static_cast<uint64_t>(d);
    return r + i / kBlock * 24 + 2 * (i % kBlock);
  }
  GE_ROWS_INLINE uint8_t* third(Row r, int64_t d) {
    const auto i = static_cast<uint64_t>(d);
    return r + i / kBlock * 24 + 16 + i % kBlock;
  }

  GE_ROWS_INLINE Lanes load(Row r, int64_t d) {
    if constexpr (kLanes == 8) return bit_cast<Lanes>(float24::load_block(high(r, d)));
    Halves h;
    Bytes b;
    std::memcpy(&h, high(r, d), sizeof h);
    std::memcpy(&b, third(r, d), sizeof b);
    const Bits bits = __builtin_convertvector(h, Bits) << 16 | __builtin_convertvector(b, Bits) << 8;
    return bit_cast<Lanes>(bits);
  }
  GE_ROWS_INLINE void store(Row r, int64_t d, Lanes v, Writes& w) {
    if constexpr (kLanes == 8) {
      const Bits bits = bit_cast<Bits>(v) + w.template next<8>();
      return float24::store_block(high(r, d), bit_cast<float24::Bytes32>(bits));
    }
    const Bits bits = (bit_cast<Bits>(v) + w.template next<8>()) >> 8;
    const Halves h = __builtin_convertvector(bits >> 8, Halves);
    const Bytes b = __builtin_convertvector(bits, Bytes);
    std::memcpy(high(r, d), &h, sizeof h);
    std::memcpy(third(r, d), &b, sizeof b);
  }
  GE_ROWS_INLINE float get(Row r, int64_t d) {
    uint16_t h;
    std::memcpy(&h, high(r, d), sizeof h);
    return bit_cast<float>(static_cast<uint32_t>(h) << 16 | static_cast<uint32_t>(*third(r, d)) << 8);
  }
  GE_ROWS_INLINE void put(Row r, int64_t d, float v, Writes& w) {
    const uint32_t bits = (bit_cast<uint32_t>(v) + w.template next<8>()[0]) >> 8;
    const auto h = static_cast<uint16_t>(bits >> 8);
    std::memcpy(high(r, d), &h, sizeof h);
    *third(r, d) = static_cast<uint8_t>(bits);
  }
};

// Node `node`'s row of a table of `dim` values a row, in the format of Io (an OutputLanes).
template <typename Io>
GE_ROWS_INLINE typename Io::Row output_row_at(void* table, int64_t node, int64_t dim) {
  return reinterpret_cast<typename Io::Row>(static_cast<uint8_t*>(table) +
                                            node * Io::row_bytes(dim));
}

}  // namespace ge::skipgram

#undef GE_ROWS_INLINE
