"""The format registry: a format added in one place (one ``registered`` entry) is read,
written, offered by the command line and gone afterwards; every command-line default is
the library signature's."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections import Counter

import numpy as np
import pytest
import scipy.io
import torch

from graphemb.cli import build_parser, main
from graphemb.evaluation import DEEPWALK_RATIOS, DEEPWALK_REPEATS, node_classification_f1
from graphemb.io import (
    EMBEDDING_FORMATS,
    GRAPH_FORMATS,
    GraphFileError,
    LoadedGraph,
    ReadOptions,
    graph_from_adjacency,
    read_adjacency_list,
    read_edge_list,
    read_embeddings,
    read_graph,
    read_labels,
    read_mat,
    read_mtx,
    read_node_features,
    read_npz,
    write_embeddings,
)
from graphemb.io.formats import Format, find_format, formats, register, registered
from graphemb.io.loaded_graph import graph_from_edge_ids
from graphemb.skipgram import Backend, CompiledOptions, SkipGramOptions

PAIRS = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]


def read_toy(path, *, directed=False, separator=">"):
    """'u>v' tokens; node names in order of first appearance."""
    pairs = [token.split(separator) for token in open(path).read().split()]
    names = list(dict.fromkeys(name for pair in pairs for name in pair))
    ids = {name: i for i, name in enumerate(names)}
    src = np.array([ids[u] for u, _ in pairs], dtype=np.int64)
    dst = np.array([ids[v] for _, v in pairs], dtype=np.int64)
    graph, _ = graph_from_edge_ids(src, dst, len(names), directed=directed)
    return LoadedGraph(graph, np.array(names))


TOY = Format("toy", "graph", (".toy",), read_toy, description="toy 'u>v' tokens")


@pytest.fixture
def toy_format():
    with registered(TOY) as format:
        yield format


def named_edges(loaded):
    src, dst = loaded.graph.edges()
    names = loaded.node_names.tolist()
    return Counter((names[s], names[d]) for s, d in zip(src.tolist(), dst.tolist(), strict=True))


def subcommand(name):
    """The parser of one subcommand, built now (after any registration)."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def option(parser, flag):
    return next(a for a in parser._actions if flag in a.option_strings)


def test_a_registered_graph_format_is_read_and_offered_by_the_command_line(tmp_path, toy_format):
    path = tmp_path / "g.toy"
    path.write_text(" ".join(f"{u}>{v}" for u, v in PAIRS))

    assert named_edges(read_graph(path)) == Counter(PAIRS + [(v, u) for u, v in PAIRS])
    assert named_edges(read_graph(path, directed=True)) == Counter(PAIRS)
    (tmp_path / "g.txt").write_text(" ".join(f"{u}-{v}" for u, v in PAIRS))
    assert named_edges(read_graph(tmp_path / "g.txt", "toy", separator="-")) == named_edges(
        read_graph(path)
    )
    assert GRAPH_FORMATS[".toy"] == "toy"

    for command in ("deepwalk", "node2vec"):
        parser = subcommand(command)
        assert "toy" in option(parser, "--format").choices
        shown = " ".join(parser.format_help().split())  # as wrapped for the terminal
        assert ".toy" in option(parser, "--input").help and "toy 'u>v' tokens" in shown
    out = tmp_path / "g.npy"
    argv = [
        "deepwalk",
        "--input",
        str(path),
        "--output",
        str(out),
        "--num-walks",
        "2",
        "--workers",
        "1",
    ]
    assert main([*argv, "--walk-length", "5", "--dimensions", "4", "--quiet"]) == 0
    assert np.load(out).shape == (4, 4)
    assert (tmp_path / "g.npy.names").read_text().split("\n") == ["a", "b", "c", "d"]


def test_a_format_is_gone_after_its_block(tmp_path):
    path = tmp_path / "g.toy"
    path.write_text("a>b")
    with registered(TOY):
        assert read_graph(path).num_nodes == 2
    assert ".toy" not in GRAPH_FORMATS
    assert "toy" not in option(subcommand("deepwalk"), "--format").choices
    with pytest.raises(ValueError, match=r"cannot tell the graph format of .*g\.toy"):
        read_graph(path)
    with pytest.raises(ValueError, match="graph format must be one of"):
        read_graph(path, "toy")


def test_a_registered_embedding_format_is_written_read_and_used_for_features(tmp_path):
    def write_rows(path, rows, names):
        with open(path, "w") as stream:
            for name, row in zip(names, rows.tolist(), strict=True):
                stream.write(f"{name}:{','.join(map(repr, row))}\n")

    def read_rows(path):
        lines = [line.split(":") for line in open(path).read().split()]
        rows = [[float(v) for v in values.split(",")] for _, values in lines]
        return torch.tensor(rows, dtype=torch.float32), np.array([n for n, _ in lines])

    rows = np.array([[0.5, -1.0], [2.0, 0.25], [3.0, 4.0]], dtype=np.float32)
    path = tmp_path / "x.rows"
    with registered(Format("rows", "embedding", (".rows",), read_rows, write_rows)):
        write_embeddings(path, rows, ["u", "v", "w"])
        assert path.read_text() == "u:0.5,-1.0\nv:2.0,0.25\nw:3.0,4.0\n"
        read, names = read_embeddings(path)
        features = read_node_features(path, np.array(["w", "u"]))
        assert EMBEDDING_FORMATS[".rows"] == "rows"
        assert "rows" in option(subcommand("score"), "--format").choices
    np.testing.assert_array_equal(read.numpy(), rows)
    assert names.tolist() == ["u", "v", "w"]
    np.testing.assert_array_equal(features.numpy(), rows[[2, 0]])


def test_a_read_only_format_refuses_to_write_and_writes_nothing(tmp_path):
    with registered(Format("ro", "embedding", (".ro",), read_embeddings)):
        with pytest.raises(ValueError, match=r"'ro' is read only: cannot write .*x\.ro"):
            write_embeddings(tmp_path / "x.ro", np.zeros((2, 2)))
    assert list(tmp_path.iterdir()) == []


def test_unknown_suffixes_name_the_file_and_every_known_suffix(tmp_path):
    with pytest.raises(ValueError) as error:
        read_graph(tmp_path / "graph.gml")
    message = str(error.value)
    assert "graph.gml" in message
    for suffix in (".txt", ".edgelist", ".edges", ".el", ".tsv", ".csv", ".adjlist", ".mat"):
        assert suffix in message
    with pytest.raises(ValueError, match=r"embedding format of .*x\.bin.*\.emb, \.npy, \.txt"):
        read_embeddings(tmp_path / "x.bin")


def test_conflicting_registrations_are_refused_and_change_nothing():
    before = formats("graph")
    with pytest.raises(ValueError, match="graph format named 'edgelist' is already registered"):
        register(Format("edgelist", "graph", (".x1",), read_toy))
    with pytest.raises(ValueError, match=r"suffix '\.txt' already belongs to 'edgelist'"):
        register(Format("other", "graph", (".x2", ".txt"), read_toy))
    with pytest.raises(ValueError, match="lower case and start with '.'"):
        Format("upper", "graph", (".TOY",), read_toy)
    with pytest.raises(TypeError, match="tuple of str"):
        Format("string", "graph", ".toy", read_toy)  # type: ignore[arg-type]
    assert formats("graph") == before


def test_every_suffix_of_every_format_is_in_the_help():
    embed, score = subcommand("deepwalk"), subcommand("score")
    for parser, flag, kind in (
        (embed, "--input", "graph"),
        (embed, "--output", "embedding"),
        (score, "--embeddings", "embedding"),
        (score, "--labels", "label"),
    ):
        help_text = option(parser, flag).help
        assert formats(kind), kind
        for format in formats(kind):
            assert all(suffix in help_text for suffix in format.suffixes), (flag, format)
    assert ".el" in option(embed, "--input").help
    assert option(score, "--labels-format").choices == ("mat", "text")


def library_default(function, name):
    return inspect.signature(function).parameters[name].default


# (command, dest) -> the default it must have, from the library function it feeds.
LIBRARY_DEFAULTS = {
    **{
        (command, dest): getattr(SkipGramOptions(), parameter)
        for command in ("deepwalk", "node2vec")
        for dest, parameter in [
            ("num_walks", "num_walks"),
            ("walk_length", "walk_length"),
            ("dimensions", "dimensions"),
            ("window_size", "window"),
            ("negatives", "negatives"),
            ("epochs", "epochs"),
            ("iter", "passes"),
            ("sample", "sample"),
            ("lr", "lr"),
            ("seed", "seed"),
        ]  # fmt: skip
    },
    ("node2vec", "p"): SkipGramOptions().p,
    ("node2vec", "q"): SkipGramOptions().q,
    ("deepwalk", "backend"): Backend.AUTO.value,
    ("node2vec", "backend"): Backend.AUTO.value,
    ("deepwalk", "shared_negatives"): CompiledOptions().sharing == "position",
    ("node2vec", "shared_negatives"): CompiledOptions().sharing == "position",
    ("deepwalk", "noise_reuse"): CompiledOptions().noise_reuse,
    ("node2vec", "noise_reuse"): CompiledOptions().noise_reuse,
    ("deepwalk", "output_table"): CompiledOptions().output_dtype,
    ("node2vec", "output_table"): CompiledOptions().output_dtype,
    **{
        (command, dest): library_default(function, parameter)
        for command in ("deepwalk", "node2vec")
        for dest, function, parameter in [
            ("format", read_graph, "format"),
            ("directed", read_graph, "directed"),
            ("output_format", write_embeddings, "format"),
            ("delimiter", read_edge_list, "delimiter"),
            ("header", read_edge_list, "header"),
            ("merge_duplicates", read_edge_list, "merge_duplicates"),
            ("drop_self_loops", read_edge_list, "drop_self_loops"),
            ("implicit_ids", read_edge_list, "implicit_ids"),
        ]
    },
    ("score", "format"): library_default(read_embeddings, "format"),
    ("score", "labels_format"): library_default(read_labels, "format"),
    ("score", "multi_label"): library_default(read_labels, "multi_label"),
    ("score", "seed"): library_default(node_classification_f1, "seed"),
    ("score", "normalize"): library_default(node_classification_f1, "normalize"),
    ("score", "ratios"): DEEPWALK_RATIOS,
    ("score", "repeats"): DEEPWALK_REPEATS,
}
# Options without a library counterpart: required files and the command's own output;
# --weighted/--unweighted (neither given: the reference node2vec's unweighted) and
# --workers (none given: this machine's cores), both None until the run resolves them.
OWN = {"help", "input", "output", "embeddings", "labels", "quiet", "weighted", "workers"}


@pytest.mark.parametrize("command", ["deepwalk", "node2vec", "score"])
def test_every_command_line_default_is_the_library_signatures(command):
    parser = subcommand(command)
    dests = {a.dest for a in parser._actions} - OWN
    assert dests == {dest for c, dest in LIBRARY_DEFAULTS if c == command}
    for action in parser._actions:
        if action.dest in dests:
            assert action.default == LIBRARY_DEFAULTS[command, action.dest], action.dest
    own = {a.dest: a.default for a in parser._actions if a.dest in OWN - {"help", "quiet"}}
    assert own and all(default is None for default in own.values()), own  # resolved later


def test_mat_labels_go_through_read_labels(tmp_path):
    group = np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 1, 0]], dtype=np.float64)
    scipy.io.savemat(tmp_path / "g.mat", {"group": group})
    names = np.array(["3", "0", "1", "2"])

    multi = read_labels(tmp_path / "g.mat", names)
    single = read_labels(tmp_path / "g.mat", names, multi_label=False)

    np.testing.assert_array_equal(multi.values.numpy(), group[[3, 0, 1, 2]])
    assert single.values.tolist() == [1, 0, 2, -1]  # the column of each row's 1
    assert single.labelled.tolist() == [True, True, True, False]
    group[0, 2] = 1
    scipy.io.savemat(tmp_path / "g.mat", {"group": group})
    with pytest.raises(GraphFileError, match=r"g\.mat: node '0' has several labels"):
        read_labels(tmp_path / "g.mat", names, multi_label=False)


def test_a_suffix_no_format_claims_is_text_for_labels_and_word2vec_for_features(tmp_path):
    (tmp_path / "labels.dat").write_text("u a\nv b\n")
    labels = read_labels(tmp_path / "labels.dat", np.array(["u", "v"]))
    assert labels.values.tolist() == [0, 1] and labels.classes.tolist() == ["a", "b"]
    assert find_format("label", "x.dat", default="text").name == "text"
    (tmp_path / "f.vec").write_text("2 1\nv 2.5\nu -1\n")
    features = read_node_features(tmp_path / "f.vec", np.array(["u", "v"]))
    assert features.tolist() == [[-1.0], [2.5]]
    with pytest.raises(ValueError, match="embedding format must be one of"):
        read_node_features(tmp_path / "f.vec", np.array(["u"]), format="vec")


def test_every_graph_reader_takes_the_shared_read_options_with_their_defaults(tmp_path):
    shared = {field.name: field.default for field in dataclasses.fields(ReadOptions)}
    readers = [read_edge_list, read_mat, read_npz, read_mtx, graph_from_adjacency]
    for reader in [*readers, read_adjacency_list]:
        parameters = inspect.signature(reader).parameters
        omitted = {"weighted"} if reader is read_adjacency_list else set()
        expected = {name: d for name, d in shared.items() if name not in omitted}
        assert {n: parameters[n].default for n in expected} == expected, reader.__name__
        assert "options" not in parameters
    (tmp_path / "g.adjlist").write_text("1 2\n")
    with pytest.raises(TypeError, match="weighted"):
        read_adjacency_list(tmp_path / "g.adjlist", weighted=True)  # no weights in the format
    (tmp_path / "g.txt").write_text("1 2\n2 3\n1 2\n")
    loaded = read_edge_list(tmp_path / "g.txt", directed=True, merge_duplicates=True)
    assert loaded.num_edges == 2  # both given options reached the reader
    assert read_edge_list(tmp_path / "g.txt").num_edges == 6  # undirected, parallel edges
