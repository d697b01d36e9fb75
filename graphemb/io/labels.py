"""Node labels: single- or multi-label, read from a file and matched to node names."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .errors import GraphFileError
from .fields import numbered_lines, sniff_delimiter, split_fields
from .formats import Format, find_format, register

__all__ = ["NodeLabels", "read_labels", "single_labels"]


@dataclass(frozen=True)
class NodeLabels:
    """Labels of (some of) the nodes of a graph.

    Attributes
    ----------
    values : Tensor of int64, shape (N,) or (N, C)
        Single-label: the class id of each node (-1 where unlabelled). Multi-label: a 0/1
        indicator matrix (a zero row where unlabelled).
    labelled : Tensor of bool, shape (N,)
        Which nodes have labels.
    classes : numpy array, shape (C,)
        ``classes[c]`` is the original name of class ``c``.
    """

    values: torch.Tensor
    labelled: torch.Tensor
    classes: np.ndarray

    @property
    def multi_label(self) -> bool:
        return self.values.dim() == 2

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def nodes(self) -> torch.Tensor:
        """Ids of the labelled nodes, increasing."""
        return torch.nonzero(self.labelled).reshape(-1)

    @classmethod
    def from_indicator(cls, matrix: np.ndarray | torch.Tensor) -> NodeLabels:
        """Multi-label labels from a 0/1 matrix of shape (N, C); class names ``0 .. C-1``."""
        values = torch.as_tensor(np.asarray(matrix) != 0, dtype=torch.int64)
        return cls(values, values.sum(1) > 0, np.arange(values.shape[1], dtype=np.int64))

    @classmethod
    def from_classes(cls, classes: np.ndarray | torch.Tensor) -> NodeLabels:
        """Single-label labels from class ids of shape (N,) (-1: unlabelled)."""
        values = torch.as_tensor(np.asarray(classes), dtype=torch.int64).reshape(-1)
        count = int(values.max()) + 1 if values.numel() else 0
        return cls(values, values >= 0, np.arange(count, dtype=np.int64))


def read_labels(
    path: str | os.PathLike[str],
    node_names: np.ndarray,
    format: str | None = None,
    *,
    multi_label: bool | None = None,
    **options: Any,
) -> NodeLabels:
    """Labels from a file, matched to a graph's nodes by name.

    Parameters
    ----------
    path : str or PathLike
        ``.mat``: the 0/1 matrix ``group`` (row ``i`` for the node named ``i``, as the
        DeepWalk benchmark graphs ship). Any other suffix: text, each non-empty line
        (after removing ``#`` comments) ``node label [label ...]``, or ``node,label``
        rows (comma-separated: a ``.csv`` file, or any file whose first line reads as
        comma-separated); a node may appear on several lines. Nodes without a line are
        unlabelled.
    node_names : numpy array, shape (N,)
        Names of the graph's nodes (``LoadedGraph.node_names`` or the names read with
        embeddings); compared as text.
    format : str, optional
        A registered label format (:func:`graphemb.io.formats.formats` ``("label")``:
        ``"text"``, ``"mat"``). Default: from the suffix, else ``"text"``.
    multi_label : bool, optional
        Force the kind. Default: multi-label iff some node has more than one label
        (a ``.mat`` group: multi-label).
    **options
        Passed to the format's reader: ``delimiter`` for text (default ``","`` for
        ``.csv`` files and comma-separated first lines, else any whitespace), ``group``
        for ``.mat``.

    Returns
    -------
    NodeLabels
        Text: classes in order of first appearance in the file.

    Raises
    ------
    GraphFileError
        A line without a label, a node name not in ``node_names``, a node given several
        labels with ``multi_label=False``, or a file with no labels.
    """
    reader = find_format("label", path, format, default="text").reader
    labels: NodeLabels = reader(path, node_names, multi_label=multi_label, **options)
    return labels


def single_labels(
    labels: NodeLabels, node_names: np.ndarray, path: str | os.PathLike[str]
) -> NodeLabels:
    """Multi-label ``labels`` as class ids, refusing (naming ``path`` and the node) a node
    with several labels."""
    if not labels.multi_label:
        return labels
    several = torch.nonzero(labels.values.sum(1) > 1).reshape(-1)
    if len(several):
        name = str(node_names[int(several[0])])
        raise GraphFileError(path, f"node {name!r} has several labels but multi_label=False")
    classes = torch.where(labels.labelled, labels.values.argmax(1), -1)
    return NodeLabels(classes, labels.labelled, labels.classes)


def _read_label_lines(
    path: str | os.PathLike[str],
    node_names: np.ndarray,
    *,
    multi_label: bool | None = None,
    delimiter: str | None = None,
) -> NodeLabels:
    """The text label format (see :func:`read_labels`)."""
    path = os.fspath(path)
    if delimiter is None and (path.lower().endswith(".csv") or _comma_separated(path)):
        delimiter = ","
    node_ids = {str(name): i for i, name in enumerate(node_names.tolist())}
    class_ids: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []
    first_line: dict[int, int] = {}
    for number, raw in numbered_lines(path):
        tokens = split_fields(raw, delimiter)
        if not tokens:
            continue
        if len(tokens) < 2:
            raise GraphFileError(
                path, f"expected 'node label [label ...]', got {raw.strip()!r}", number
            )
        node = node_ids.get(tokens[0])
        if node is None:
            raise GraphFileError(path, f"node {tokens[0]!r} is not in the graph", number)
        if multi_label is False and (node in first_line or len(tokens) > 2):
            seen = f" (also on line {first_line[node]})" if node in first_line else ""
            raise GraphFileError(
                path,
                f"node {tokens[0]!r} has several labels{seen} but multi_label=False",
                number,
            )
        first_line.setdefault(node, number)
        for label in tokens[1:]:
            pairs.append((node, class_ids.setdefault(label, len(class_ids))))
    if not pairs:
        raise GraphFileError(path, "no labels in the file")
    nodes, classes = np.array(pairs, dtype=np.int64).T
    num_nodes = len(node_names)
    counts = np.bincount(nodes, minlength=num_nodes)
    labelled = torch.from_numpy(counts > 0)
    names = np.array(list(class_ids), dtype=str)
    if multi_label is None:
        multi_label = bool(counts.max() > 1)
    if multi_label:
        indicator = torch.zeros(num_nodes, len(class_ids), dtype=torch.int64)
        indicator[torch.from_numpy(nodes), torch.from_numpy(classes)] = 1
        return NodeLabels(indicator, labelled, names)
    single = torch.full((num_nodes,), -1, dtype=torch.int64)
    single[torch.from_numpy(nodes)] = torch.from_numpy(classes)
    return NodeLabels(single, labelled, names)


def _comma_separated(path: str) -> bool:
    """Whether the first line with fields reads as comma-separated (``node,label``)."""
    for _, line in numbered_lines(path):
        if split_fields(line, None):
            return sniff_delimiter(line) is not None
    return False


register(
    Format(
        "text",
        "label",
        (".txt", ".csv", ".tsv"),
        _read_label_lines,
        description="'node label [label ...]' lines or 'node,label' rows; any other suffix too",
    )
)
