// Compressed sparse column (CSC) arrays of a graph from its edge list, by a counting sort.
//
// Column v lists the edges that end at v, in increasing edge id -- exactly what a stable
// sort of the edges by destination gives (graphemb.graph.Graph.from_edges' pure-torch path,
// also used on GPUs and when this module is absent), with no memory beyond the outputs
// and small counters.
//
// undirected: edge j (j < E) is src[j] -> dst[j]; edge E + k is the reverse of the k-th
// edge that is not a self-loop (a self-loop is stored once, as networkx's to_directed
// does). So column v holds first the edges j with dst[j] == v, then the reverses of the
// edges with src[j] == v: the order of a stable sort of the concatenated edge list, with
// no concatenated copy made.
//
// Placing each edge straight into its column writes at random over the outputs: a cache
// (and TLB) miss per write. So edges are placed in two stable steps, as a radix sort
// does: first into their bucket of consecutive columns (a few hundred write streams,
// each sequential), then, bucket by bucket, from a copy of the bucket into their columns
// (writes within a region that fits in the cache). The first step packs the column
// within the bucket into the high bits of the stored source node (unpacked by the second).
// Both steps run in parallel (parts of the edge list, then buckets); small graphs, and
// graphs whose buckets would be too uneven (a hub node), take the direct placement.
//
// src and dst may be strided (the columns of an (E, 2) table). Every id is checked (in the
// first pass, which counts the edges of each column on all threads) before the outputs are
// allocated or written: one out of range raises IndexError naming the first such edge. The
// outputs come from the caller's allocator (slot 0: indices, slot 1: edge ids, S stored
// edges each): the caller picks their memory (graphemb puts indices on huge pages).
// edge_ids may be the very memory of src and dst (graphemb's reader builds the graph in
// the memory of the edges it parsed): every edge is then read before edge_ids is written --
// step 1 packs the edge id into the indices' entries (where the bits allow; otherwise the
// edges are first copied).



#include "common/errors.h"
#include "common/parallel.h"
#include "graphemb_kernels.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ge {
namespace {

constexpr int kNodeBits = 40;  // packed: column in bucket << 40 | node id
constexpr int64_t kNodeMask = (int64_t{1} << kNodeBits) - 1;
constexpr int kMaxBucketBits = 12;         // at most 4096 columns a bucket
constexpr int64_t kBucketEdges = 1 << 17;  // about this many stored edges a bucket (measured
                                           // best of 2^13, 2^15, 2^17 at 1M nodes / 40M edges)

// Bits of the largest value in [0, value] (0 for value <= 0).
int bit_width(int64_t value) {
  int bits = 0;
  while (bits < 63 && (int64_t{1} << bits) <= value) ++bits;
  return bits;
}

// Whether [a, a + a_count) and the strided span of b (b_count elements b_stride apart)
// share memory.
bool overlap(const int64_t* a, int64_t a_count, const int64_t* b, int64_t b_count,
             int64_t b_stride) {
  if (a_count == 0 || b_count == 0) return false;
  const int64_t* b_end = b + (b_count - 1) * b_stride + 1;
  return a < b_end && b < a + a_count;
}

// The edge list as the kernel reads it: edge j is src[j * src_step] -> dst[j * dst_step].
struct Edges {
  const int64_t* src;
  int64_t src_step;
  const int64_t* dst;
  int64_t dst_step;
  int64_t count;
  bool undirected;
  int64_t source(int64_t j) const { return src[j * src_step]; }
  int64_t target(int64_t j) const { return dst[j * dst_step]; }
};

// The stored edges in edge-id order, as (column, source node, edge id) to `place`.
template <typename Place>
void for_each_stored_edge(const Edges& edges, Place place) {
  for (int64_t j = 0; j < edges.count; ++j) place(edges.target(j), edges.source(j), j);
  if (!edges.undirected) return;
  int64_t id = edges.count;
  for (int64_t j = 0; j < edges.count; ++j) {
    const int64_t u = edges.source(j);
    const int64_t v = edges.target(j);
    if (u != v) place(u, v, id++);
  }
}

[[noreturn]] void throw_bad_edge(const Edges& edges, int64_t j, int64_t num_nodes) {
  const int64_t u = edges.source(j);
  const bool src_bad = static_cast<uint64_t>(u) >= static_cast<uint64_t>(num_nodes);
  throw KernelError(GE_INDEX_ERROR,
                    message("graphemb_kernels.csc_from_edges: ", src_bad ? "src[" : "dst[", j,
                            "] = ", src_bad ? u : edges.target(j), " is out of range for ",
                            num_nodes, " nodes"));
}

// Pass 1: column[v + 1] = stored edges of column v, then the running sum (indptr), checking
// every id first. In parallel parts of the edge list (parts after the first count into
// their own arrays, then added); the first bad edge of all parts is the one named.
void count_columns(const Edges& edges, int64_t num_nodes, int64_t* column) {
  const int64_t num_edges = edges.count;
  const auto nodes = static_cast<uint64_t>(num_nodes);
  std::fill(column, column + num_nodes + 1, 0);
  const int64_t count_parts = std::max<int64_t>(
      1, std::min<int64_t>({num_threads(), num_edges >> 20,
                            num_edges / std::max<int64_t>(num_nodes, 1)}));
  std::vector<std::vector<int64_t>> part_counts(count_parts - 1);
  std::vector<int64_t> first_bad(count_parts, num_edges);
  parallel_for(0, count_parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t* counts = column;
      if (p > 0) {
        part_counts[p - 1].assign(num_nodes + 1, 0);
        counts = part_counts[p - 1].data();
      }
      for (int64_t j = num_edges * p / count_parts, stop = num_edges * (p + 1) / count_parts;
           j < stop; ++j) {
        const int64_t u = edges.source(j);
        const int64_t v = edges.target(j);
        if (static_cast<uint64_t>(u) >= nodes || static_cast<uint64_t>(v) >= nodes) {
          first_bad[p] = j;
          break;
        }
        ++counts[v + 1];
        if (edges.undirected && u != v) ++counts[u + 1];
      }
    }
  });
  const int64_t bad = *std::min_element(first_bad.begin(), first_bad.end());
  if (bad < num_edges) throw_bad_edge(edges, bad, num_nodes);
  if (count_parts > 1) {
    parallel_for(1, num_nodes + 1, 1 << 16, [&](int64_t begin, int64_t end) {
      for (const auto& counts : part_counts)
        for (int64_t v = begin; v < end; ++v) column[v] += counts[v];
    });
  }
  for (int64_t v = 0; v < num_nodes; ++v) column[v + 1] += column[v];
}

// The outputs' first touch (a page fault per page), in parallel and in page order before
// the scatters, which would fault the pages at random from both threads.
void touch_outputs(int64_t* out_nodes, int64_t* out_ids, int64_t stored, bool ids_too) {
  constexpr int64_t kPage = 4096 / sizeof(int64_t);
  parallel_for(0, (stored + kPage - 1) / kPage, 1 << 12, [&](int64_t begin, int64_t end) {
    for (int64_t page = begin; page < end; ++page) {
      out_nodes[page * kPage] = 0;
      if (ids_too) out_ids[page * kPage] = 0;
    }
  });
}

// How the edges go through buckets of 2^bits consecutive columns, and whether at all.
struct Buckets {
  int bits = 0;
  int64_t count = 0;    // buckets
  int64_t largest = 0;  // stored edges of the largest bucket
  bool used = false;
  const int64_t* column = nullptr;  // indptr
  int64_t num_nodes = 0;
  int64_t start(int64_t b) const { return column[std::min(b << bits, num_nodes)]; }
};

Buckets plan_buckets(const int64_t* column, int64_t num_nodes) {
  Buckets plan;
  plan.column = column;
  plan.num_nodes = num_nodes;
  const int64_t stored = column[num_nodes];
  // Columns per bucket: a power of two, about kBucketEdges stored edges a bucket.
  const int64_t per_column = std::max<int64_t>(1, stored / std::max<int64_t>(num_nodes, 1));
  while (plan.bits < kMaxBucketBits && (per_column << (plan.bits + 1)) <= kBucketEdges)
    ++plan.bits;
  plan.count = (num_nodes + (int64_t{1} << plan.bits) - 1) >> plan.bits;
  for (int64_t b = 0; b < plan.count; ++b)
    plan.largest = std::max(plan.largest, plan.start(b + 1) - plan.start(b));
  // Buckets help only where the column a write goes to is a cache miss; the copy of a
  // bucket must stay small (a hub node can make one bucket most of the graph).
  plan.used = num_nodes < (int64_t{1} << kNodeBits) && plan.count > 1 &&
              stored >= (int64_t{1} << 20) && plan.largest <= stored / 8 + kBucketEdges;
  return plan;
}

// How step 1 packs an entry: with `ids`, column in bucket | source node | edge id in
// node_bits and id_bits (the edge ids then written by step 2 only); else column in bucket
// << kNodeBits | source node.
struct Packing {
  bool ids = false;
  int node_bits = 0;
  int id_bits = 0;
  int64_t pack(int64_t in_bucket, int64_t node, int64_t id) const {
    return ids ? (((in_bucket << node_bits) | node) << id_bits) | id
               : (in_bucket << kNodeBits) | node;
  }
};

// Each edge straight into the next free slot of its column.
void place_directly(const Edges& edges, const int64_t* column, int64_t num_nodes,
                    int64_t* out_nodes, int64_t* out_ids) {
  std::vector<int64_t> next(column, column + num_nodes);
  for_each_stored_edge(edges, [&](int64_t v, int64_t u, int64_t id) {
    const int64_t slot = next[v]++;
    out_nodes[slot] = u;
    out_ids[slot] = id;
  });
}

// Step 1: into buckets, in edge-id order, the column within the bucket packed in. In
// parallel: part p of the edge list writes its edges of a bucket after those of parts
// < p, and its reverses after all edges and the reverses of parts < p.
void scatter_to_buckets(const Edges& edges, const Buckets& plan, const Packing& packing,
                        int64_t* out_nodes, int64_t* out_ids) {
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(num_threads(), plan.start(plan.count) >> 22));
  const auto first_edge = [&](int64_t part) { return edges.count * part / parts; };
  const int64_t in_bucket = (int64_t{1} << plan.bits) - 1;
  const int64_t buckets = plan.count;
  // next[(p * 2 + kind) * buckets + b]: edges (kind 0) or reverses (1) of part p in bucket b
  std::vector<int64_t> next(parts * 2 * buckets, 0);
  parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t* forward = next.data() + p * 2 * buckets;
      int64_t* reverses = forward + buckets;
      for (int64_t j = first_edge(p), stop = first_edge(p + 1); j < stop; ++j) {
        const int64_t u = edges.source(j);
        const int64_t v = edges.target(j);
        ++forward[v >> plan.bits];
        if (edges.undirected && u != v) ++reverses[u >> plan.bits];
      }
    }
  });
  std::vector<int64_t> first_reverse_id(parts);
  int64_t reverse_id = edges.count;
  for (int64_t p = 0; p < parts; ++p) {
    first_reverse_id[p] = reverse_id;
    for (int64_t b = 0; b < buckets; ++b) reverse_id += next[(p * 2 + 1) * buckets + b];
  }
  for (int64_t b = 0; b < buckets; ++b) {
    int64_t slot = plan.start(b);
    for (int64_t kind = 0; kind < 2; ++kind) {
      for (int64_t p = 0; p < parts; ++p) {
        int64_t& counter = next[(p * 2 + kind) * buckets + b];
        const int64_t count = counter;
        counter = slot;
        slot += count;
      }
    }
  }
  parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t* forward = next.data() + p * 2 * buckets;
      int64_t* reverses = forward + buckets;
      int64_t id = first_reverse_id[p];
      for (int64_t j = first_edge(p), stop = first_edge(p + 1); j < stop; ++j) {
        const int64_t u = edges.source(j);
        const int64_t v = edges.target(j);
        const int64_t slot = forward[v >> plan.bits]++;
        out_nodes[slot] = packing.pack(v & in_bucket, u, j);
        if (!packing.ids) out_ids[slot] = j;
        if (edges.undirected && u != v) {
          const int64_t back = reverses[u >> plan.bits]++;
          out_nodes[back] = packing.pack(u & in_bucket, v, id);
          if (!packing.ids) out_ids[back] = id;
          ++id;
        }
      }
    }
  });
}

// Step 2: each bucket, from a copy, into its columns (stable: in the copy's order). In
// parallel where the copies (one per thread) stay small next to the outputs.
void unpack_buckets(const Buckets& plan, const Packing& packing, int64_t* out_nodes,
                    int64_t* out_ids) {
  const int64_t stored = plan.start(plan.count);
  const int64_t in_bucket = (int64_t{1} << plan.bits) - 1;
  const bool copies_small = plan.largest * num_threads() <= stored / 4;
  parallel_for(0, plan.count, copies_small ? 1 : plan.count, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> copy_nodes(plan.largest), copy_ids(packing.ids ? 0 : plan.largest);
    std::vector<int64_t> column_next(int64_t{1} << plan.bits);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t lo = plan.start(b);
      const int64_t size = plan.start(b + 1) - lo;
      std::copy(out_nodes + lo, out_nodes + lo + size, copy_nodes.begin());
      if (!packing.ids) std::copy(out_ids + lo, out_ids + lo + size, copy_ids.begin());
      const int64_t first = b << plan.bits;
      const int64_t width = std::min(plan.num_nodes, first + in_bucket + 1) - first;
      std::copy(plan.column + first, plan.column + first + width, column_next.begin());
      if (packing.ids) {
        const int shift = packing.node_bits + packing.id_bits;
        const int64_t node_mask = (int64_t{1} << packing.node_bits) - 1;
        const int64_t id_mask = (int64_t{1} << packing.id_bits) - 1;
        for (int64_t i = 0; i < size; ++i) {
          const int64_t entry = copy_nodes[i];
          const int64_t slot = column_next[entry >> shift]++;
          out_nodes[slot] = (entry >> packing.id_bits) & node_mask;
          out_ids[slot] = entry & id_mask;
        }
        continue;
      }
      for (int64_t i = 0; i < size; ++i) {
        const int64_t entry = copy_nodes[i];
        const int64_t slot = column_next[entry >> kNodeBits]++;
        out_nodes[slot] = entry & kNodeMask;
        out_ids[slot] = copy_ids[i];
      }
    }
  });
}

void csc_from_edges(const Edges& given, int64_t num_nodes, int64_t* column, ge_allocate allocate,
                    void* context) {
  require(num_nodes >= 0, GE_VALUE_ERROR,
          "graphemb_kernels.csc_from_edges: num_nodes must be >= 0, got ", num_nodes);
  count_columns(given, num_nodes, column);
  const int64_t stored = column[num_nodes];
  int64_t* out_nodes = ge::allocate<int64_t>(allocate, context, 0, stored);
  int64_t* out_ids = ge::allocate<int64_t>(allocate, context, 1, stored);
  // The edge ids may hold src and dst (a reader reusing the memory of the edges it
  // parsed): then every edge is read before the edge ids are written.
  const bool shared = overlap(out_ids, stored, given.src, given.count, given.src_step) ||
                      overlap(out_ids, stored, given.dst, given.count, given.dst_step);
  touch_outputs(out_nodes, out_ids, stored, !shared);
  const Buckets plan = plan_buckets(column, num_nodes);
  // With edge_ids holding the edges, step 1 writes indices only, each entry packing the
  // column in the bucket, the source node and the edge id; step 2 unpacks them into both.
  Packing packing;
  packing.id_bits = bit_width(stored - 1);
  packing.node_bits = bit_width(num_nodes - 1);
  packing.ids = shared && plan.used && plan.bits + packing.node_bits + packing.id_bits <= 63;
  Edges edges = given;
  std::vector<int64_t> src_copy, dst_copy;
  if (shared && !packing.ids) {  // the other placements write edge_ids as they go
    src_copy.resize(given.count);
    dst_copy.resize(given.count);
    for (int64_t j = 0; j < given.count; ++j) {
      src_copy[j] = given.source(j);
      dst_copy[j] = given.target(j);
    }
    edges = Edges{src_copy.data(), 1, dst_copy.data(), 1, given.count, given.undirected};
  }
  if (!plan.used) {
    place_directly(edges, column, num_nodes, out_nodes, out_ids);
    return;
  }
  scatter_to_buckets(edges, plan, packing, out_nodes, out_ids);
  unpack_buckets(plan, packing, out_nodes, out_ids);
}

}  // namespace
}  // namespace ge

extern "C" int ge_csc_from_edges(const int64_t* src, int64_t src_stride, const int64_t* dst,
                                 int64_t dst_stride, int64_t num_edges, int64_t num_nodes,
                                 int undirected, int64_t* indptr, ge_allocate allocate,
                                 void* context) {
  return ge::guarded([&] {
    const ge::Edges edges{src, src_stride, dst, dst_stride, num_edges, undirected != 0};
    ge::csc_from_edges(edges, num_nodes, indptr, allocate, context);
  });
}
