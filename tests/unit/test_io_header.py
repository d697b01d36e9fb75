"""Where an edge list's edges start: header lines (detected, forced, refused), the
delimiter sniffed from a comma-separated first line, and ``%`` comment lines, each file's
expected edges written out by hand."""

from __future__ import annotations

from collections import Counter

import pytest

from graphemb.io import GraphFileError, read_graph, read_labels
from graphemb.io.fields import sniff_delimiter, split_fields


def directed_edges(path, **options):
    """The multiset of (source name, target name), names as text, of a directed read."""
    loaded = read_graph(path, directed=True, **options)
    src, dst = loaded.graph.edges()
    names = [str(n) for n in loaded.node_names.tolist()]
    return Counter((names[s], names[d]) for s, d in zip(src.tolist(), dst.tolist(), strict=True))


HEADERS = [
    # (file, its edges): a first line that is not an edge while the next one is
    ("source target\n1 2\n2 3\n", [("1", "2"), ("2", "3")]),
    ("Source,Target,Weight\n1,2,0.5\n2,3,1\n", [("1", "2"), ("2", "3")]),
    ("from\tto\n7\t8\n", [("7", "8")]),
    ("source target\nalice bob\nbob carol\n", [("alice", "bob"), ("bob", "carol")]),
    ("a b weight\na b 0.5\nb c 1.5\n", [("a", "b"), ("b", "c")]),
    ("u v weight\n1 2\n", [("1", "2")]),
    ("x y\na b 1.0\n", [("a", "b")]),
    ("# made by hand\n\nnode1 node2\nx y\n", [("x", "y")]),
    ("% KONECT\nsrc dst\n1 2\n", [("1", "2")]),
]


@pytest.mark.parametrize(("text", "edges"), HEADERS)
def test_a_first_line_that_is_no_edge_is_a_header_and_a_note_says_so(tmp_path, text, edges):
    path = tmp_path / "edges.txt"
    path.write_text(text)
    assert directed_edges(path) == Counter(edges)
    notes = read_graph(path).notes
    assert any(f"{path}:" in n and "read as a header, not an edge" in n for n in notes)


EDGES_FIRST = [
    # a first line that parses as an edge of the file is an edge
    ("1 2\n2 3\n", [("1", "2"), ("2", "3")]),
    ("alice bob\nbob carol\n", [("alice", "bob"), ("bob", "carol")]),
    ("u v\nv w\n", [("u", "v"), ("v", "w")]),  # column-like names, but nodes of the rest
    ("a b\n1 2\n3 x\n", [("a", "b"), ("1", "2"), ("3", "x")]),  # the rest has strings too
    ("1 2\na b\n", [("1", "2"), ("a", "b")]),
    ("source target\n1 2\nsource 3\n", [("source", "target"), ("1", "2"), ("source", "3")]),
]


@pytest.mark.parametrize(("text", "edges"), EDGES_FIRST)
def test_a_first_line_that_parses_as_an_edge_is_one(tmp_path, text, edges):
    path = tmp_path / "edges.txt"
    path.write_text(text)
    assert directed_edges(path) == Counter(edges)
    assert not any("header" in n for n in read_graph(path).notes)


def test_header_true_skips_and_header_false_reads_the_first_line(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("source target\n1 2\n")
    assert directed_edges(path, header=False) == Counter([("source", "target"), ("1", "2")])
    path.write_text("5 6\n1 2\n")
    assert directed_edges(path, header=True) == Counter([("1", "2")])
    assert directed_edges(path) == Counter([("5", "6"), ("1", "2")])


@pytest.mark.parametrize(
    ("text", "options", "message"),
    [
        ("source target\n", {}, "edges.txt: no edges in the file (line 1 is a header)"),
        ("1 2\n", {"header": True}, "edges.txt: no edges in the file (line 1 is a header)"),
        ("source target\n1 2 3 4\n", {}, "edges.txt:2: expected 2 columns (as on line 1), got 4"),
        ("1 2 0.5\n2 3\n", {}, "edges.txt:2: expected 3 columns (as on line 1), got 2"),
    ],
)
def test_a_header_never_hides_a_bad_file(tmp_path, text, options, message):
    path = tmp_path / "edges.txt"
    path.write_text(text)
    with pytest.raises(GraphFileError) as error:
        read_graph(path, **options)
    assert str(error.value).startswith(f"{tmp_path}/{message}")


@pytest.mark.parametrize("suffix", [".txt", ".edges", ".el"])
def test_a_comma_separated_first_line_makes_a_comma_separated_file(tmp_path, suffix):
    path = tmp_path / f"edges{suffix}"
    path.write_text("a,b\nb, c\n")
    assert directed_edges(path) == Counter([("a", "b"), ("b", "c")])
    path.write_text("1,2,0.5\n2,3,1.5\n")
    loaded = read_graph(path, directed=True)
    assert loaded.graph.edge_weight.tolist() == [0.5, 1.5]
    path.write_text("a;b\nb;c\n")
    assert directed_edges(path, delimiter=";") == Counter([("a", "b"), ("b", "c")])


def test_sniffing_keeps_names_with_commas_in_whitespace_files():
    assert sniff_delimiter("a,b c,d") is None  # fields with blanks: not CSV
    assert sniff_delimiter("a b") is None and sniff_delimiter("a,,b") is None
    assert sniff_delimiter("  x , y ,1 # note") == ","


def test_percent_comments_start_a_line_only(tmp_path):
    assert split_fields("% 3 3 2", None) == [] and split_fields("   %x", None) == []
    assert split_fields("50% 25%", None) == ["50%", "25%"]
    path = tmp_path / "out.konect"
    path.write_text("% sym unweighted\n% 3 3 3\n1 2\n% a comment\n2 3\n")
    assert directed_edges(path, format="edgelist") == Counter([("1", "2"), ("2", "3")])


def test_labels_in_node_comma_label_rows_of_a_txt_file(tmp_path):
    import numpy as np

    path = tmp_path / "labels.txt"
    path.write_text("n1,red\nn2,blue\nn1,green\n")
    labels = read_labels(path, np.array(["n1", "n2", "n3"]))
    assert labels.multi_label and labels.classes.tolist() == ["red", "blue", "green"]
    assert labels.values.tolist() == [[1, 0, 1], [0, 1, 0], [0, 0, 0]]
