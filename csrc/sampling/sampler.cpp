// Uniform neighbour sampling without replacement, and relabelling into DGL-style blocks.
//
// The compiled CPU path of graphemb.sampling.NeighborSampler (the pure-torch path of
// graphemb/sampling/neighbor.py is the reference, also used on GPUs and when this module
// is absent or disabled). Both draw from the same distribution: a seed of in-degree d gets
// min(fanout, d) of its in-edges, every subset equally likely (fanout -1: all of them).
//
// Draws: a seed of degree <= fanout takes its whole CSC segment; a larger one draws
// `fanout` distinct offsets with Robert Floyd's algorithm (fanout random numbers, whatever
// d is: a hub's other edges are never read). A row of at most 64 edges keeps its drawn
// offsets as the bits of one word (floyd_bits: no comparisons, no branches to mispredict)
// and lists them in increasing order; a longer one compares each draw with those before. Each seed has its own PRNG (splitmix64)
// seeded from the call's key, the layer and the seed's position, so a sample depends on
// the key only, never on the number of threads. Seeds are drawn in parallel.
//
// Memory: a layer's reads are random -- a seed's row pointers, the entries of its CSC
// segment that it draws, the marker entry of every source drawn -- and each depends on the
// one before, so a plain loop waits on one cache miss after another. The draws run as a
// pipeline over the seeds (draw below): each stage works kAhead seeds behind the one that
// prefetched its reads (the row pointers, then the drawn entries of the segment, then the
// marker entries), which keeps several misses in flight at once.
//
// Relabelling (sample_blocks): `marker` (one entry per graph node) holds the block-local
// id of every node of the current block. Between layers it needs no reset: a block's
// source nodes are the next layer's destination nodes, with the same local ids. New
// sources are numbered in increasing id order: when the layer's edges are many (E *
// scan_fraction >= nodes) the draws set them in bit maps of the nodes (NodeBits, one per
// thread) and a parallel scan of the maps' words numbers them; else the few new ones are
// collected from the edges and sorted. Which nodes the block holds is known from the bit
// maps, made new for every call, never from the marker: an entry is read only after this
// call wrote it, so the marker needs no clearing, neither before a call nor after it (no
// hashing, no pass over the input nodes to reset their entries).
// The caller checks the arguments (graphemb/sampling/neighbor.py and graphemb/_native/)
// except for what is checked below; seeds must be distinct for sample_blocks. Outputs come
// from the caller's allocator, slot by slot (graphemb_kernels.h).

#include "common/errors.h"
#include "common/parallel.h"
#include "common/splitmix.h"
#include "graphemb_kernels.h"

#include <algorithm>
#include <cstdint>
#include <unordered_set>
#include <vector>

namespace ge {
namespace {

// Grains are large: a parallel region ends in a barrier, and when other processes hold
// the cores each barrier waits for the scheduler (measured on 2 busy cores: 3 layers of
// small regions 10x slower on 2 threads than on 1). Small layers run on the calling thread.
constexpr int64_t kDrawGrain = 2048;     // seeds per task of the draws and row pointers
constexpr int64_t kPassGrain = 1 << 16;  // elements per task of the light passes
constexpr int64_t kWordGrain = 1 << 11;  // words of the node maps per task of the scan
constexpr int64_t kAhead = 16;  // prefetch distance of the random reads, in items

using splitmix::SplitMix64;

// k distinct offsets in [0, d) (k < d <= 64), every k-subset equally likely (Floyd), as
// the bits of one word: a taken offset is tested and set without comparisons or branches.
inline uint64_t floyd_bits(SplitMix64& random, int64_t d, int64_t k) {
  uint64_t taken = 0;
  for (int64_t j = d - k; j < d; ++j) {
    const uint64_t bit = uint64_t{1} << random.below_exact(static_cast<uint64_t>(j) + 1);
    taken |= (taken & bit) != 0 ? uint64_t{1} << j : bit;  // j was never a candidate before
  }
  return taken;
}

// k distinct offsets in [0, d) (k < d), every k-subset equally likely (Floyd), into out.
void floyd(SplitMix64& random, int64_t d, int64_t k, int64_t* out) {
  if (k <= 64) {  // the taken offsets are few: compare with them
    for (int64_t i = 0, j = d - k; i < k; ++i, ++j) {
      auto t = static_cast<int64_t>(random.below_exact(static_cast<uint64_t>(j) + 1));
      for (int64_t q = 0; q < i; ++q) {
        if (out[q] == t) {
          t = j;  // j was never a candidate before this round
          break;
        }
      }
      out[i] = t;
    }
    return;
  }
  std::unordered_set<int64_t> taken;
  taken.reserve(2 * k);
  for (int64_t i = 0, j = d - k; i < k; ++i, ++j) {
    auto t = static_cast<int64_t>(random.below_exact(static_cast<uint64_t>(j) + 1));
    if (!taken.insert(t).second) {
      t = j;
      taken.insert(t);
    }
    out[i] = t;
  }
}

struct Graph {
  const int64_t* indptr;
  const int64_t* indices;
  int64_t num_nodes;
};

// Row pointers r (D + 1) of the sampled edges of `seeds`: min(fanout, degree) each. The
// counts are read in parallel (a random read of indptr each), then summed in order.
void row_pointers(const Graph& g, const int64_t* seeds, int64_t num_seeds, int64_t fanout,
                  int64_t* r) {
  r[0] = 0;
  parallel_for(0, num_seeds, kDrawGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i + kAhead < end) __builtin_prefetch(g.indptr + seeds[i + kAhead]);
      const int64_t degree = g.indptr[seeds[i] + 1] - g.indptr[seeds[i]];
      r[i + 1] = fanout < 0 ? degree : std::min(degree, fanout);
    }
  });
  for (int64_t i = 0; i < num_seeds; ++i) r[i + 1] += r[i];
}

// A prefetch of every cache line of values[0 .. count).
inline void prefetch_lines(const int64_t* values, int64_t count) {
  constexpr uintptr_t kLine = 64;
  const auto end = reinterpret_cast<uintptr_t>(values + count);
  for (auto line = reinterpret_cast<uintptr_t>(values) & ~(kLine - 1); line < end; line += kLine) {
    __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
}

// Seed i's draws: the CSC positions of its sampled in-edges into pos[r[i] .. r[i + 1]),
// and a prefetch of the entries of `indices` they point to (the whole segment when every
// edge is taken or it spans at most 64 edges, else each drawn entry: a hub's picks are
// scattered over its segment).
inline void draw_positions(const Graph& g, const int64_t* seeds, const int64_t* r, uint64_t key,
                           uint64_t layer, int64_t i, int64_t* pos) {
  const int64_t start = g.indptr[seeds[i]];
  const int64_t degree = g.indptr[seeds[i] + 1] - start;
  const int64_t first = r[i], count = r[i + 1] - r[i];
  int64_t* p = pos + first;
  if (count == degree) {
    for (int64_t q = 0; q < count; ++q) p[q] = start + q;
    prefetch_lines(g.indices + start, count);
    return;
  }
  SplitMix64 random = splitmix::stream(key, layer, static_cast<uint64_t>(i));
  if (degree <= 64) {  // the drawn offsets come out in increasing order
    int64_t q = 0;
    for (uint64_t taken = floyd_bits(random, degree, count); taken != 0; taken &= taken - 1) {
      p[q++] = start + __builtin_ctzll(taken);
    }
    prefetch_lines(g.indices + start, degree);
    return;
  }
  floyd(random, degree, count, p);
  for (int64_t q = 0; q < count; ++q) {
    p[q] += start;
    __builtin_prefetch(g.indices + p[q]);
  }
}

// One bit a graph node: which nodes the current block holds (its destination nodes and
// the sources numbered so far), and, per chunk of a layer's draws, the sources that chunk
// drew. A layer's new sources are the union of the chunks' bits less the block's: they
// are numbered by a scan of N / 64 words per bit map instead of the N entries of the
// marker, and the draws set bits of maps that stay in the cache (N / 8 bytes: 125 KiB at
// 1M nodes) instead of testing marker entries scattered over N * 4 bytes.
struct NodeBits {
  int64_t words;
  std::vector<uint64_t> in_block;
  std::vector<std::vector<uint64_t>> drawn;  // per chunk of the draws; made by the first scan

  explicit NodeBits(int64_t num_nodes) : words((num_nodes + 63) / 64), in_block(words, 0) {}
  void make_drawn() {  // before a layer that is numbered by a scan (the maps come back clear)
    if (drawn.empty()) drawn.assign(num_threads(), std::vector<uint64_t>(words, 0));
  }
  void add(int64_t v) { in_block[v >> 6] |= uint64_t{1} << (v & 63); }
  bool holds(int64_t v) const { return (in_block[v >> 6] >> (v & 63)) & 1U; }
};

// The draws of every seed into src (global ids), dst (seed position) and pos (CSC
// positions). With bits, every source drawn is set in its chunk's drawn map (also those
// already in the block: the scan masks them out, and a test here would be a branch that
// mispredicts on every other edge).
//
// One pass over a chunk's seeds in three stages, each on a different seed so that the
// reads of one stage were prefetched by the stage before: seed i + 2A's row pointers are
// prefetched; seed i + A draws its positions and prefetches their entries of `indices`;
// seed i reads its sources from those entries and marks them. A = kAhead. The draws depend
// on (key, layer, seed position) only: neither the order of the stages nor the chunks
// change an output.
void draw(const Graph& g, const int64_t* seeds, int64_t num_seeds, const int64_t* r,
          uint64_t key, uint64_t layer, int64_t* src, int64_t* dst, int64_t* pos,
          NodeBits* bits) {
  parallel_chunks(0, num_seeds, kDrawGrain, [&](int64_t chunk, int64_t begin, int64_t end) {
    uint64_t* mine = bits != nullptr ? bits->drawn[chunk].data() : nullptr;
    for (int64_t i = begin; i < std::min(end, begin + 2 * kAhead); ++i) {
      __builtin_prefetch(g.indptr + seeds[i]);
    }
    for (int64_t i = begin; i < std::min(end, begin + kAhead); ++i) {
      draw_positions(g, seeds, r, key, layer, i, pos);
    }
    for (int64_t i = begin; i < end; ++i) {
      if (i + 2 * kAhead < end) __builtin_prefetch(g.indptr + seeds[i + 2 * kAhead]);
      if (i + kAhead < end) draw_positions(g, seeds, r, key, layer, i + kAhead, pos);
      for (int64_t e = r[i], stop = r[i + 1]; e < stop; ++e) {
        const int64_t u = g.indices[pos[e]];
        src[e] = u;
        dst[e] = i;
        if (mine != nullptr) mine[u >> 6] |= uint64_t{1} << (u & 63);
      }
    }
  });
}

// A layer's new sources are the union of the drawn maps less the block's; numbered by a
// scan of the maps' words in parallel parts, in two passes: count_new_sources counts each
// part's (returning the parts' first numbers, and the total last), number_new_sources
// numbers them from `first` on, in increasing id order, into `out` and the marker, adds
// them to the block and clears the drawn maps. The output is allocated in between, on the
// calling thread, once its size is known.
inline uint64_t new_sources_in(const NodeBits& bits, int64_t w) {
  uint64_t x = 0;
  for (const auto& drawn : bits.drawn) x |= drawn[w];
  return x & ~bits.in_block[w];
}

std::vector<int64_t> count_new_sources(const NodeBits& bits) {
  const int64_t words = bits.words;
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(num_threads() * 2, words / kWordGrain));
  std::vector<int64_t> starts(parts + 1, 0);
  parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t c = 0;
      for (int64_t w = words * p / parts, stop = words * (p + 1) / parts; w < stop; ++w)
        c += __builtin_popcountll(new_sources_in(bits, w));
      starts[p + 1] = c;
    }
  });
  for (int64_t p = 0; p < parts; ++p) starts[p + 1] += starts[p];
  return starts;
}

template <typename M>
void number_new_sources(NodeBits& bits, M* marker, int64_t first,
                        const std::vector<int64_t>& starts, int64_t* out) {
  const int64_t words = bits.words;
  const auto parts = static_cast<int64_t>(starts.size()) - 1;
  parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t k = starts[p];
      for (int64_t w = words * p / parts, stop = words * (p + 1) / parts; w < stop; ++w) {
        uint64_t x = new_sources_in(bits, w);
        for (auto& drawn : bits.drawn) drawn[w] = 0;
        bits.in_block[w] |= x;
        for (; x != 0; x &= x - 1) {
          const int64_t v = 64 * w + __builtin_ctzll(x);
          marker[v] = static_cast<M>(first + k);
          out[k++] = v;
        }
      }
    }
  });
}

// The same for a layer of few edges, drawn without the maps: its sources outside the
// block, collected from the edges and sorted.
template <typename M>
int64_t number_by_sort(NodeBits& bits, M* marker, const int64_t* src, int64_t num_edges,
                       int64_t first, std::vector<int64_t>& out) {
  out.clear();
  for (int64_t e = 0; e < num_edges; ++e) {
    const int64_t u = src[e];
    if (!bits.holds(u)) {
      bits.add(u);
      out.push_back(u);
    }
  }
  std::sort(out.begin(), out.end());
  for (size_t k = 0; k < out.size(); ++k) marker[out[k]] = static_cast<M>(first + k);
  return static_cast<int64_t>(out.size());
}

// Every layer's draws and relabelling, seeds outwards; outputs from `allocate`, four slots
// a layer (graphemb_kernels.h).
template <typename M>
void blocks_with(const Graph& g, const int64_t* s, int64_t num_seeds, const int64_t* fanouts,
                 int64_t num_layers, uint64_t key, M* marker, int64_t scan_fraction,
                 ge_allocate allocate, void* context) {
  NodeBits bits(g.num_nodes);
  parallel_for(0, num_seeds, kPassGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) marker[s[i]] = static_cast<M>(i);
  });
  for (int64_t i = 0; i < num_seeds; ++i) bits.add(s[i]);
  const int64_t* f = s;
  int64_t num_dst = num_seeds;
  std::vector<int64_t> fresh;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    int64_t* r = ge::allocate<int64_t>(allocate, context, 4 * layer, num_dst + 1);
    row_pointers(g, f, num_dst, fanouts[layer], r);
    const int64_t num_edges = r[num_dst];
    int64_t* src = ge::allocate<int64_t>(allocate, context, 4 * layer + 1, 2 * num_edges);
    int64_t* positions = ge::allocate<int64_t>(allocate, context, 4 * layer + 2, num_edges);
    const bool scan = num_edges * scan_fraction >= g.num_nodes;
    if (scan) bits.make_drawn();
    draw(g, f, num_dst, r, key, static_cast<uint64_t>(layer), src, src + num_edges, positions,
         scan ? &bits : nullptr);
    int64_t* nodes = nullptr;
    int64_t num_new = 0;
    if (scan) {  // numbered straight into the layer's nodes
      const std::vector<int64_t> starts = count_new_sources(bits);
      num_new = starts.back();
      nodes = ge::allocate<int64_t>(allocate, context, 4 * layer + 3, num_dst + num_new);
      number_new_sources<M>(bits, marker, num_dst, starts, nodes + num_dst);
    } else {
      num_new = number_by_sort<M>(bits, marker, src, num_edges, num_dst, fresh);
      nodes = ge::allocate<int64_t>(allocate, context, 4 * layer + 3, num_dst + num_new);
      std::copy(fresh.begin(), fresh.end(), nodes + num_dst);
    }
    parallel_for(0, num_dst, kPassGrain, [&](int64_t begin, int64_t end) {
      std::copy(f + begin, f + end, nodes + begin);
    });
    parallel_for(0, num_edges, kPassGrain, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        if (e + kAhead < end) __builtin_prefetch(marker + src[e + kAhead]);
        src[e] = marker[src[e]];
      }
    });
    f = nodes;
    num_dst += num_new;
  }
}

// Every seed a node of the graph, checked before anything is drawn.
void check_seeds(const int64_t* seeds, int64_t num_seeds, int64_t num_nodes) {
  for (int64_t i = 0; i < num_seeds; ++i) {
    require(static_cast<uint64_t>(seeds[i]) < static_cast<uint64_t>(num_nodes), GE_INDEX_ERROR,
            "graphemb_kernels sampler: seeds[", i, "] = ", seeds[i],
            " is not a node of a graph of ", num_nodes, " nodes");
  }
}

}  // namespace
}  // namespace ge

extern "C" int ge_sample_layer(const int64_t* indptr, const int64_t* indices, int64_t num_nodes,
                               const int64_t* seeds, int64_t num_seeds, int64_t fanout,
                               uint64_t key, ge_allocate allocate, void* context) {
  using namespace ge;
  return guarded([&] {
    const Graph g{indptr, indices, num_nodes};
    check_seeds(seeds, num_seeds, num_nodes);
    require(fanout >= -1, GE_VALUE_ERROR, "graphemb_kernels.sample_layer: fanout = ", fanout);
    int64_t* r = ge::allocate<int64_t>(allocate, context, 3, num_seeds + 1);
    row_pointers(g, seeds, num_seeds, fanout, r);
    const int64_t num_edges = r[num_seeds];
    int64_t* src = ge::allocate<int64_t>(allocate, context, 0, num_edges);
    int64_t* dst = ge::allocate<int64_t>(allocate, context, 1, num_edges);
    int64_t* positions = ge::allocate<int64_t>(allocate, context, 2, num_edges);
    draw(g, seeds, num_seeds, r, key, 0, src, dst, positions, nullptr);
  });
}

extern "C" int ge_sample_blocks(const int64_t* indptr, const int64_t* indices, int64_t num_nodes,
                                const int64_t* seeds, int64_t num_seeds, const int64_t* fanouts,
                                int64_t num_layers, uint64_t key, void* marker, int marker_dtype,
                                int64_t scan_fraction, ge_allocate allocate, void* context) {
  using namespace ge;
  return guarded([&] {
    const Graph g{indptr, indices, num_nodes};
    check_seeds(seeds, num_seeds, num_nodes);
    for (int64_t layer = 0; layer < num_layers; ++layer) {
      require(fanouts[layer] >= -1, GE_VALUE_ERROR, "graphemb_kernels.sample_blocks: fanout = ",
              fanouts[layer]);
    }
    const int64_t fraction = std::max<int64_t>(scan_fraction, 1);
    if (marker_dtype == GE_INT32) {
      blocks_with<int32_t>(g, seeds, num_seeds, fanouts, num_layers, key,
                           static_cast<int32_t*>(marker), fraction, allocate, context);
      return;
    }
    require(marker_dtype == GE_INT64, GE_TYPE_ERROR,
            "graphemb_kernels.sample_blocks: marker must be int32 or int64");
    blocks_with<int64_t>(g, seeds, num_seeds, fanouts, num_layers, key,
                         static_cast<int64_t*>(marker), fraction, allocate, context);
  });
}
