// Compressed sparse column (CSC) arrays of a graph from its edge list, by a counting sort.
//
// Column v lists the edges that end at v, in increasing edge id -- exactly what a stable
// sort of the edges by destination gives (graphemb.graph.Graph.from_edges' pure-torch path,
// also used on GPUs and when this module is absent), in three sequential passes and no
// memory beyond the outputs and one cursor per node: count the edges per column, prefix
// sums, then each edge written to the next free slot of its column.
//
// undirected: edge j (j < E) is src[j] -> dst[j]; edge E + k is the reverse of the k-th
// edge that is not a self-loop (a self-loop is stored once, as networkx's to_directed
// does). So column v holds first the edges j with dst[j] == v, then the reverses of the
// edges with src[j] == v -- the order of a stable sort of the concatenated edge list, with
// no concatenated copy made.
//
// src and dst may be strided views (the columns of an (E, 2) table). Everything is checked
// before a slot is written: a node id out of range raises IndexError naming it; wrong
// dtypes, devices, shapes or output lengths raise TypeError / ValueError.

#include "csc.h"

#include <ATen/record_function.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

void check_ids(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kLong, "graphemb_kernels.csc_from_edges: ", name,
                   " must be int64 (node ids), got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.device().is_cpu(), "graphemb_kernels.csc_from_edges: ", name,
                    " must be a CPU tensor, got one on ", t.device());
  TORCH_CHECK_VALUE(t.dim() == 1, "graphemb_kernels.csc_from_edges: ", name,
                    " must have 1 dimension, got shape ", t.sizes());
}

}  // namespace

at::Tensor csc_from_edges(const at::Tensor& src, const at::Tensor& dst, int64_t num_nodes,
                          bool undirected, at::Tensor indices, at::Tensor edge_ids) {
  RECORD_FUNCTION("graphemb_kernels::csc_from_edges", std::vector<c10::IValue>());
  check_ids(src, "src");
  check_ids(dst, "dst");
  check_ids(indices, "indices");
  check_ids(edge_ids, "edge_ids");
  TORCH_CHECK_VALUE(indices.is_contiguous() && edge_ids.is_contiguous(),
                    "graphemb_kernels.csc_from_edges: indices and edge_ids must be contiguous");
  TORCH_CHECK_VALUE(src.numel() == dst.numel(),
                    "graphemb_kernels.csc_from_edges: src and dst must have the same length, "
                    "got ",
                    src.numel(), " and ", dst.numel());
  TORCH_CHECK_VALUE(num_nodes >= 0, "graphemb_kernels.csc_from_edges: num_nodes must be >= 0, "
                    "got ", num_nodes);
  const int64_t num_edges = src.numel();
  const int64_t* s = src.data_ptr<int64_t>();
  const int64_t* d = dst.data_ptr<int64_t>();
  const int64_t s_step = src.stride(0);
  const int64_t d_step = dst.stride(0);
  const auto nodes = static_cast<uint64_t>(num_nodes);

  // Pass 1: edges per column (at[v + 1]), checking every id.
  at::Tensor indptr = at::zeros({num_nodes + 1}, src.options());
  int64_t* at = indptr.data_ptr<int64_t>();
  int64_t reverses = 0;
  for (int64_t j = 0; j < num_edges; ++j) {
    const int64_t u = s[j * s_step];
    const int64_t v = d[j * d_step];
    TORCH_CHECK_INDEX(static_cast<uint64_t>(u) < nodes, "graphemb_kernels.csc_from_edges: src[",
                      j, "] = ", u, " is out of range for ", num_nodes, " nodes");
    TORCH_CHECK_INDEX(static_cast<uint64_t>(v) < nodes, "graphemb_kernels.csc_from_edges: dst[",
                      j, "] = ", v, " is out of range for ", num_nodes, " nodes");
    ++at[v + 1];
    if (undirected && u != v) {
      ++at[u + 1];
      ++reverses;
    }
  }
  const int64_t total = num_edges + reverses;
  TORCH_CHECK_VALUE(indices.numel() == total && edge_ids.numel() == total,
                    "graphemb_kernels.csc_from_edges: indices and edge_ids must hold the ",
                    total, " stored edges, got ", indices.numel(), " and ", edge_ids.numel());
  for (int64_t v = 0; v < num_nodes; ++v) at[v + 1] += at[v];

  // Pass 2 (and 3): each edge into the next free slot of its column, in edge-id order.
  std::vector<int64_t> next(at, at + num_nodes);
  int64_t* out_indices = indices.data_ptr<int64_t>();
  int64_t* out_ids = edge_ids.data_ptr<int64_t>();
  for (int64_t j = 0; j < num_edges; ++j) {
    const int64_t slot = next[d[j * d_step]]++;
    out_indices[slot] = s[j * s_step];
    out_ids[slot] = j;
  }
  if (undirected) {
    int64_t id = num_edges;
    for (int64_t j = 0; j < num_edges; ++j) {
      const int64_t u = s[j * s_step];
      const int64_t v = d[j * d_step];
      if (u == v) continue;
      const int64_t slot = next[u]++;
      out_indices[slot] = v;
      out_ids[slot] = id++;
    }
  }
  return indptr;
}
