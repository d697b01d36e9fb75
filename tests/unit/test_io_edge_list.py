"""Edge-list reading against networkx graphs built from the same edges."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np
import pytest
from helpers import graph_file_error

from graphemb import _compiled
from graphemb.io import GraphFileError, parse_edge_list, read_graph
from graphemb.io.edge_list import _parse_integers, _parse_lines
from graphemb.io.header import edge_start
from graphemb.io.node_names import pack_integer_names


def named_edges(loaded):
    """Multiset of (source name, target name) of the loaded graph's directed edges."""
    src, dst = loaded.graph.edges()
    names = loaded.node_names.tolist()
    return Counter((names[s], names[d]) for s, d in zip(src.tolist(), dst.tolist(), strict=True))


def oracle_edges(edges, directed):
    """The same multiset from networkx (a MultiGraph keeps repeated lines)."""
    graph = nx.MultiDiGraph() if directed else nx.MultiGraph()
    graph.add_edges_from(edges)
    return Counter((u, v) for u, v in graph.to_directed().edges())


EDGES = [(0, 1), (1, 2), (2, 0), (2, 2), (3, 1), (1, 2)]


@pytest.mark.parametrize("directed", [False, True])
def test_integer_names_with_comments_and_blank_lines(tmp_path, directed):
    lines = ["# a comment", ""] + [f"{u} {v}" for u, v in EDGES]
    lines[3] += "   # inline comment"
    path = tmp_path / "edges.txt"
    path.write_text("\n".join(lines) + "\n")

    loaded = read_graph(path, directed=directed)

    assert loaded.node_names.tolist() == [0, 1, 2, 3]  # dense ids stay themselves
    assert named_edges(loaded) == oracle_edges(EDGES, directed)
    assert loaded.weights is None


def test_sparse_integer_names_are_packed_in_order(tmp_path):
    edges = [(7_000_000, 10), (10, 500), (500, 99_999_999_999)]
    path = tmp_path / "edges.edgelist"
    path.write_text("".join(f"{u}\t{v}\n" for u, v in edges))

    loaded = read_graph(path)

    assert loaded.node_names.tolist() == [10, 500, 7_000_000, 99_999_999_999]
    assert loaded.num_nodes == 4
    assert named_edges(loaded) == oracle_edges(edges, directed=False)


def test_string_names_in_order_of_appearance(tmp_path):
    edges = [("carol", "alice"), ("alice", "bob"), ("bob", "bob"), ("dave", "carol")]
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v in edges))

    loaded = read_graph(path, directed=True)

    assert loaded.node_names.tolist() == ["carol", "alice", "bob", "dave"]
    assert named_edges(loaded) == oracle_edges(edges, directed=True)


@pytest.mark.parametrize("directed", [False, True])
def test_weights_follow_their_edges(tmp_path, directed):
    edges = [("a", "b", 0.5), ("b", "c", 2.0), ("c", "c", 1.25), ("a", "c", 3e-3)]
    path = tmp_path / "weighted.csv"
    path.write_text("source,target,weight\n" + "".join(f"{u}, {v},{w}\n" for u, v, w in edges))

    loaded = read_graph(path, directed=directed, header=True)

    oracle = nx.MultiDiGraph() if directed else nx.MultiGraph()
    oracle.add_weighted_edges_from(edges)
    expected = Counter((u, v, w) for u, v, w in oracle.to_directed().edges(data="weight"))
    src, dst = loaded.graph.edges()
    weights = loaded.weights[loaded.graph.edge_ids]  # by edge id -> storage order
    names = loaded.node_names.tolist()
    got = Counter(
        (names[s], names[d], w)
        for s, d, w in zip(src.tolist(), dst.tolist(), weights.tolist(), strict=True)
    )
    assert got == expected


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("kernels", ["default build", "pure torch"])
def test_every_edge_id_names_its_line_and_weight(tmp_path, monkeypatch, directed, kernels):
    """Edge ``j`` is line ``j``; undirected, edge ``E + k`` is line ``j`` reversed for the
    ``k``-th line that is not a self-loop; weights follow. Parallel lines, self-loops (one
    repeated), sparse names; with the compiled graph build and without it."""
    if kernels == "pure torch":
        monkeypatch.setenv(_compiled.DISABLE_VARIABLE, "1")
    rng = np.random.default_rng(4)
    names = rng.choice(10_000, 40, replace=False)
    lines = [(int(names[u]), int(names[v])) for u, v in rng.integers(0, 40, (300, 2))]
    lines += [(lines[0][0], lines[0][0])] * 2 + [lines[1], lines[1][::-1]]
    weights = rng.random(len(lines)).round(6)
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{u} {v} {w}\n" for (u, v), w in zip(lines, weights, strict=True)))

    loaded = read_graph(path, directed=directed)

    expected = [(u, v, w) for (u, v), w in zip(lines, weights, strict=True)]
    if not directed:
        expected += [(v, u, w) for (u, v), w in zip(lines, weights, strict=True) if u != v]
    src, dst = loaded.graph.edges()
    ids = loaded.graph.edge_ids
    stored = {
        edge_id: (int(loaded.node_names[s]), int(loaded.node_names[d]), float(w))
        for edge_id, s, d, w in zip(
            ids.tolist(), src.tolist(), dst.tolist(), loaded.weights[ids].tolist(), strict=True
        )
    }
    assert stored == dict(enumerate(expected))


def test_integer_weighted_file_takes_the_fast_path_and_agrees_with_the_slow_one(tmp_path):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(5, 60, 200), rng.integers(5, 60, 200)
    weights = rng.random(200).round(4)
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{u} {v} {w}\n" for u, v, w in zip(src, dst, weights, strict=True)))

    fast = _parse_integers(str(path), None, 1, 3, True)
    slow = _parse_lines(str(path), None, 1, 3, True)

    assert fast is not None
    np.testing.assert_array_equal(fast.node_names, np.unique(np.concatenate([src, dst])))
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fast.node_names[fast.src], src)
    np.testing.assert_array_equal(fast.node_names[fast.dst], dst)
    np.testing.assert_array_equal(fast.weights, weights)


def test_weighted_false_ignores_the_third_column(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("1 2 0.5\n2 3 0.25\n")
    edges = parse_edge_list(path, weighted=False)
    assert edges.weights is None
    assert edges.node_names[edges.src].tolist() == [1, 2]


@pytest.mark.parametrize("fast", [True, False])
def test_integer_names_compare_as_numbers_on_both_paths(tmp_path, fast):
    path = tmp_path / "edges.txt"
    path.write_text("01 1\n1 +2\n")
    parse = _parse_integers if fast else _parse_lines
    edges = parse(str(path), None, 1, 2, False)
    assert edges.node_names.tolist() == [1, 2]
    assert (edges.src.tolist(), edges.dst.tolist()) == ([0, 0], [0, 1])


def test_one_string_name_makes_every_name_a_string(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("3 1\n1 x\n")
    loaded = read_graph(path, directed=True)
    assert loaded.node_names.tolist() == ["3", "1", "x"]
    assert named_edges(loaded) == Counter([("3", "1"), ("1", "x")])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "\n".join(["1 2"] * 16 + ["a b c d"]) + "\n",
            "edges.txt:17: expected 2 columns (as on line 1), got 4: 'a b c d'",
        ),
        ("# header\na b c d\n", "edges.txt:2: expected 2 or 3 columns, got 4: 'a b c d'"),
        ("x\n", "edges.txt:1: expected 2 or 3 columns, got 1: 'x'"),
        ("1 2 0.5\n2 3 heavy\n", "edges.txt:2: weight 'heavy' is not a number"),
        ("1 2 0.5\n2 3\n", "edges.txt:2: expected 3 columns (as on line 1), got 2: '2 3'"),
        ("# only a comment\n\n", "edges.txt: no edges in the file"),
    ],
)
def test_bad_lines_are_named(tmp_path, text, message):
    error = graph_file_error(tmp_path / "edges.txt", text)
    assert str(error) == f"{tmp_path}/{message}"
    assert error.path == str(tmp_path / "edges.txt")


def test_weighted_true_without_a_weight_column(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("# c\n1 2\n")
    with pytest.raises(GraphFileError, match=r"edges.txt:2: no weight column"):
        read_graph(path, weighted=True)


def test_first_edge_line_skips_comments_and_header(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("# made by hand\n\nsrc,dst\n1,2\n")
    forced = edge_start(str(path), None, header=True)
    assert (forced.delimiter, forced.first_line, forced.columns) == (",", 4, 2)
    assert forced.header_line == 3 and forced.header_fields == ("src", "dst")
    assert edge_start(str(path), ",", header=None) == forced.__class__(
        ",", 4, 2, 3, "words", ("src", "dst")
    )
    never = edge_start(str(path), ",", header=False)
    assert (never.first_line, never.columns, never.header_line) == (3, 2, None)


def test_unknown_suffix_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"cannot tell the graph format of .*graph.xyz"):
        read_graph(tmp_path / "graph.xyz")
    with pytest.raises(ValueError, match="graph format must be one of"):
        read_graph(tmp_path / "graph.txt", format="gml")
    with pytest.raises(FileNotFoundError, match="graph.txt"):
        read_graph(tmp_path / "graph.txt")
    (tmp_path / "graph.dat").write_text("1 2\n")
    assert read_graph(tmp_path / "graph.dat", format="edgelist").num_edges == 2


def test_a_byte_that_is_not_utf8_is_named_by_line_far_into_the_file(tmp_path):
    path = tmp_path / "edges.txt"  # past the text decoder's first read-ahead block
    path.write_bytes(b"".join(b"n%d n%d\n" % (i, i + 1) for i in range(5000)) + b"a \xe9t\xe9\n")
    with pytest.raises(GraphFileError) as error:
        read_graph(path)
    assert str(error.value) == f"{path}:5001: not UTF-8 text: byte 0xe9 at column 3"


@pytest.mark.parametrize(
    "spacing, offset",
    [(1, 0), (1000, 0), (1000, 10**6), (10**9, -(10**15))],
    ids=["dense", "sparse-table", "sparse-sort", "negative-sort"],
)
def test_integer_names_are_packed_in_increasing_order(spacing, offset):
    rng = np.random.default_rng(5)
    src = rng.permutation(np.arange(50).repeat(3)) * spacing + offset
    dst = rng.choice(50, 150) * spacing + offset
    (src_ids, dst_ids), names = pack_integer_names([src, dst])
    np.testing.assert_array_equal(names, np.unique(np.concatenate([src, dst])))
    np.testing.assert_array_equal(names[src_ids], src)
    np.testing.assert_array_equal(names[dst_ids], dst)
    assert src_ids.max() < len(names) == 50
