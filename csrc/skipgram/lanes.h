// The skip-gram trainer's arithmetic on rows (one context against its targets), written once
// for a vector width kLanes: train.cpp instantiates the loop (loop.h) for 8 lanes inside a
// function compiled for AVX2 and FMA, and for 4 lanes for any CPU. Every function is forced
// inline so that the whole loop is compiled for the target of the function that
// instantiates it.
//
// Rows are processed kLanes floats at a time in GCC/Clang vector types; output rows are in
// one of the formats of output_rows.h (Format), read into float lanes and written back
// through the thread's Writes.
#pragma once

#include "skipgram/output_rows.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#define GE_INLINE __attribute__((always_inline)) static inline

namespace ge::skipgram {

template <int kLanes, typename Format>
struct LaneKernels {
  typedef float Lanes __attribute__((vector_size(4 * kLanes)));
  using Io = OutputLanes<kLanes, Format>;
  using Row = typename Io::Row;
  using Writes = typename Io::Writes;

  GE_INLINE Lanes load_lanes(const float* p) {
    Lanes v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  GE_INLINE void store_lanes(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }

  template <typename V>
  GE_INLINE float sum_lanes(V v) {
    // Halves added pairwise in registers (a loop over v[i] goes through the stack).
    if constexpr (kLanes == 8) {
      typedef float Half __attribute__((vector_size(16)));
      const Half half = __builtin_shufflevector(v, v, 0, 1, 2, 3) +
                        __builtin_shufflevector(v, v, 4, 5, 6, 7);
      return (half[0] + half[2]) + (half[1] + half[3]);
    } else {
      return (v[0] + v[2]) + (v[1] + v[3]);
    }
  }

  // f[j] = in . out[j] for N rows at once: N independent accumulators, so the products of
  // one context run side by side instead of in one chain of dependent additions.
  template <int N>
  GE_INLINE void dots(const float* in, const Row* out, int64_t dim, float* f) {
    Lanes acc[N] = {};
    int64_t d = 0;
    for (; d + kLanes <= dim; d += kLanes) {
      const Lanes x = load_lanes(in + d);
      for (int j = 0; j < N; ++j) acc[j] += x * Io::load(out[j], d);
    }
    for (int j = 0; j < N; ++j) {
      f[j] = sum_lanes(acc[j]);
      for (int64_t e = d; e < dim; ++e) f[j] += in[e] * Io::get(out[j], e);
    }
  }

  GE_INLINE void all_dots(const float* in, const Row* out, int count, int64_t dim, float* f) {
    for (; count >= 4; count -= 4, out += 4, f += 4) dots<4>(in, out, dim, f);
    if (count == 3) dots<3>(in, out, dim, f);
    if (count == 2) dots<2>(in, out, dim, f);
    if (count == 1) dots<1>(in, out, dim, f);
  }

  // The gradient factor of target j's score f (target 0 is the predicted node, label 1;
  // the others noise nodes, label 0).
  GE_INLINE float gradient(int j, float f, float alpha) {
    return ((j == 0 ? 1.0f : 0.0f) - 1.0f / (1.0f + std::exp(-f))) * alpha;
  }

  // word2vec's update of one context row against its targets, all distinct nodes: each
  // score reads the rows as they were before the context (a target's row changes only
  // after its own score, the context row only after the last target). g: count floats of
  // scratch. Returns how many scores were not finite.
  GE_INLINE int64_t train_context(float* in, const Row* out, int count, int64_t dim, float alpha,
                                  float* g, Writes& shared) {
    Writes writes = shared;  // a local copy stays in registers (see output_rows.h)
    writes.refresh();
    all_dots(in, out, count, dim, g);
    int64_t nonfinite = 0;
    for (int j = 0; j < count; ++j) {
      nonfinite += !std::isfinite(g[j]);
      g[j] = gradient(j, g[j], alpha);
    }
    // Two vectors of every row per step: the input row's change sums its targets in a chain
    // of dependent additions, so two chains side by side keep the adders busy.
    int64_t d = 0;
    for (; d + 2 * kLanes <= dim; d += 2 * kLanes) {
      const Lanes x0 = load_lanes(in + d), x1 = load_lanes(in + d + kLanes);
      Lanes change0 = {}, change1 = {};
      for (int j = 0; j < count; ++j) {
        const Lanes row0 = Io::load(out[j], d), row1 = Io::load(out[j], d + kLanes);
        change0 += g[j] * row0;
        change1 += g[j] * row1;
        Io::store(out[j], d, row0 + g[j] * x0, writes);
        Io::store(out[j], d + kLanes, row1 + g[j] * x1, writes);
      }
      store_lanes(in + d, x0 + change0);
      store_lanes(in + d + kLanes, x1 + change1);
    }
    for (; d < dim; ++d) {
      float change = 0.0f;
      for (int j = 0; j < count; ++j) {
        const float row = Io::get(out[j], d);
        change += g[j] * row;
        Io::put(out[j], d, row + g[j] * in[d], writes);
      }
      in[d] += change;
    }
    shared = writes;
    return nonfinite;
  }

  // train_context for exactly N distinct targets and dim a multiple of kLanes: the loops
  // over the targets unroll, the scores' accumulators and gradient factors stay in
  // registers (two accumulators a target, so each chain of dependent additions is half as
  // long). Same updates as train_context; the dot products add in another order. Narrow
  // rows are converted once: the scores' pass keeps them as floats in `wide` (N * dim
  // floats of scratch) for the updates' pass.
  template <int N>
  GE_INLINE int64_t train_targets(float* in, const Row* out, int64_t dim, float alpha,
                                  float* wide, Writes& shared) {
    constexpr bool kNarrow = !std::is_same_v<Format, Float32Rows>;
    Writes writes = shared;  // a local copy stays in registers (see output_rows.h)
    writes.refresh();
    // Accumulators a target (16 vector registers; narrow rows need some to convert).
    constexpr int kSplit = N <= 6 && !kNarrow ? 2 : 1;
    Row row[N];
    for (int j = 0; j < N; ++j) row[j] = out[j];
    Lanes acc[kSplit][N] = {};
    int64_t d = 0;
    // Target j's values d .. d + kLanes, kept for the updates when narrow.
    auto read = [&](int j, int64_t at) __attribute__((always_inline)) {
      const Lanes r = Io::load(row[j], at);
      if constexpr (kNarrow) store_lanes(wide + j * dim + at, r);
      return r;
    };
    for (; d + kSplit * kLanes <= dim; d += kSplit * kLanes) {
      for (int s = 0; s < kSplit; ++s) {
        const Lanes x = load_lanes(in + d + s * kLanes);
        for (int j = 0; j < N; ++j) acc[s][j] += x * read(j, d + s * kLanes);
      }
    }
    for (; d < dim; d += kLanes) {
      const Lanes x = load_lanes(in + d);
      for (int j = 0; j < N; ++j) acc[0][j] += x * read(j, d);
    }
    float g[N];
    int64_t nonfinite = 0;
    for (int j = 0; j < N; ++j) {
      Lanes total = acc[0][j];
      for (int s = 1; s < kSplit; ++s) total += acc[s][j];
      const float f = sum_lanes(total);
      nonfinite += !std::isfinite(f);
      g[j] = gradient(j, f, alpha);
    }
    for (d = 0; d < dim; d += kLanes) {
      const Lanes x = load_lanes(in + d);
      Lanes change = {};
      for (int j = 0; j < N; ++j) {
        const Lanes r = kNarrow ? load_lanes(wide + j * dim + d) : Io::load(row[j], d);
        change += g[j] * r;
        Io::store(row[j], d, r + g[j] * x, writes);
      }
      store_lanes(in + d, x + change);
    }
    shared = writes;
    return nonfinite;
  }

  // train_targets<count> where count is 1 .. 8 and dim a multiple of kLanes, else
  // train_context. g: count * dim floats of scratch.
  GE_INLINE int64_t train_distinct(float* in, const Row* out, int count, int64_t dim, float alpha,
                                   float* g, Writes& r) {
    if (dim % kLanes == 0) {
      switch (count) {
        case 1: return train_targets<1>(in, out, dim, alpha, g, r);
        case 2: return train_targets<2>(in, out, dim, alpha, g, r);
        case 3: return train_targets<3>(in, out, dim, alpha, g, r);
        case 4: return train_targets<4>(in, out, dim, alpha, g, r);
        case 5: return train_targets<5>(in, out, dim, alpha, g, r);
        case 6: return train_targets<6>(in, out, dim, alpha, g, r);
        case 7: return train_targets<7>(in, out, dim, alpha, g, r);
        case 8: return train_targets<8>(in, out, dim, alpha, g, r);
        default: break;
      }
    }
    return train_context(in, out, count, dim, alpha, g, r);
  }

  // The same when a node is two of the targets: target after target, each score reading
  // the rows as the earlier targets left them (word2vec's order). neu1e: dim floats.
  GE_INLINE int64_t train_context_in_order(float* in, const Row* out, int count, int64_t dim,
                                           float alpha, float* neu1e, Writes& shared) {
    Writes writes = shared;  // a local copy stays in registers (see output_rows.h)
    writes.refresh();
    std::fill(neu1e, neu1e + dim, 0.0f);
    int64_t nonfinite = 0;
    for (int j = 0; j < count; ++j) {
      float f;
      dots<1>(in, out + j, dim, &f);
      nonfinite += !std::isfinite(f);
      const float g = gradient(j, f, alpha);
      int64_t d = 0;
      for (; d + kLanes <= dim; d += kLanes) {  // the same arithmetic, kLanes values at once
        const Lanes row = Io::load(out[j], d);
        store_lanes(neu1e + d, load_lanes(neu1e + d) + g * row);
        Io::store(out[j], d, row + g * load_lanes(in + d), writes);
      }
      for (; d < dim; ++d) {
        const float row = Io::get(out[j], d);
        neu1e[d] += g * row;
        Io::put(out[j], d, row + g * in[d], writes);
      }
    }
    for (int64_t d = 0; d < dim; ++d) in[d] += neu1e[d];
    shared = writes;
    return nonfinite;
  }
};

}  // namespace ge::skipgram

