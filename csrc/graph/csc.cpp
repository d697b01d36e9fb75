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

// The stored edges in edge-id order, as (column, source node, edge id) to `place`.
template <typename Place>
void for_each_stored_edge(const int64_t* s, int64_t s_step, const int64_t* d, int64_t d_step,
                          int64_t num_edges, bool undirected, Place place) {
  for (int64_t j = 0; j < num_edges; ++j) place(d[j * d_step], s[j * s_step], j);
  if (!undirected) return;
  int64_t id = num_edges;
  for (int64_t j = 0; j < num_edges; ++j) {
    const int64_t u = s[j * s_step];
    const int64_t v = d[j * d_step];
    if (u != v) place(u, v, id++);
  }
}

void csc_from_edges(const int64_t* s, int64_t s_step, const int64_t* d, int64_t d_step,
                    int64_t num_edges, int64_t num_nodes, bool undirected, int64_t* column,
                    ge_allocate allocate, void* context) {
  require(num_nodes >= 0, GE_VALUE_ERROR,
          "graphemb_kernels.csc_from_edges: num_nodes must be >= 0, got ", num_nodes);
  const int64_t* const src = s;
  const int64_t* const dst = d;
  const int64_t src_stride = s_step, dst_stride = d_step;
  const auto nodes = static_cast<uint64_t>(num_nodes);

  // Pass 1: stored edges per column (indptr[v + 1]), checking every id. In parallel parts
  // of the edge list (parts after the first count into their own arrays, then added).
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
        const int64_t u = s[j * s_step];
        const int64_t v = d[j * d_step];
        if (static_cast<uint64_t>(u) >= nodes || static_cast<uint64_t>(v) >= nodes) {
          first_bad[p] = j;
          break;
        }
        ++counts[v + 1];
        if (undirected && u != v) ++counts[u + 1];
      }
    }
  });
  const int64_t bad = *std::min_element(first_bad.begin(), first_bad.end());
  if (bad < num_edges) {
    const int64_t u = s[bad * s_step];
    const int64_t v = d[bad * d_step];
    const bool src_bad = static_cast<uint64_t>(u) >= nodes;
    throw KernelError(GE_INDEX_ERROR,
                      message("graphemb_kernels.csc_from_edges: ", src_bad ? "src[" : "dst[",
                              bad, "] = ", src_bad ? u : v, " is out of range for ", num_nodes,
                              " nodes"));
  }
  if (count_parts > 1) {
    parallel_for(1, num_nodes + 1, 1 << 16, [&](int64_t begin, int64_t end) {
      for (const auto& counts : part_counts)
        for (int64_t v = begin; v < end; ++v) column[v] += counts[v];
    });
  }
  for (int64_t v = 0; v < num_nodes; ++v) column[v + 1] += column[v];
  const int64_t stored = column[num_nodes];

  int64_t* out_nodes = ge::allocate<int64_t>(allocate, context, 0, stored);
  int64_t* out_ids = ge::allocate<int64_t>(allocate, context, 1, stored);
  // The edge ids may hold src and dst (a reader reusing the memory of the edges it
  // parsed): then every edge is read before the edge ids are written.
  const bool shared = overlap(out_ids, stored, src, num_edges, src_stride) ||
                      overlap(out_ids, stored, dst, num_edges, dst_stride);
  // The outputs' first touch (a page fault per page), in parallel and in page order before
  // the scatters below, which would fault the pages at random from both threads.
  constexpr int64_t kPage = 4096 / sizeof(int64_t);
  parallel_for(0, (stored + kPage - 1) / kPage, 1 << 12, [&](int64_t begin, int64_t end) {
    for (int64_t page = begin; page < end; ++page) {
      out_nodes[page * kPage] = 0;
      if (!shared) out_ids[page * kPage] = 0;
    }
  });

  // Columns per bucket: a power of two, about kBucketEdges stored edges a bucket.
  const int64_t per_column = std::max<int64_t>(1, stored / std::max<int64_t>(num_nodes, 1));
  int bucket_bits = 0;
  while (bucket_bits < kMaxBucketBits && (per_column << (bucket_bits + 1)) <= kBucketEdges)
    ++bucket_bits;
  const int64_t buckets = (num_nodes + (int64_t{1} << bucket_bits) - 1) >> bucket_bits;
  const auto bucket_start = [&](int64_t b) {
    return column[std::min(b << bucket_bits, num_nodes)];
  };
  int64_t largest = 0;
  for (int64_t b = 0; b < buckets; ++b)
    largest = std::max(largest, bucket_start(b + 1) - bucket_start(b));
  // Buckets help only where the column a write goes to is a cache miss; the copy of a
  // bucket must stay small (a hub node can make one bucket most of the graph).
  const bool bucketed = num_nodes < (int64_t{1} << kNodeBits) && buckets > 1 &&
                        stored >= (int64_t{1} << 20) && largest <= stored / 8 + kBucketEdges;
  // With edge_ids holding the edges, step 1 writes indices only, each entry packing the
  // column in the bucket, the source node and the edge id; step 2 unpacks them into both.
  const int id_bits = bit_width(stored - 1);
  const int node_bits = bit_width(num_nodes - 1);
  const bool packed = shared && bucketed && bucket_bits + node_bits + id_bits <= 63;
  std::vector<int64_t> src_copy, dst_copy;
  if (shared && !packed) {  // the other placements write edge_ids as they go: edges copied
    src_copy.resize(num_edges);
    dst_copy.resize(num_edges);
    for (int64_t j = 0; j < num_edges; ++j) {
      src_copy[j] = s[j * s_step];
      dst_copy[j] = d[j * d_step];
    }
    s = src_copy.data();
    d = dst_copy.data();
    s_step = d_step = 1;
  }

  if (!bucketed) {  // each edge straight into the next free slot of its column
    std::vector<int64_t> next(column, column + num_nodes);
    for_each_stored_edge(s, s_step, d, d_step, num_edges, undirected,
                         [&](int64_t v, int64_t u, int64_t id) {
                           const int64_t slot = next[v]++;
                           out_nodes[slot] = u;
                           out_ids[slot] = id;
                         });
    return;
  }

  // Step 1: into buckets, in edge-id order, the column within the bucket packed in. In
  // parallel: part p of the edge list writes its edges of a bucket after those of parts
  // < p, and its reverses after all edges and the reverses of parts < p.
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(num_threads(), stored >> 22));
  const auto first_edge = [&](int64_t part) { return num_edges * part / parts; };
  const int64_t in_bucket = (int64_t{1} << bucket_bits) - 1;
  // next[(p * 2 + kind) * buckets + b]: edges (kind 0) or reverses (1) of part p in bucket b
  std::vector<int64_t> next(parts * 2 * buckets, 0);
  parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      int64_t* edges = next.data() + p * 2 * buckets;
      int64_t* reverses = edges + buckets;
      for (int64_t j = first_edge(p), stop = first_edge(p + 1); j < stop; ++j) {
        const int64_t u = s[j * s_step];
        const int64_t v = d[j * d_step];
        ++edges[v >> bucket_bits];
        if (undirected && u != v) ++reverses[u >> bucket_bits];
      }
    }
  });
  std::vector<int64_t> first_reverse_id(parts);
  int64_t reverse_id = num_edges;
  for (int64_t p = 0; p < parts; ++p) {
    first_reverse_id[p] = reverse_id;
    for (int64_t b = 0; b < buckets; ++b) reverse_id += next[(p * 2 + 1) * buckets + b];
  }
  for (int64_t b = 0; b < buckets; ++b) {
    int64_t slot = bucket_start(b);
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
      int64_t* edges = next.data() + p * 2 * buckets;
      int64_t* reverses = edges + buckets;
      int64_t id = first_reverse_id[p];
      for (int64_t j = first_edge(p), stop = first_edge(p + 1); j < stop; ++j) {
        const int64_t u = s[j * s_step];
        const int64_t v = d[j * d_step];
        const int64_t slot = edges[v >> bucket_bits]++;
        if (packed) {
          out_nodes[slot] = ((((v & in_bucket) << node_bits) | u) << id_bits) | j;
        } else {
          out_nodes[slot] = ((v & in_bucket) << kNodeBits) | u;
          out_ids[slot] = j;
        }
        if (undirected && u != v) {
          const int64_t back = reverses[u >> bucket_bits]++;
          if (packed) {
            out_nodes[back] = ((((u & in_bucket) << node_bits) | v) << id_bits) | id++;
          } else {
            out_nodes[back] = ((u & in_bucket) << kNodeBits) | v;
            out_ids[back] = id++;
          }
        }
      }
    }
  });
  // Step 2: each bucket, from a copy, into its columns (stable: in the copy's order). In
  // parallel where the copies (one per thread) stay small next to the outputs.
  const bool copies_small = largest * num_threads() <= stored / 4;
  parallel_for(0, buckets, copies_small ? 1 : buckets, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> copy_nodes(largest), copy_ids(packed ? 0 : largest);
    std::vector<int64_t> column_next(int64_t{1} << bucket_bits);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t lo = bucket_start(b);
      const int64_t size = bucket_start(b + 1) - lo;
      std::copy(out_nodes + lo, out_nodes + lo + size, copy_nodes.begin());
      if (!packed) std::copy(out_ids + lo, out_ids + lo + size, copy_ids.begin());
      const int64_t first = b << bucket_bits;
      const int64_t width = std::min(num_nodes, first + in_bucket + 1) - first;
      std::copy(column + first, column + first + width, column_next.begin());
      if (packed) {
        const int shift = node_bits + id_bits;
        const int64_t node_mask = (int64_t{1} << node_bits) - 1;
        const int64_t id_mask = (int64_t{1} << id_bits) - 1;
        for (int64_t i = 0; i < size; ++i) {
          const int64_t entry = copy_nodes[i];
          const int64_t slot = column_next[entry >> shift]++;
          out_nodes[slot] = (entry >> id_bits) & node_mask;
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

}  // namespace
}  // namespace ge

extern "C" int ge_csc_from_edges(const int64_t* src, int64_t src_stride, const int64_t* dst,
                                 int64_t dst_stride, int64_t num_edges, int64_t num_nodes,
                                 int undirected, int64_t* indptr, ge_allocate allocate,
                                 void* context) {
  return ge::guarded([&] {
    ge::csc_from_edges(src, src_stride, dst, dst_stride, num_edges, num_nodes, undirected != 0,
                       indptr, allocate, context);
  });
}
