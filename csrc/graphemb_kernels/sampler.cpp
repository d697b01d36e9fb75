// Uniform neighbour sampling without replacement, and relabelling into DGL-style blocks.
//
// The compiled CPU path of graphemb.sampling.NeighborSampler (the pure-torch path of
// graphemb/sampling/neighbor.py is the reference, also used on GPUs and when this module
// is absent or disabled). Both draw from the same distribution: a seed of in-degree d gets
// min(fanout, d) of its in-edges, every subset equally likely (fanout -1: all of them).
//
// Draws: a seed of degree <= fanout takes its whole CSC segment; a larger one draws
// `fanout` distinct offsets with Robert Floyd's algorithm (fanout random numbers, whatever
// d is: a hub's other edges are never read). Each seed has its own PRNG (splitmix64)
// seeded from the call's key, the layer and the seed's position, so a sample depends on
// the key only, never on the number of threads. Seeds are drawn in parallel.
//
// Memory: a layer's reads are random -- a seed's row pointers, its CSC segment, the marker
// entry of every source drawn -- and each depends on the one before, so a plain loop waits
// on one cache miss after another. Every loop prefetches the entries of the item kAhead
// places on (the segment of a seed whose row pointers it prefetched kAhead seeds earlier;
// the marker entries of the sources after drawing a task's seeds), which keeps several
// misses in flight at once.
//
// Relabelling (sample_blocks): `marker` (one entry per graph node, -1 = unseen) holds the
// block-local id of every node of the current block. Between layers it needs no reset:
// a block's source nodes are the next layer's destination nodes, with the same local ids.
// New sources are marked -2 during the draws, then numbered in increasing id order --
// by a parallel scan of the marker array when the layer's edges are many (E *
// scan_fraction >= nodes), else by sorting the few new ones. At the end only the entries
// of the input nodes (every node touched) are reset to -1: no hashing, no full clears.
// The caller checks the arguments (graphemb/sampling/neighbor.py) except for what is
// checked below; seeds must be distinct for sample_blocks.

#include "sampler.h"
#include "splitmix.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cstdint>
#include <unordered_set>
#include <vector>

namespace {

// Grains are large: a parallel region ends in a barrier, and when other processes hold
// the cores each barrier waits for the scheduler (measured on 2 busy cores: 3 layers of
// small regions 10x slower on 2 threads than on 1). Small layers run on the calling thread.
constexpr int64_t kDrawGrain = 2048;     // seeds per task of the draws
constexpr int64_t kPassGrain = 1 << 16;  // elements per task of the light passes
constexpr int64_t kScanGrain = 1 << 19;  // marker entries per task of the scan
constexpr int64_t kAhead = 16;  // prefetch distance of the random reads, in items
constexpr int64_t kUnseen = -1;
constexpr int64_t kNew = -2;

using splitmix::mix;
using splitmix::SplitMix64;

// A seed's own stream, seeded from (key, layer, seed position).
inline SplitMix64 seed_stream(uint64_t key, uint64_t layer, uint64_t row) {
  return SplitMix64{mix(key ^ mix(layer * 0xD1B54A32D192ED03ULL + row))};
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

void check_long(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kLong, "graphemb_kernels sampler: ", name,
                   " must be int64, got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.device().is_cpu() && t.dim() == 1 && t.is_contiguous(),
                    "graphemb_kernels sampler: ", name,
                    " must be a contiguous 1-D CPU tensor, got shape ", t.sizes(), " on ",
                    t.device());
}

struct Graph {
  const int64_t* indptr;
  const int64_t* indices;
  int64_t num_nodes;
};

// Row pointers (D + 1) of the sampled edges of `seeds`: min(fanout, degree) each.
at::Tensor row_pointers(const Graph& g, const int64_t* seeds, int64_t num_seeds, int64_t fanout) {
  at::Tensor rowptr = at::empty({num_seeds + 1}, at::kLong);
  int64_t* r = rowptr.data_ptr<int64_t>();
  r[0] = 0;
  for (int64_t i = 0; i < num_seeds; ++i) {  // light and serial: a prefix sum
    if (i + kAhead < num_seeds) __builtin_prefetch(g.indptr + seeds[i + kAhead]);
    const int64_t degree = g.indptr[seeds[i] + 1] - g.indptr[seeds[i]];
    r[i + 1] = r[i] + (fanout < 0 ? degree : std::min(degree, fanout));
  }
  return rowptr;
}

// The draws of every seed into src (global ids), dst (seed position) and pos (CSC
// positions). With a marker, every source not yet in it is marked kNew.
template <typename M>
void draw(const Graph& g, const int64_t* seeds, int64_t num_seeds, const int64_t* r,
          uint64_t key, uint64_t layer, int64_t* src, int64_t* dst, int64_t* pos, M* marker) {
  at::parallel_for(0, num_seeds, kDrawGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i + kAhead < end) {  // the segment a few seeds on: its row is cached by now
        const int64_t ahead = seeds[i + kAhead];
        __builtin_prefetch(g.indices + g.indptr[ahead]);
        if (i + 2 * kAhead < end) __builtin_prefetch(g.indptr + seeds[i + 2 * kAhead]);
      }
      const int64_t start = g.indptr[seeds[i]];
      const int64_t degree = g.indptr[seeds[i] + 1] - start;
      const int64_t first = r[i], count = r[i + 1] - r[i];
      int64_t* p = pos + first;
      if (count == degree) {
        for (int64_t q = 0; q < count; ++q) p[q] = start + q;
      } else {
        SplitMix64 random = seed_stream(key, layer, static_cast<uint64_t>(i));
        floyd(random, degree, count, p);
        for (int64_t q = 0; q < count; ++q) p[q] += start;
      }
      for (int64_t q = 0; q < count; ++q) {
        src[first + q] = g.indices[p[q]];
        dst[first + q] = i;
      }
    }
    if (marker == nullptr) return;
    for (int64_t e = r[begin], stop = r[end]; e < stop; ++e) {
      if (e + kAhead < stop) __builtin_prefetch(marker + src[e + kAhead]);
      const int64_t u = src[e];
      if (__atomic_load_n(marker + u, __ATOMIC_RELAXED) == kUnseen) {
        __atomic_store_n(marker + u, static_cast<M>(kNew), __ATOMIC_RELAXED);  // same value
      }
    }
  });
}

// Numbers the nodes marked kNew from `first` on, in increasing id order, into new_nodes;
// returns how many. Scans the whole marker array in parallel parts.
template <typename M>
int64_t number_by_scan(M* marker, int64_t num_nodes, int64_t first, std::vector<int64_t>& out) {
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads() * 2,
                                                               num_nodes / kScanGrain));
  std::vector<int64_t> counts(parts + 1, 0);
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t c = 0;
      for (int64_t v = num_nodes * p / parts, stop = num_nodes * (p + 1) / parts; v < stop; ++v)
        c += marker[v] == kNew;
      counts[p + 1] = c;
    }
  });
  for (int64_t p = 0; p < parts; ++p) counts[p + 1] += counts[p];
  out.resize(counts[parts]);
  at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t k = counts[p];
      for (int64_t v = num_nodes * p / parts, stop = num_nodes * (p + 1) / parts; v < stop; ++v) {
        if (marker[v] == kNew) {
          marker[v] = static_cast<M>(first + k);
          out[k++] = v;
        }
      }
    }
  });
  return counts[parts];
}

// The same by collecting the new sources from the edges and sorting them.
template <typename M>
int64_t number_by_sort(M* marker, const int64_t* src, int64_t num_edges, int64_t first,
                       std::vector<int64_t>& out) {
  out.clear();
  for (int64_t e = 0; e < num_edges; ++e) {
    const int64_t u = src[e];
    if (marker[u] == kNew) {
      marker[u] = static_cast<M>(kUnseen - 2);  // collected
      out.push_back(u);
    }
  }
  std::sort(out.begin(), out.end());
  for (size_t k = 0; k < out.size(); ++k) marker[out[k]] = static_cast<M>(first + k);
  return static_cast<int64_t>(out.size());
}

template <typename M>
std::vector<std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>> blocks_with(
    const Graph& g, const at::Tensor& seeds, const std::vector<int64_t>& fanouts, uint64_t key,
    M* marker, int64_t scan_fraction) {
  std::vector<std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>> layers;
  at::Tensor frontier = seeds;
  const int64_t num_seeds = seeds.numel();
  const int64_t* s = seeds.data_ptr<int64_t>();
  at::parallel_for(0, num_seeds, kPassGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) marker[s[i]] = static_cast<M>(i);
  });
  std::vector<int64_t> fresh;
  for (size_t layer = 0; layer < fanouts.size(); ++layer) {
    const int64_t* f = frontier.data_ptr<int64_t>();
    const int64_t num_dst = frontier.numel();
    at::Tensor rowptr = row_pointers(g, f, num_dst, fanouts[layer]);
    const int64_t* r = rowptr.data_ptr<int64_t>();
    const int64_t num_edges = r[num_dst];
    at::Tensor edge_index = at::empty({2, num_edges}, at::kLong);
    at::Tensor positions = at::empty({num_edges}, at::kLong);
    int64_t* src = edge_index.data_ptr<int64_t>();
    draw<M>(g, f, num_dst, r, key, layer, src, src + num_edges, positions.data_ptr<int64_t>(),
            marker);
    const int64_t num_new =
        num_edges * scan_fraction >= g.num_nodes
            ? number_by_scan<M>(marker, g.num_nodes, num_dst, fresh)
            : number_by_sort<M>(marker, src, num_edges, num_dst, fresh);
    at::Tensor src_nodes = at::empty({num_dst + num_new}, at::kLong);
    int64_t* nodes = src_nodes.data_ptr<int64_t>();
    std::copy(f, f + num_dst, nodes);
    std::copy(fresh.begin(), fresh.end(), nodes + num_dst);
    at::parallel_for(0, num_edges, kPassGrain, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        if (e + kAhead < end) __builtin_prefetch(marker + src[e + kAhead]);
        src[e] = marker[src[e]];
      }
    });
    layers.emplace_back(src_nodes, edge_index, positions, rowptr);
    frontier = src_nodes;
  }
  const int64_t* touched = frontier.data_ptr<int64_t>();
  at::parallel_for(0, frontier.numel(), kPassGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) marker[touched[i]] = static_cast<M>(kUnseen);
  });
  return layers;
}

Graph checked_graph(const at::Tensor& indptr, const at::Tensor& indices) {
  check_long(indptr, "indptr");
  check_long(indices, "indices");
  TORCH_CHECK_VALUE(indptr.numel() >= 1, "graphemb_kernels sampler: indptr is empty");
  return {indptr.data_ptr<int64_t>(), indices.data_ptr<int64_t>(), indptr.numel() - 1};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_layer(const at::Tensor& indptr,
                                                            const at::Tensor& indices,
                                                            const at::Tensor& seeds,
                                                            int64_t fanout, int64_t key) {
  RECORD_FUNCTION("graphemb_kernels::sample_layer", std::vector<c10::IValue>());
  const Graph g = checked_graph(indptr, indices);
  check_long(seeds, "seeds");
  const int64_t* s = seeds.data_ptr<int64_t>();
  at::Tensor rowptr = row_pointers(g, s, seeds.numel(), fanout);
  const int64_t* r = rowptr.data_ptr<int64_t>();
  const int64_t num_edges = r[seeds.numel()];
  at::Tensor src = at::empty({num_edges}, at::kLong);
  at::Tensor dst = at::empty({num_edges}, at::kLong);
  at::Tensor positions = at::empty({num_edges}, at::kLong);
  draw<int32_t>(g, s, seeds.numel(), r, static_cast<uint64_t>(key), 0, src.data_ptr<int64_t>(),
                dst.data_ptr<int64_t>(), positions.data_ptr<int64_t>(), nullptr);
  return {src, dst, positions};
}

std::vector<std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>> sample_blocks(
    const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& seeds,
    const std::vector<int64_t>& fanouts, int64_t key, const at::Tensor& marker,
    int64_t scan_fraction) {
  RECORD_FUNCTION("graphemb_kernels::sample_blocks", std::vector<c10::IValue>());
  const Graph g = checked_graph(indptr, indices);
  check_long(seeds, "seeds");
  TORCH_CHECK_VALUE(marker.device().is_cpu() && marker.is_contiguous() &&
                        marker.numel() == g.num_nodes,
                    "graphemb_kernels.sample_blocks: marker must be a contiguous CPU tensor of ",
                    g.num_nodes, " entries, got shape ", marker.sizes());
  for (const int64_t fanout : fanouts)
    TORCH_CHECK_VALUE(fanout >= -1, "graphemb_kernels.sample_blocks: fanout = ", fanout);
  const auto k = static_cast<uint64_t>(key);
  const int64_t fraction = std::max<int64_t>(scan_fraction, 1);
  if (marker.scalar_type() == at::kInt)
    return blocks_with<int32_t>(g, seeds, fanouts, k, marker.data_ptr<int32_t>(), fraction);
  TORCH_CHECK_TYPE(marker.scalar_type() == at::kLong,
                   "graphemb_kernels.sample_blocks: marker must be int32 or int64, got ",
                   marker.scalar_type());
  return blocks_with<int64_t>(g, seeds, fanouts, k, marker.data_ptr<int64_t>(), fraction);
}

void bind_sampler(pybind11::module_& module) {
  module.def("sample_layer", &sample_layer,
             "Up to fanout distinct in-edges of every seed, uniformly without replacement: "
             "(src, seed position, CSC position)",
             pybind11::arg("indptr"), pybind11::arg("indices"), pybind11::arg("seeds"),
             pybind11::arg("fanout"), pybind11::arg("key"),
             pybind11::call_guard<pybind11::gil_scoped_release>());
  module.def("sample_blocks", &sample_blocks,
             "Every layer's draws and relabelling, seeds outwards: per layer (src_nodes, "
             "edge_index, CSC positions, row pointers); marker (num_nodes, -1) comes back clean",
             pybind11::arg("indptr"), pybind11::arg("indices"), pybind11::arg("seeds"),
             pybind11::arg("fanouts"), pybind11::arg("key"), pybind11::arg("marker"),
             pybind11::arg("scan_fraction"),
             pybind11::call_guard<pybind11::gil_scoped_release>());
}
