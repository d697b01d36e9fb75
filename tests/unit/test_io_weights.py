"""Edge weights read from files: round trips from every format that carries them (the
graph's ``edge_weight`` against a scipy adjacency built from the written values), and the
refusal of NaN, infinite, negative and all-zero weights naming the file and the line (or
the matrix entry)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
import torch

from graphemb.io import GraphFileError, read_graph

N = 6
EDGES = [(0, 1, 1.5), (1, 2, 2.0), (2, 3, 0.25), (3, 0, 7.0), (4, 5, 0.0), (2, 2, 3.0)]


def oracle(edges, undirected: bool) -> np.ndarray:
    src, dst, weight = (np.array(column) for column in zip(*edges, strict=True))
    matrix = sp.coo_matrix((weight, (src, dst)), shape=(N, N)).toarray()
    return matrix + matrix.T - np.diag(np.diag(matrix)) if undirected else matrix


def dense(loaded) -> np.ndarray:
    """The graph's weighted adjacency, in the file's node names (integers 0..N-1)."""
    src, dst = loaded.graph.edges()
    names = loaded.node_names
    weights = loaded.graph.edge_weight.numpy()
    matrix = sp.coo_matrix((weights, (names[src.numpy()], names[dst.numpy()])), shape=(N, N))
    by_id = loaded.weights.numpy()[loaded.graph.edge_ids.numpy()]  # the by-id copy agrees
    np.testing.assert_array_equal(by_id, weights)
    return matrix.toarray()


def write_edges(path, edges, delimiter=" "):
    path.write_text(
        "# u v w\n" + "".join(f"{u}{delimiter}{v}{delimiter}{w}\n" for u, v, w in edges)
    )


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("suffix, delimiter", [(".txt", " "), (".csv", ","), (".tsv", "\t")])
def test_edge_list_weights_round_trip(tmp_path, directed, suffix, delimiter):
    path = tmp_path / f"g{suffix}"
    write_edges(path, EDGES, delimiter)
    loaded = read_graph(path, directed=directed)
    np.testing.assert_allclose(dense(loaded), oracle(EDGES, not directed), rtol=1e-15)


def test_edge_list_with_string_names_keeps_weights(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("a b 2.5\nb c 0.5\n")
    loaded = read_graph(path, directed=True)
    src, dst = loaded.graph.edges()
    names = loaded.node_names
    got = {
        (names[s], names[d]): w
        for s, d, w in zip(
            src.tolist(), dst.tolist(), loaded.graph.edge_weight.tolist(), strict=True
        )
    }
    assert got == {("a", "b"): 2.5, ("b", "c"): 0.5}


def test_two_columns_and_weighted_false_carry_no_weights(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("0 1\n1 2\n")
    assert read_graph(path).graph.edge_weight is None
    write_edges(path, EDGES)
    assert read_graph(path, weighted=False).graph.edge_weight is None


@pytest.mark.parametrize("suffix", [".mat", ".npz"])
@pytest.mark.parametrize("directed", [False, True])
def test_matrix_weights_round_trip(tmp_path, suffix, directed):
    src, dst, weight = zip(*EDGES, strict=True)
    matrix = sp.coo_matrix((weight, (src, dst)), shape=(N, N)).tocsr()  # 4 -> 5 stored, 0
    path = tmp_path / f"g{suffix}"
    if suffix == ".mat":
        scipy.io.savemat(path, {"network": matrix})
    else:
        sp.save_npz(path, matrix)
    loaded = read_graph(path, directed=directed)
    np.testing.assert_allclose(dense(loaded), oracle(EDGES, not directed), rtol=1e-15)
    assert loaded.num_edges == len(EDGES) + (0 if directed else len(EDGES) - 1)


BAD = [
    ("nan", "weight nan is not a finite number"),
    ("inf", "weight inf is not a finite"),
    ("-1", "weight -1.0 is negative"),
    ("-inf", "weight -inf is not a finite number"),
]


@pytest.mark.parametrize("names", ["integers", "strings"])
@pytest.mark.parametrize("bad, message", BAD)
def test_bad_edge_list_weights_name_file_and_line(tmp_path, names, bad, message):
    path = tmp_path / "g.txt"
    prefix = "n" if names == "strings" else ""
    path.write_text(f"# header\n{prefix}0 {prefix}1 1.0\n\n{prefix}1 {prefix}2 {bad}\n")
    with pytest.raises(GraphFileError, match=f"g.txt:4: {message}"):
        read_graph(path)


def test_all_zero_weights_are_refused(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("0 1 0\n1 2 0.0\n")
    with pytest.raises(GraphFileError, match="g.txt: every edge weight is 0"):
        read_graph(path)
    sp.save_npz(tmp_path / "z.npz", sp.csr_matrix((np.zeros(2), ([0, 1], [1, 2])), shape=(3, 3)))
    with pytest.raises(GraphFileError, match="z.npz: every edge weight is 0"):
        read_graph(tmp_path / "z.npz")


@pytest.mark.parametrize("suffix", [".mat", ".npz"])
@pytest.mark.parametrize("bad, message", [(np.nan, "weight nan is not"), (-2.0, "weight -2.0 is")])
def test_bad_matrix_weights_name_file_and_entry(tmp_path, suffix, bad, message):
    matrix = sp.csr_matrix(([1.0, bad, 3.0], ([0, 1, 2], [1, 3, 0])), shape=(4, 4))
    path = tmp_path / f"g{suffix}"
    if suffix == ".mat":
        scipy.io.savemat(path, {"network": matrix})
    else:
        sp.save_npz(path, matrix)
    with pytest.raises(GraphFileError, match=rf"g\{suffix}: entry \(1, 3\): {message}"):
        read_graph(path)


def test_weighted_graph_walks_from_a_file(tmp_path):
    """The graph a reader returns is ready for weighted walks (weights by storage order)."""
    from graphemb.sampling.walks import random_walks

    path = tmp_path / "g.txt"
    path.write_text("0 1 1\n0 2 9\n")
    graph = read_graph(path, directed=True).graph
    start = torch.zeros(20_000, dtype=torch.long)
    steps = random_walks(graph, start, 1, weighted=True, generator=torch.Generator().manual_seed(0))
    share = float((steps[:, 1] == 2).double().mean())  # expected 0.9
    assert abs(share - 0.9) < 4 * (0.9 * 0.1 / start.numel()) ** 0.5
