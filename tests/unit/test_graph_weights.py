"""Edge weights on ``Graph``: every constructor and transform keeps them aligned with the
edges. The oracle is a dense weighted adjacency built independently with scipy (parallel
edges summed) or networkx, never the graph's own arrays."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import DEVICES

from graphemb.graph import Graph
from graphemb.io import from_pyg

N = 12


def random_weighted_edges(seed=0, count=60):
    """A multigraph with parallel edges and self-loops, and float64 weights in (0, 10)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, N, count)
    dst = rng.integers(0, N, count)
    src = np.concatenate([src, [3, 3, 5]])  # a parallel pair and a self-loop
    dst = np.concatenate([dst, [7, 7, 5]])
    return src, dst, rng.uniform(0.1, 10.0, src.size)


def oracle(src, dst, weight) -> np.ndarray:
    """Dense (N, N) adjacency: entry (u, v) = total weight of the edges u -> v."""
    return sp.coo_matrix((weight, (src, dst)), shape=(N, N)).toarray()


def dense(graph: Graph) -> np.ndarray:
    """The graph's weighted adjacency, read from its CSC arrays."""
    src, dst = graph.edges()
    return oracle(src.cpu().numpy(), dst.cpu().numpy(), graph.edge_weight.cpu().numpy())


def dense_csr(graph: Graph) -> np.ndarray:
    indptr, indices, _ = graph.csr()
    rows = np.repeat(np.arange(N), np.diff(indptr.cpu().numpy()))
    return oracle(rows, indices.cpu().numpy(), graph.csr_edge_weight().cpu().numpy())


def by_edge_id(graph: Graph) -> np.ndarray:
    weights = np.empty(graph.num_edges)
    weights[graph.edge_ids.cpu().numpy()] = graph.edge_weight.cpu().numpy()
    return weights


@pytest.mark.parametrize("device", DEVICES)
def test_constructors_and_transforms_keep_weights_aligned(device):
    src, dst, weight = random_weighted_edges()
    adjacency = oracle(src, dst, weight)
    loops = np.diag(np.diag(adjacency))
    graph = Graph.from_edges(src, dst, N, device, edge_weight=weight)
    assert graph.edge_weight.dtype == torch.float64 and graph.edge_weight.device.type == device
    np.testing.assert_allclose(by_edge_id(graph), weight, rtol=0, atol=0)
    np.testing.assert_allclose(dense(graph), adjacency, rtol=1e-12)
    np.testing.assert_allclose(dense_csr(graph), adjacency, rtol=1e-12)
    np.testing.assert_allclose(dense(graph.reverse()), adjacency.T, rtol=1e-12)
    np.testing.assert_allclose(dense(graph.add_reverse_edges()), adjacency + adjacency.T)
    np.testing.assert_allclose(dense(graph.remove_self_loops()), adjacency - loops)
    np.testing.assert_allclose(dense(graph.add_self_loops()), adjacency - loops + np.eye(N))
    np.testing.assert_allclose(dense(graph.to("cpu")), adjacency, rtol=1e-12)
    undirected = Graph.from_edges(src, dst, N, device, undirected=True, edge_weight=weight)
    np.testing.assert_allclose(dense(undirected), adjacency + adjacency.T - loops, rtol=1e-12)
    np.testing.assert_allclose(dense_csr(undirected), adjacency + adjacency.T - loops)


def test_unweighted_graphs_carry_nothing():
    src, dst, _ = random_weighted_edges()
    graph = Graph.from_edges(src, dst, N)
    assert graph.edge_weight is None and graph.csr_edge_weight() is None
    for other in (graph.reverse(), graph.add_self_loops(), graph.add_reverse_edges()):
        assert other.edge_weight is None
    ones = sp.coo_matrix((np.ones(src.size), (src, dst)), shape=(N, N))
    assert Graph.from_scipy(ones).edge_weight is None


@pytest.mark.parametrize(
    ("weight", "message"),
    [
        ([1.0, float("nan"), 2.0], r"edge_weight\[1\]: weight nan is not a finite number"),
        ([1.0, 2.0, float("inf")], r"edge_weight\[2\]: weight inf is not a finite number"),
        ([1.0, -1.0, 2.0], r"edge_weight\[1\]: weight -1.0 is negative"),
        ([1.0, 2.0], r"one entry per edge, shape \(3,\), got \(2,\)"),
    ],
)
def test_bad_weights_are_refused(weight, message):
    with pytest.raises(ValueError, match=message):
        Graph.from_edges([0, 1, 2], [1, 2, 0], edge_weight=weight)


def test_from_scipy_networkx_dataset_and_pyg():
    nx = pytest.importorskip("networkx")
    src, dst, weight = random_weighted_edges(seed=1)
    adjacency = oracle(src, dst, weight)
    matrix = sp.csr_matrix(adjacency)
    np.testing.assert_allclose(dense(Graph.from_scipy(matrix)), adjacency, rtol=1e-12)
    nx_graph = nx.Graph()
    nx_graph.add_nodes_from(range(N))
    nx_graph.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), weight.tolist(), strict=True))
    nx_graph.add_edge(0, 11)  # no weight attribute: weighs 1
    expected = nx.to_numpy_array(nx_graph, nodelist=range(N), weight="weight")
    np.testing.assert_allclose(dense(Graph.from_networkx(nx_graph)), expected, rtol=1e-12)
    dataset = SimpleNamespace(src=src, dst=dst, num_nodes=N, edge_weight=weight)
    np.testing.assert_allclose(dense(Graph.from_dataset(dataset)), adjacency, rtol=1e-12)
    edge_index = torch.from_numpy(np.stack([src, dst]))
    for name in ("edge_weight", "edge_attr"):  # PyG keeps weights in either
        data = SimpleNamespace(edge_index=edge_index, num_nodes=N, **{name: torch.tensor(weight)})
        loaded = from_pyg(data)
        np.testing.assert_allclose(dense(loaded.graph), adjacency, rtol=1e-12)
        np.testing.assert_allclose(loaded.weights.numpy(), weight)


@pytest.mark.dgl
def test_from_dgl_reads_edge_weights():
    dgl = pytest.importorskip("dgl", reason="needs DGL (the dgl stack)")
    src, dst, weight = random_weighted_edges(seed=2)
    dgl_graph = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=N)
    for name in ("w", "weight"):
        dgl_graph.edata.clear()
        dgl_graph.edata[name] = torch.tensor(weight).unsqueeze(1)
        graph = Graph.from_dgl(dgl_graph)
        np.testing.assert_allclose(dense(graph), oracle(src, dst, weight), rtol=1e-12)
