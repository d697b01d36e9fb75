"""Label files against scikit-learn's MultiLabelBinarizer / LabelEncoder on the same pairs."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.preprocessing import MultiLabelBinarizer

from graphemb.io import GraphFileError, read_labels

NAMES = np.array(["u", "v", "w", "x", "y"])


def binarized(assignments, names, classes):
    """The indicator matrix of {node: [labels]} in ``classes`` order, rows in ``names``."""
    binarizer = MultiLabelBinarizer(classes=classes)
    return binarizer.fit_transform([assignments.get(n, []) for n in names])


def test_multi_label_lines(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_text("# node labels\nu music sport\nw sport\n\nx art  # one label\nu art\n")

    labels = read_labels(path, NAMES)

    assignments = {"u": ["music", "sport", "art"], "w": ["sport"], "x": ["art"]}
    assert labels.multi_label
    assert labels.classes.tolist() == ["music", "sport", "art"]  # order of appearance
    np.testing.assert_array_equal(
        labels.values.numpy(), binarized(assignments, NAMES, ["music", "sport", "art"])
    )
    assert labels.labelled.tolist() == [True, False, True, True, False]
    assert labels.nodes.tolist() == [0, 2, 3]


def test_csv_rows_with_repeated_nodes_are_multi_label(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("v,3\ny, 1\nv,1\n")
    labels = read_labels(path, NAMES)
    np.testing.assert_array_equal(
        labels.values.numpy(), binarized({"v": ["3", "1"], "y": ["1"]}, NAMES, ["3", "1"])
    )


def test_single_label_with_integer_node_names(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_text("10 b\n7000 a\n500 b\n")
    labels = read_labels(path, np.array([10, 500, 7000, 9]))
    assert not labels.multi_label
    assert labels.classes.tolist() == ["b", "a"]
    assert labels.values.tolist() == [0, 0, 1, -1]
    assert labels.labelled.tolist() == [True, True, True, False]

    forced = read_labels(path, np.array([10, 500, 7000, 9]), multi_label=True)
    assert forced.values.tolist() == [[1, 0], [1, 0], [0, 1], [0, 0]]


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("u a\nzed b\n", {}, "labels.txt:2: node 'zed' is not in the graph"),
        ("u a\nv\n", {}, "labels.txt:2: expected 'node label [label ...]', got 'v'"),
        (
            "u a\nv b\nu c\n",
            {"multi_label": False},
            "labels.txt:3: node 'u' has several labels (also on line 1) but multi_label=False",
        ),
        (
            "u a c\n",
            {"multi_label": False},
            "labels.txt:1: node 'u' has several labels but multi_label=False",
        ),
        ("# nothing\n", {}, "labels.txt: no labels in the file"),
    ],
)
def test_bad_label_files_are_named(tmp_path, text, kwargs, message):
    path = tmp_path / "labels.txt"
    path.write_text(text)
    with pytest.raises(GraphFileError) as error:
        read_labels(path, NAMES, **kwargs)
    assert str(error.value) == f"{tmp_path}/{message}"


def test_latin1_label_file_is_named_by_line(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_bytes(b"u a\nv caf\xe9\n")
    with pytest.raises(
        GraphFileError, match=r"labels.txt:2: not UTF-8 text: byte 0xe9 at column 6"
    ):
        read_labels(path, NAMES)
