// Random walks along out-edges: uniform (DeepWalk), weighted, and node2vec's second-order
// walks by rejection sampling.
//
// The compiled CPU path of graphemb.sampling.RandomWalker (graphemb/sampling/walks.py holds
// the pure-torch path, the reference, also run on GPUs and where this module is absent or
// disabled). Both draw from the same distribution:
// - a first-order step leaves v by one of its out-edges, uniformly, or with probability
//   proportional to its weight (weighted: the edge whose interval [C[e], C[e + 1]) of the
//   weights' prefix sums holds a uniform point of v's row; never an edge of weight 0);
// - node2vec's step after t -> v proposes a first-order step v -> x and accepts it with
//   probability bias / envelope, bias = 1/p if x == t, 1 if t -> x is an edge (bisection
//   of t's sorted row), 1/q otherwise; envelope = max(1/p, 1, 1/q). Where the bias of
//   every out-edge of v lies far below the envelope (p or q tiny, and no return or no far
//   node to take), proposals could be rejected millions of times: after kProposals of
//   them the step is drawn from its exact distribution instead, every out-edge of v
//   weighed by its bias (times its weight), which leaves the step's distribution exact;
// - a walker on a node it cannot leave stops; the rest of its row is PAD (-1).
// Each walker has its own PRNG (splitmix64) seeded from the call's key and its position, so
// the walks depend on the key only, never on the number of threads.
//
// Memory: a step reads the walker's row pointers, then an entry of `indices` -- two
// dependent cache misses, on a graph larger than the caches. Walkers advance in groups of
// kGroup, one step at a time for the whole group: every walker's edge is drawn (its row
// pointers prefetched by the step before) and its entry prefetched, then the entries are
// read; the misses of a group overlap instead of following one another. Nothing is
// allocated: the walks are written into the caller's (W, L + 1) array.

#include "common/errors.h"
#include "common/parallel.h"
#include "common/splitmix.h"
#include "graphemb_kernels.h"

#include <algorithm>
#include <cstdint>

namespace ge {
namespace {

constexpr int64_t kGroup = 32;        // walkers advanced together
constexpr int64_t kWalkGrain = 1024;  // walkers per task
constexpr int64_t kPad = -1;
// Proposals of a node2vec step before it is drawn exactly (each costs a random draw and
// perhaps a bisection; the exact draw costs two passes over v's row, bisecting t's).
constexpr int64_t kProposals = 32;

using splitmix::SplitMix64;

struct OutEdges {
  const int64_t* indptr;
  const int64_t* indices;
  const double* cumulative;  // (E + 1,) prefix sums of the weights, or null: unweighted
  const int64_t* last;       // (N,) last edge of positive weight per node, or null
};

struct Bias {
  double back, near, away, envelope;
};

// The edge a first-order step leaves v by, or -1 where v has none to follow.
inline int64_t first_order_edge(const OutEdges& g, int64_t v, SplitMix64& random) {
  const int64_t begin = g.indptr[v], end = g.indptr[v + 1];
  if (g.cumulative == nullptr) {
    if (end == begin) return -1;
    return begin + static_cast<int64_t>(random.below_exact(static_cast<uint64_t>(end - begin)));
  }
  const int64_t last = g.last[v];
  if (last < begin) return -1;  // every out-edge weighs 0
  const double low = g.cumulative[begin];
  const double target = low + random.uniform() * (g.cumulative[end] - low);
  int64_t lo = begin, hi = end;  // the last e of the row with C[e] <= target: C[lo] <= target
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (g.cumulative[mid] <= target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return std::min(lo, last);  // rounding may reach the row's end: its last positive edge
}

// Whether t -> x is an edge: bisection of t's sorted row.
inline bool is_edge(const OutEdges& g, int64_t t, int64_t x) {
  const int64_t* row = g.indices + g.indptr[t];
  const int64_t* end = g.indices + g.indptr[t + 1];
  return std::binary_search(row, end, x);
}

// Whether node2vec accepts the proposal v -> x after t -> v, given a uniform threshold in
// [0, envelope): the test of the edge t -> x only where the two weights it decides between
// are not both above or both below the threshold.
inline bool accepts(const OutEdges& g, const Bias& bias, int64_t t, int64_t x, double threshold) {
  if (x == t) return threshold < bias.back;
  if (threshold < std::min(bias.near, bias.away)) return true;
  if (threshold >= std::max(bias.near, bias.away)) return false;
  return threshold < (is_edge(g, t, x) ? bias.near : bias.away);
}

// node2vec's step v -> x after t -> v drawn from its exact distribution: each out-edge e
// of v weighed by the bias of its end (times its weight), a uniform point of their sum
// located. v has an out-edge (of positive weight, weighted), and every bias is positive.
inline int64_t exact_step(const OutEdges& g, const Bias& bias, int64_t t, int64_t v,
                          SplitMix64& random) {
  const int64_t begin = g.indptr[v], end = g.indptr[v + 1];
  const auto weight = [&](int64_t e) {
    const int64_t x = g.indices[e];
    const double b = x == t ? bias.back : (is_edge(g, t, x) ? bias.near : bias.away);
    return g.cumulative == nullptr ? b : b * (g.cumulative[e + 1] - g.cumulative[e]);
  };
  double total = 0.0;
  for (int64_t e = begin; e < end; ++e) total += weight(e);
  double point = random.uniform() * total;
  int64_t chosen = begin;
  for (int64_t e = begin; e < end; ++e) {
    const double w = weight(e);
    if (w <= 0.0) continue;
    chosen = e;  // rounding may carry the point past the last edge: that edge then
    if (point < w) break;
    point -= w;
  }
  return g.indices[chosen];
}

// One group of walkers [first, first + count), walked to the end.
void walk_group(const OutEdges& g, const Bias* bias, const int64_t* start, int64_t stride,
                int64_t first, int64_t count, int64_t length, uint64_t key, int64_t* out) {
  SplitMix64 random[kGroup];
  int64_t current[kGroup], previous[kGroup], edge[kGroup], live[kGroup];
  int64_t* rows[kGroup];
  int64_t num_live = count;
  for (int64_t i = 0; i < count; ++i) {
    const auto walker = static_cast<uint64_t>(first + i);
    random[i] = splitmix::stream(key, walker);
    rows[i] = out + (first + i) * (length + 1);
    // read before the row is written: start may be out's first column
    current[i] = previous[i] = rows[i][0] = start[(first + i) * stride];
    live[i] = i;
    __builtin_prefetch(g.indptr + current[i]);
  }
  for (int64_t step = 1; step <= length && num_live > 0; ++step) {
    int64_t kept = 0;
    for (int64_t k = 0; k < num_live; ++k) {  // draw every walker's edge; prefetch its entry
      const int64_t i = live[k];
      edge[i] = first_order_edge(g, current[i], random[i]);
      if (edge[i] < 0) {  // a node it cannot leave: the walk ends here
        std::fill(rows[i] + step, rows[i] + length + 1, kPad);
        continue;
      }
      __builtin_prefetch(g.indices + edge[i]);
      live[kept++] = i;
    }
    num_live = kept;
    for (int64_t k = 0; k < num_live; ++k) {  // read the entries; node2vec: accept or redraw
      const int64_t i = live[k];
      int64_t next = g.indices[edge[i]];
      if (bias != nullptr && step > 1) {  // the first step of a walk is first-order
        for (int64_t proposals = 1;
             !accepts(g, *bias, previous[i], next, random[i].uniform() * bias->envelope);
             ++proposals) {
          if (proposals == kProposals) {
            next = exact_step(g, *bias, previous[i], current[i], random[i]);
            break;
          }
          next = g.indices[first_order_edge(g, current[i], random[i])];
        }
      }
      rows[i][step] = next;
      previous[i] = current[i];
      current[i] = next;
      __builtin_prefetch(g.indptr + next);
    }
  }
}

}  // namespace
}  // namespace ge

extern "C" int ge_random_walks(const int64_t* indptr, const int64_t* indices,
                               const double* cumulative, const int64_t* last, int64_t num_nodes,
                               const int64_t* start, int64_t start_stride, int64_t num_walks,
                               int64_t walk_length, double p, double q, uint64_t key,
                               int64_t* out) {
  using namespace ge;
  return guarded([&] {
    require(walk_length >= 0, GE_VALUE_ERROR, "graphemb_kernels.random_walks: walk_length = ",
            walk_length);
    require(p > 0 && q > 0, GE_VALUE_ERROR, "graphemb_kernels.random_walks: p = ", p,
            " and q = ", q, " must be positive");
    require((cumulative == nullptr) == (last == nullptr), GE_VALUE_ERROR,
            "graphemb_kernels.random_walks: a weighted walk needs both cumulative and last");
    require(start_stride >= 0, GE_VALUE_ERROR, "graphemb_kernels.random_walks: start_stride = ",
            start_stride, " is negative");
    for (int64_t i = 0; i < num_walks; ++i) {
      const int64_t node = start[i * start_stride];
      require(static_cast<uint64_t>(node) < static_cast<uint64_t>(num_nodes),
              GE_INDEX_ERROR, "graphemb_kernels.random_walks: start[", i, "] = ", node,
              " is not a node of a graph of ", num_nodes, " nodes");
    }
    const OutEdges g{indptr, indices, cumulative, last};
    const Bias bias{1.0 / p, 1.0, 1.0 / q, std::max({1.0 / p, 1.0, 1.0 / q})};
    const Bias* second_order = (p == 1.0 && q == 1.0) ? nullptr : &bias;
    parallel_for(0, num_walks, kWalkGrain, [&](int64_t begin, int64_t end) {
      for (int64_t first = begin; first < end; first += kGroup) {
        walk_group(g, second_order, start, start_stride, first, std::min(kGroup, end - first),
                   walk_length, key, out);
      }
    });
  });
}
