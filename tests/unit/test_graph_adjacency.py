"""``Graph.out_adjacency`` and ``Graph.weighted_in_degrees``: what random walks and the skip-gram
corpus read of a graph. The oracle is the edge list itself, walked in Python: each node's
out-edges (destinations and weights), sorted by hand, and the weights summed per destination."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import DEVICES

from graphemb.graph import Graph

N = 9
# Directed, out of order, with a parallel pair (1 -> 4 twice), a self-loop (6 -> 6), a node
# whose out-edges all weigh 0 (node 5) and nodes without out-edges (7, 8).
EDGES = [
    (2, 0, 1.5), (1, 4, 2.0), (0, 3, 0.5), (1, 0, 1.0), (2, 8, 0.0), (1, 4, 3.0), (0, 1, 2.5),
    (5, 2, 0.0), (3, 7, 4.0), (5, 1, 0.0), (6, 6, 1.0), (2, 5, 2.0), (4, 0, 0.25),
]  # fmt: skip


def graph(device: str, symmetric: bool = False) -> Graph:
    src, dst, weight = zip(*EDGES, strict=True)
    return Graph.from_edges(
        list(src), list(dst), N, device=device, undirected=symmetric, edge_weight=list(weight)
    )


def oracle_rows(edges) -> dict[int, list[tuple[int, float]]]:
    """Per node, its out-edges (destination, weight) sorted by destination."""
    rows: dict[int, list[tuple[int, float]]] = {v: [] for v in range(N)}
    for u, v, w in edges:
        rows[u].append((v, w))
    return {u: sorted(row, key=lambda edge: edge[0]) for u, row in rows.items()}


def read_rows(adjacency) -> dict[int, list[tuple[int, float]]]:
    """Per node, (destination, weight) from the arrays: weights as differences of the prefix
    sums."""
    indptr, indices = adjacency.indptr.cpu(), adjacency.indices.cpu()
    cumulative = adjacency.cumulative.cpu().double()
    return {
        u: [
            (int(indices[e]), float(cumulative[e + 1] - cumulative[e]))
            for e in range(int(indptr[u]), int(indptr[u + 1]))
        ]
        for u in range(N)
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("symmetric", [False, True])
def test_out_adjacency_holds_each_nodes_sorted_out_edges_and_their_weights(device, symmetric):
    edges = EDGES + ([(v, u, w) for u, v, w in EDGES if u != v] if symmetric else [])
    expected = oracle_rows(edges)
    adjacency = graph(device, symmetric).out_adjacency(sorted_rows=True, weighted=True)
    got = read_rows(adjacency)
    for u in range(N):
        # parallel edges may come in either order: compare as sorted (destination, weight);
        # the weights are sums of powers of two, exact in the float64 prefix sums
        assert sorted(got[u]) == sorted(expected[u]), u
        assert [v for v, _ in got[u]] == [v for v, _ in expected[u]]  # each row sorted
    # the rows hold the oracle's edges (above); parallel edges may sit in either order, so
    # the last edge of positive weight is found in the row as stored
    positive = {u: [e for e, (_, w) in enumerate(got[u]) if w > 0] for u in range(N)}
    indptr = adjacency.indptr.cpu()
    for u in range(N):
        last = int(indptr[u]) + positive[u][-1] if positive[u] else int(indptr[u]) - 1
        assert int(adjacency.last[u]) == last, u
        walkable = len(expected[u]) if positive[u] else 0  # all-zero rows: nowhere to go
        assert int(adjacency.degrees[u]) == walkable, u


@pytest.mark.parametrize("device", DEVICES)
def test_unweighted_out_adjacency_has_out_degrees_and_no_weights(device):
    adjacency = graph(device).out_adjacency()
    assert adjacency.cumulative is None and adjacency.last is None
    expected = oracle_rows(EDGES)
    assert adjacency.degrees.cpu().tolist() == [len(expected[u]) for u in range(N)]
    indptr, indices = adjacency.indptr.cpu(), adjacency.indices.cpu()
    for u in range(N):
        row = indices[int(indptr[u]) : int(indptr[u + 1])].tolist()
        assert sorted(row) == [v for v, _ in expected[u]]


def test_out_adjacency_refuses_weights_the_graph_lacks():
    unweighted = Graph.from_edges([0, 1], [1, 2], 3)
    with pytest.raises(ValueError, match="weighted=True needs a graph with edge weights"):
        unweighted.out_adjacency(weighted=True)


@pytest.mark.parametrize("device", DEVICES)
def test_weighted_in_degrees_sum_each_nodes_in_edge_weights(device):
    expected = np.zeros(N)
    for _, v, w in EDGES:
        expected[v] += w
    weighted = graph(device).weighted_in_degrees()
    assert weighted.dtype == torch.float64
    np.testing.assert_allclose(weighted.cpu().numpy(), expected, rtol=1e-12)
    src, dst, _ = zip(*EDGES, strict=True)
    unweighted = Graph.from_edges(list(src), list(dst), N, device=device)
    in_degrees = np.bincount(np.array(dst), minlength=N)
    assert unweighted.weighted_in_degrees().cpu().tolist() == in_degrees.tolist()
