"""Duplicate edges, self loops and implicit ids (graphemb.io.edge_rules) in every graph
format that has them, against networkx graphs built from the same lines (a simple
``Graph``/``DiGraph`` summing the weights of repeated edges), and Matrix Market files
against scipy's own reading of them."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from helpers import graph_file_error

from graphemb.io import GraphFileError, read_graph

LINES = [("a", "b", 1.0), ("b", "a", 2.0), ("a", "b", 4.0), ("c", "c", 8.0), ("b", "c", 16.0)]


def weighted_edges(loaded):
    """(source name, target name) -> summed weight of the loaded graph's directed edges."""
    src, dst = loaded.graph.edges()
    names = [str(n) for n in loaded.node_names.tolist()]
    weights = loaded.graph.edge_weight
    weights = [1.0] * len(src) if weights is None else weights.tolist()
    found: Counter = Counter()
    for s, d, w in zip(src.tolist(), dst.tolist(), weights, strict=True):
        found[names[s], names[d]] += w
    return found


def counts(loaded):
    src, dst = loaded.graph.edges()
    names = [str(n) for n in loaded.node_names.tolist()]
    return Counter((names[s], names[d]) for s, d in zip(src.tolist(), dst.tolist(), strict=True))


def merged_oracle(lines, directed, drop_loops=False):
    """networkx: one edge per pair, the weights of its lines summed, both directions of
    an undirected edge."""
    graph = nx.DiGraph() if directed else nx.Graph()
    for u, v, w in lines:
        if drop_loops and u == v:
            continue
        previous = graph.get_edge_data(u, v, {"weight": 0.0})["weight"]
        graph.add_edge(u, v, weight=previous + w)
    return Counter({(u, v): w for u, v, w in graph.to_directed().edges(data="weight")})


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("drop_loops", [False, True])
def test_merged_duplicates_sum_their_weights(tmp_path, directed, drop_loops):
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{u} {v} {w}\n" for u, v, w in LINES))
    loaded = read_graph(path, directed=directed, merge_duplicates=True, drop_self_loops=drop_loops)
    assert weighted_edges(loaded) == merged_oracle(LINES, directed, drop_loops)
    merged = 2 if not directed else 1  # "b a" is "a b" when undirected
    assert f"{path}: {merged} duplicate edge{'s' if merged > 1 else ''} merged (weights " in (
        " ".join(loaded.notes)
    )
    assert loaded.node_names.tolist() == ["a", "b", "c"]  # c stays, loop or not


def test_by_default_duplicates_are_parallel_edges_and_loops_are_kept_with_a_note(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v, _ in LINES))
    loaded = read_graph(path)
    oracle = nx.MultiGraph([(u, v) for u, v, _ in LINES]).to_directed()
    assert counts(loaded) == Counter(oracle.edges())
    assert loaded.notes == (f"{path}: 1 self loop kept (a walk may stay on a node)",)


def test_dropped_self_loops_leave_their_node(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("1 1\n1 2\n3 3\n")
    loaded = read_graph(path, drop_self_loops=True)
    assert loaded.node_names.tolist() == [1, 2, 3]
    assert counts(loaded) == Counter([("1", "2"), ("2", "1")])
    assert loaded.notes == (f"{path}: 2 self loops dropped",)


def test_adjacency_list_rules(tmp_path):
    path = tmp_path / "g.adjlist"
    path.write_text("a b b a\nb a\n")
    loaded = read_graph(path, directed=True, merge_duplicates=True, drop_self_loops=True)
    assert counts(loaded) == Counter([("a", "b"), ("b", "a")])
    path.write_text("0 3\n3 0\n")
    assert read_graph(path, implicit_ids=True).node_names.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("suffix", [".mat", ".npz"])
def test_matrix_rules(tmp_path, suffix):
    rows, cols, values = [0, 0, 1, 2], [1, 1, 1, 0], [1.0, 2.0, 5.0, 7.0]
    matrix = sp.coo_matrix((values, (rows, cols)), shape=(3, 3))  # (0, 1) stored twice
    path = tmp_path / f"g{suffix}"
    if suffix == ".npz":
        sp.save_npz(path, matrix.tocsr(), compressed=False)  # csr sums the duplicate
    else:
        scipy.io.savemat(path, {"network": matrix.tocsc()})
    loaded = read_graph(path, directed=True, drop_self_loops=True, weighted=True)
    assert weighted_edges(loaded) == Counter({("0", "1"): 3.0, ("2", "0"): 7.0})
    assert loaded.notes == (f"{path}: 1 self loop dropped",)
    unweighted = read_graph(path, directed=True, weighted=False)
    assert unweighted.weights is None and unweighted.graph.edge_weight is None


def test_unweighted_matrices_ignore_their_values(tmp_path):
    path = tmp_path / "g.npz"
    sp.save_npz(path, sp.csr_matrix(([np.nan, -1.0], ([0, 1], [1, 2])), shape=(3, 3)))
    with pytest.raises(GraphFileError, match=r"g\.npz: entry \(0, 1\): weight nan"):
        read_graph(path)
    assert counts(read_graph(path, weighted=False, directed=True)) == Counter(
        [("0", "1"), ("1", "2")]
    )


def test_implicit_ids_make_names_the_rows(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("# sparse ids\n1 4\n4 2\n")
    loaded = read_graph(path, implicit_ids=True)
    assert loaded.node_names.tolist() == [0, 1, 2, 3, 4]
    assert counts(loaded) == Counter([("1", "4"), ("4", "1"), ("4", "2"), ("2", "4")])
    assert read_graph(path).node_names.tolist() == [1, 2, 4]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 2\n2 x\n", "edges.txt:2: implicit ids: node name 'x' is not an integer >= 0"),
        ("1 2\n-3 2\n", "edges.txt:2: implicit ids: node name '-3' is not an integer >= 0"),
        ("1 2\n2 99999999999\n", "edges.txt: implicit ids: node id 99999999999 would make"),
    ],
)
def test_implicit_ids_refuse_names_that_are_no_row(tmp_path, text, message):
    error = graph_file_error(tmp_path / "edges.txt", text, implicit_ids=True)
    assert str(error).startswith(f"{tmp_path}/{message}")


@pytest.mark.parametrize("symmetry", ["general", "symmetric"])
@pytest.mark.parametrize("field", ["real", "integer", "pattern"])
def test_matrix_market_reads_as_scipy_reads_it(tmp_path, symmetry, field):
    rng = np.random.default_rng(0)
    dense = np.triu((rng.random((8, 8)) < 0.3) * rng.integers(1, 9, (8, 8)), 1).astype(float)
    matrix = dense + dense.T if symmetry == "symmetric" else dense
    if field == "pattern":
        matrix = (matrix != 0).astype(float)
    path = tmp_path / "g.mtx"
    scipy.io.mmwrite(path, sp.coo_matrix(matrix), field=field, symmetry=symmetry)
    assert f"{field} {symmetry}" in path.read_text().splitlines()[0]

    loaded = read_graph(path, directed=True)

    expected = scipy.io.mmread(path).toarray()  # scipy's own reading of the file
    src, dst = loaded.graph.edges()
    got = np.zeros((8, 8))
    weights = loaded.graph.edge_weight
    got[src.numpy(), dst.numpy()] = 1.0 if weights is None else weights.numpy()
    np.testing.assert_array_equal(got, expected)
    assert loaded.node_names.tolist() == list(range(1, 9))  # the file's 1-based numbers
    assert (weights is None) == (field == "pattern")
    assert read_graph(path, implicit_ids=True).node_names.tolist() == list(range(8))


def test_matrix_market_duplicates_are_parallel_edges_or_summed(tmp_path):
    path = tmp_path / "g.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n3 3 3\n1 2 1\n1 2 2\n2 3 5\n")
    parallel = read_graph(path, directed=True)
    assert sorted(parallel.graph.edge_weight.tolist()) == [1.0, 2.0, 5.0]
    merged = read_graph(path, directed=True, merge_duplicates=True)
    assert weighted_edges(merged) == Counter({("1", "2"): 3.0, ("2", "3"): 5.0})
    assert merged.notes == (f"{path}: 1 duplicate entry summed",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("%%MatrixMarket matrix coordinate real general\n3 4 1\n1 2 1.0\n", "must be square"),
        ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 nan\n", r"entry \(1, 2\)"),
        ("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 2 1 1\n", "complex"),
        ("not a matrix\n", "not a readable Matrix Market file"),
    ],
)
def test_bad_matrix_market_files_are_named(tmp_path, text, message):
    path = tmp_path / "g.mtx"
    path.write_text(text)
    with pytest.raises(GraphFileError, match=rf"g\.mtx: .*{message}"):
        read_graph(path)
