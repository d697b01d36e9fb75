"""Adjacency lists, .mat, .npz, networkx and PyG Data, against networkx/scipy oracles built
from the same edges."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np
import pytest
import scipy.io
import scipy.sparse
import torch

from graphemb.io import (
    GraphFileError,
    from_networkx,
    from_pyg,
    read_graph,
    read_mat_labels,
)


def named_edges(loaded, with_weights=False):
    src, dst = loaded.graph.edges()
    names = loaded.node_names.tolist()
    if not with_weights:
        return Counter(
            (names[s], names[d]) for s, d in zip(src.tolist(), dst.tolist(), strict=True)
        )
    weights = loaded.weights[loaded.graph.edge_ids].tolist()
    return Counter(
        (names[s], names[d], w) for s, d, w in zip(src.tolist(), dst.tolist(), weights, strict=True)
    )


def oracle_edges(nx_graph, weight=None):
    directed = nx_graph.to_directed()
    if weight is None:
        return Counter((u, v) for u, v in directed.edges())
    return Counter((u, v, w) for u, v, w in directed.edges(data=weight))


# ------------------------------------------------------------------ adjacency lists
ADJACENCY = """# node neighbours...
a b c
b c   # inline comment

d
c a a
"""


@pytest.mark.parametrize("directed", [False, True])
def test_adjacency_list_with_string_names_and_an_isolated_node(tmp_path, directed):
    path = tmp_path / "graph.adjlist"
    path.write_text(ADJACENCY)

    loaded = read_graph(path, directed=directed)

    oracle = nx.parse_adjlist(
        ADJACENCY.splitlines(), create_using=nx.MultiDiGraph if directed else nx.MultiGraph
    )
    assert sorted(loaded.node_names.tolist()) == sorted(oracle.nodes)
    assert loaded.node_names.tolist() == ["a", "b", "c", "d"]  # order of first appearance
    assert named_edges(loaded) == oracle_edges(oracle)


def test_adjacency_list_with_integer_names(tmp_path):
    path = tmp_path / "graph.adjlist"
    path.write_text("30 10 20\n10 20\n40\n")
    loaded = read_graph(path, directed=True)
    assert loaded.node_names.tolist() == [10, 20, 30, 40]
    assert named_edges(loaded) == Counter([(30, 10), (30, 20), (10, 20)])


def test_empty_adjacency_list(tmp_path):
    path = tmp_path / "graph.adjlist"
    path.write_text("# nothing\n")
    with pytest.raises(GraphFileError, match="graph.adjlist: no nodes in the file"):
        read_graph(path)


# ------------------------------------------------------------------ .mat and .npz
def random_matrix(seed, count=12, symmetric=True, weighted=False):
    rng = np.random.default_rng(seed)
    dense = (rng.random((count, count)) < 0.25).astype(np.float64)
    if symmetric:
        dense = np.maximum(dense, dense.T)
    else:
        dense = np.triu(dense)  # no pair stored in both directions
    if weighted:
        values = rng.integers(1, 5, dense.shape) / 4
        dense = dense * (np.maximum(values, values.T) if symmetric else values)
    return scipy.sparse.csc_matrix(dense)


@pytest.mark.parametrize("weighted", [False, True])
def test_mat_network_and_group(tmp_path, weighted):
    network = random_matrix(0, weighted=weighted)
    group = scipy.sparse.csc_matrix((np.random.default_rng(1).random((12, 4)) < 0.4) * 1.0)
    scipy.io.savemat(tmp_path / "blog.mat", {"network": network, "group": group})

    loaded = read_graph(tmp_path / "blog.mat")

    oracle = nx.from_scipy_sparse_array(network, create_using=nx.DiGraph)
    assert loaded.node_names.tolist() == list(range(12))
    if weighted:
        assert named_edges(loaded, True) == oracle_edges(oracle, "weight")
    else:
        assert loaded.weights is None
        assert named_edges(loaded) == oracle_edges(oracle)
    assert loaded.labels.multi_label
    np.testing.assert_array_equal(loaded.labels.values.numpy(), group.toarray())
    np.testing.assert_array_equal(loaded.labels.labelled.numpy(), group.toarray().sum(1) > 0)


def test_mat_without_group_and_an_asymmetric_network_made_undirected(tmp_path):
    network = random_matrix(2, symmetric=False, weighted=True)
    scipy.io.savemat(tmp_path / "g.mat", {"network": network})

    undirected = read_graph(tmp_path / "g.mat")
    directed = read_graph(tmp_path / "g.mat", directed=True)

    assert undirected.labels is None
    oracle = nx.from_scipy_sparse_array(network, create_using=nx.Graph)
    assert named_edges(undirected, True) == oracle_edges(oracle, "weight")
    assert named_edges(directed, True) == oracle_edges(
        nx.from_scipy_sparse_array(network, create_using=nx.DiGraph), "weight"
    )


def test_mat_errors_name_the_file_and_problem(tmp_path):
    scipy.io.savemat(tmp_path / "a.mat", {"adjacency": random_matrix(0)})
    with pytest.raises(
        GraphFileError, match=r"a.mat: no 'network' variable \(found: \['adjacency'\]\)"
    ):
        read_graph(tmp_path / "a.mat")
    assert read_graph(tmp_path / "a.mat", network="adjacency").num_nodes == 12

    scipy.io.savemat(tmp_path / "b.mat", {"network": random_matrix(0), "group": np.ones((5, 2))})
    with pytest.raises(
        GraphFileError, match=r"b.mat: 'group' must have shape \(12, C\), got \(5, 2\)"
    ):
        read_graph(tmp_path / "b.mat")

    scipy.io.savemat(tmp_path / "c.mat", {"network": np.ones((3, 4))})
    with pytest.raises(GraphFileError, match=r"c.mat: an adjacency matrix must be square"):
        read_graph(tmp_path / "c.mat")

    (tmp_path / "d.mat").write_text("not matlab")
    with pytest.raises(GraphFileError, match=r"d.mat: not a readable .mat file"):
        read_graph(tmp_path / "d.mat")


def test_npz(tmp_path):
    matrix = random_matrix(3, symmetric=False).tocsr()
    scipy.sparse.save_npz(tmp_path / "g.npz", matrix)

    loaded = read_graph(tmp_path / "g.npz", directed=True)

    assert named_edges(loaded) == oracle_edges(
        nx.from_scipy_sparse_array(matrix, create_using=nx.MultiDiGraph)
    )
    np.savez(tmp_path / "bad.npz", values=np.zeros(3))  # an npz, but not a sparse matrix
    with pytest.raises(GraphFileError, match="bad.npz: not a scipy sparse .npz file"):
        read_graph(tmp_path / "bad.npz")


# ------------------------------------------------------------------ objects in memory
def test_networkx_with_names_weights_and_an_isolated_node():
    graph = nx.Graph()
    graph.add_node("lonely")
    graph.add_weighted_edges_from([("x", "y", 2.0), ("y", "z", 0.5), ("z", "z", 1.0)])

    loaded = from_networkx(graph)

    assert loaded.node_names.tolist() == ["lonely", "x", "y", "z"]
    assert named_edges(loaded, True) == oracle_edges(graph, "weight")
    unweighted = from_networkx(graph, weight=None)
    assert unweighted.weights is None


def test_networkx_multidigraph_with_sparse_integer_nodes():
    graph = nx.MultiDiGraph()
    graph.add_edges_from([(100, 7), (7, 100), (7, 100), (3, 3)])
    loaded = from_networkx(graph)
    assert loaded.node_names.dtype == np.int64
    assert named_edges(loaded) == oracle_edges(graph)
    with pytest.raises(TypeError, match="expected a networkx graph, got list"):
        from_networkx([])


def test_pyg_data_with_features_and_labels():
    data_module = pytest.importorskip("torch_geometric.data", reason="needs torch_geometric")
    edge_index = torch.tensor([[0, 1, 1, 2, 3], [1, 0, 2, 1, 3]])
    x = torch.randn(5, 3)
    y = torch.tensor([2, 0, -1, 1, 0])
    data = data_module.Data(edge_index=edge_index, x=x, y=y, num_nodes=5)

    loaded = from_pyg(data)

    oracle = nx.MultiDiGraph()
    oracle.add_nodes_from(range(5))
    oracle.add_edges_from(edge_index.t().tolist())
    assert named_edges(loaded) == oracle_edges(oracle)
    assert loaded.num_nodes == 5
    torch.testing.assert_close(loaded.features, x)
    assert loaded.labels.values.tolist() == y.tolist()
    assert loaded.labels.labelled.tolist() == [True, True, False, True, True]

    multi = data_module.Data(
        edge_index=edge_index, y=torch.tensor([[1, 0], [0, 1], [1, 1], [0, 0]]), num_nodes=4
    )
    loaded = from_pyg(multi, directed=False)
    assert loaded.labels.multi_label and loaded.labels.labelled.tolist() == [
        True,
        True,
        True,
        False,
    ]
    assert loaded.num_edges == 9  # 5 edges, 4 reversed (the self-loop once)
    with pytest.raises(ValueError, match=r"edge_index must be a tensor of shape \(2, E\)"):
        from_pyg(data_module.Data(edge_index=torch.zeros(3, 2, dtype=torch.long), num_nodes=1))


def test_mat_labels_for_nodes_given_by_name(tmp_path):
    group = (np.random.default_rng(4).random((6, 3)) < 0.5).astype(np.float64)
    scipy.io.savemat(tmp_path / "g.mat", {"group": scipy.sparse.csc_matrix(group)})

    labels = read_mat_labels(tmp_path / "g.mat", np.array(["5", "0", "3"]))

    np.testing.assert_array_equal(labels.values.numpy(), group[[5, 0, 3]])
    assert labels.multi_label
    with pytest.raises(
        GraphFileError, match=r"g.mat: node '6' is not a row of 'group' \(rows 0..5\)"
    ):
        read_mat_labels(tmp_path / "g.mat", np.array(["1", "6"]))
    with pytest.raises(GraphFileError, match=r"g.mat: no 'labels' variable \(found: \['group'\]\)"):
        read_mat_labels(tmp_path / "g.mat", np.array(["1"]), group="labels")
