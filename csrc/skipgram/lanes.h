// The skip-gram trainer's per-thread loop (train.cpp), written once for a vector width
// kLanes: train.cpp instantiates it for 8 lanes inside a function compiled for AVX2 and
// FMA, and for 4 lanes for any CPU. Every function is forced inline so that the whole loop
// is compiled for the target of the function that instantiates it.
//
// Rows are processed kLanes floats at a time in GCC/Clang vector types.
#pragma once

#include "skipgram/tables.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#define GE_INLINE __attribute__((always_inline)) static inline

namespace ge::skipgram {

template <int kLanes>
struct LaneKernels {
  typedef float Lanes __attribute__((vector_size(4 * kLanes)));

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
  GE_INLINE void dots(const float* in, float* const* out, int64_t dim, float* f) {
    Lanes acc[N] = {};
    int64_t d = 0;
    for (; d + kLanes <= dim; d += kLanes) {
      const Lanes x = load_lanes(in + d);
      for (int j = 0; j < N; ++j) acc[j] += x * load_lanes(out[j] + d);
    }
    for (int j = 0; j < N; ++j) {
      f[j] = sum_lanes(acc[j]);
      for (int64_t e = d; e < dim; ++e) f[j] += in[e] * out[j][e];
    }
  }

  GE_INLINE void all_dots(const float* in, float* const* out, int count, int64_t dim, float* f) {
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
  GE_INLINE int64_t train_context(float* in, float* const* out, int count, int64_t dim, float alpha,
                               float* g) {
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
        const Lanes row0 = load_lanes(out[j] + d), row1 = load_lanes(out[j] + d + kLanes);
        change0 += g[j] * row0;
        change1 += g[j] * row1;
        store_lanes(out[j] + d, row0 + g[j] * x0);
        store_lanes(out[j] + d + kLanes, row1 + g[j] * x1);
      }
      store_lanes(in + d, x0 + change0);
      store_lanes(in + d + kLanes, x1 + change1);
    }
    for (; d < dim; ++d) {
      float change = 0.0f;
      for (int j = 0; j < count; ++j) {
        change += g[j] * out[j][d];
        out[j][d] += g[j] * in[d];
      }
      in[d] += change;
    }
    return nonfinite;
  }

  // train_context for exactly N distinct targets and dim a multiple of kLanes: the loops
  // over the targets unroll, the scores' accumulators and gradient factors stay in
  // registers (two accumulators a target, so each chain of dependent additions is half as
  // long). Same updates as train_context; the dot products add in another order.
  template <int N>
  GE_INLINE int64_t train_targets(float* in, float* const* out, int64_t dim, float alpha) {
    constexpr int kSplit = N <= 6 ? 2 : 1;  // accumulators a target (16 vector registers)
    float* row[N];
    for (int j = 0; j < N; ++j) row[j] = out[j];
    Lanes acc[kSplit][N] = {};
    int64_t d = 0;
    for (; d + kSplit * kLanes <= dim; d += kSplit * kLanes) {
      for (int s = 0; s < kSplit; ++s) {
        const Lanes x = load_lanes(in + d + s * kLanes);
        for (int j = 0; j < N; ++j) acc[s][j] += x * load_lanes(row[j] + d + s * kLanes);
      }
    }
    for (; d < dim; d += kLanes) {
      const Lanes x = load_lanes(in + d);
      for (int j = 0; j < N; ++j) acc[0][j] += x * load_lanes(row[j] + d);
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
        const Lanes r = load_lanes(row[j] + d);
        change += g[j] * r;
        store_lanes(row[j] + d, r + g[j] * x);
      }
      store_lanes(in + d, x + change);
    }
    return nonfinite;
  }

  // train_targets<count> where count is 1 .. 8 and dim a multiple of kLanes, else
  // train_context.
  GE_INLINE int64_t train_distinct(float* in, float* const* out, int count, int64_t dim, float alpha,
                                float* g) {
    if (dim % kLanes == 0) {
      switch (count) {
        case 1: return train_targets<1>(in, out, dim, alpha);
        case 2: return train_targets<2>(in, out, dim, alpha);
        case 3: return train_targets<3>(in, out, dim, alpha);
        case 4: return train_targets<4>(in, out, dim, alpha);
        case 5: return train_targets<5>(in, out, dim, alpha);
        case 6: return train_targets<6>(in, out, dim, alpha);
        case 7: return train_targets<7>(in, out, dim, alpha);
        case 8: return train_targets<8>(in, out, dim, alpha);
        default: break;
      }
    }
    return train_context(in, out, count, dim, alpha, g);
  }

  // The same when a node is two of the targets: target after target, each score reading
  // the rows as the earlier targets left them (word2vec's order). neu1e: dim floats.
  GE_INLINE int64_t train_context_in_order(float* in, float* const* out, int count, int64_t dim,
                                        float alpha, float* neu1e) {
    std::fill(neu1e, neu1e + dim, 0.0f);
    int64_t nonfinite = 0;
    for (int j = 0; j < count; ++j) {
      float f;
      dots<1>(in, out + j, dim, &f);
      nonfinite += !std::isfinite(f);
      const float g = gradient(j, f, alpha);
      for (int64_t d = 0; d < dim; ++d) {
        neu1e[d] += g * out[j][d];
        out[j][d] += g * in[d];
      }
    }
    for (int64_t d = 0; d < dim; ++d) in[d] += neu1e[d];
    return nonfinite;
  }

  GE_INLINE bool all_distinct(const int64_t* ids, int count) {
    for (int i = 1; i < count; ++i)
      for (int j = 0; j < i; ++j)
        if (ids[i] == ids[j]) return false;
    return true;
  }

  // Prefetches every cache line of a row of dim floats (the rows of a context a few contexts
  // ahead: random rows of a table larger than the cache are the loop's main cost).
  GE_INLINE void prefetch_row(const float* row, int64_t dim) {
    for (int64_t d = 0; d < dim; d += 16) __builtin_prefetch(row + d, 1, 3);
  }

  static constexpr int64_t kPrefetchAhead = 2;  // contexts

  // Thread `thread`'s share [first, last) of the walks (see train.cpp's header comment).
  // Each walk's draws (subsampling, windows, noise nodes) are made first, in word2vec's
  // order, into a plan of contexts; training then walks the plan, prefetching the rows of
  // the context kPrefetchAhead ahead. The draws do not depend on the rows, so the result is
  // the same as drawing each context's nodes just before training it.
  GE_INLINE void train_range(const Tables& t, int64_t first, int64_t last, uint64_t seed, int thread,
                   std::atomic<int64_t>* done, Counts* counts) {
    SplitMix64 rng{mix(seed ^ (static_cast<uint64_t>(thread) * kGamma))};
    const int64_t width = t.negatives + 1, dim = t.dim;
    const int64_t most = t.length * 2 * t.window;  // contexts of one walk at most
    std::vector<int64_t> kept(t.length), inputs(most), sizes(most), targets(most * width);
    std::vector<float*> rows(width);
    std::vector<float> scratch(std::max<int64_t>(dim, width));
    int64_t nonfinite = 0, products = 0;
    for (int64_t w = first; w < last; ++w) {
      // The rate of the block of hold_walks walks the run's progress falls in (word2vec's
      // rate held for 10,000 tokens, see train.cpp).
      const int64_t started = t.walks_before + done->load();
      const double progress = static_cast<double>(started / t.hold_walks * t.hold_walks) /
                              static_cast<double>(t.total_walks);
      const float alpha =
          static_cast<float>(t.lr * std::max(1.0 - (1.0 - t.final_rate) * progress,
                                             t.final_rate));
      const int64_t* walk = t.walks + w * t.length;
      int64_t size = 0;
      for (int64_t i = 0; i < t.length && walk[i] >= 0; ++i) {
        const double keep = t.keep[walk[i]];
        if (keep >= 1.0 || rng.uniform() < keep) kept[size++] = walk[i];
      }
      int64_t planned = 0;
      for (int64_t pos = 0; pos < size; ++pos) {
        const int64_t word = kept[pos];
        const int64_t radius = 1 + static_cast<int64_t>(rng.below(t.window));
        const int64_t lo = std::max<int64_t>(pos - radius, 0);
        const int64_t hi = std::min<int64_t>(pos + radius, size - 1);
        for (int64_t c = lo; c <= hi; ++c) {
          if (c == pos) continue;
          int64_t* drawn = targets.data() + planned * width;
          int64_t count = 0;
          drawn[count++] = word;
          for (int64_t k = 0; k < t.negatives; ++k) {
            const uint64_t column = rng.below(t.noise_size);
            const NoiseColumn& drawn_column = t.noise[column];
            const int64_t target = (rng.next() >> 11) < drawn_column.threshold ? drawn_column.node
                                                                             : drawn_column.alias;
            if (target != word) drawn[count++] = target;  // word2vec skips the node itself
          }
          inputs[planned] = kept[c];
          sizes[planned++] = count;
        }
      }
      for (int64_t i = 0; i < planned; ++i) {
        if (i + kPrefetchAhead < planned) {
          const int64_t ahead = i + kPrefetchAhead;
          prefetch_row(t.syn0 + inputs[ahead] * dim, dim);
          for (int64_t j = 0; j < sizes[ahead]; ++j)
            prefetch_row(t.syn1 + targets[ahead * width + j] * dim, dim);
        }
        const int count = static_cast<int>(sizes[i]);
        const int64_t* drawn = targets.data() + i * width;
        for (int j = 0; j < count; ++j) rows[j] = t.syn1 + drawn[j] * dim;
        float* in = t.syn0 + inputs[i] * dim;
        nonfinite += all_distinct(drawn, count)
                         ? train_distinct(in, rows.data(), count, dim, alpha, scratch.data())
                         : train_context_in_order(in, rows.data(), count, dim, alpha,
                                                  scratch.data());
        products += count;
      }
      done->fetch_add(1, std::memory_order_relaxed);
    }
    counts->nonfinite = nonfinite;
    counts->products = products;
  }
};

}  // namespace ge::skipgram

#undef GE_INLINE
