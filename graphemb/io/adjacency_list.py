"""Adjacency lists: one node a line, followed by its neighbours (``node nbr nbr ...``)."""

from __future__ import annotations

import os
from array import array

import numpy as np

from .errors import GraphFileError
from .fields import numbered_lines, split_fields
from .formats import Format, register
from .loaded_graph import LoadedGraph, graph_from_edge_ids
from .node_names import NameIndex

__all__ = ["read_adjacency_list"]


def read_adjacency_list(
    path: str | os.PathLike[str], *, directed: bool = False, delimiter: str | None = None
) -> LoadedGraph:
    """A graph from an adjacency-list file (the DeepWalk reference tool's ``adjlist``).

    Parameters
    ----------
    path : str or PathLike
        Lines ``node [neighbour ...]``: an edge ``node -> neighbour`` per neighbour; a node
        alone on its line is a node without out-edges. ``#`` starts a comment. A node may
        have several lines.
    directed : bool
        False: every listed edge is also stored reversed (a self-loop once). A file that
        lists each undirected edge from both of its ends should be read with
        ``directed=True``.
    delimiter : str, optional
        Default: any run of whitespace.

    Returns
    -------
    LoadedGraph
        Names as in :func:`graphemb.io.read_edge_list` (integers in increasing order,
        otherwise strings in order of first appearance).

    Raises
    ------
    GraphFileError
        A file without nodes.
    """
    path = os.fspath(path)
    index = NameIndex()
    src, dst = array("q"), array("q")
    for _, line in numbered_lines(path):
        fields = split_fields(line, delimiter)
        if not fields:
            continue
        node = index.id(fields[0])
        for neighbour in fields[1:]:
            src.append(node)
            dst.append(index.id(neighbour))
    if not len(index):
        raise GraphFileError(path, "no nodes in the file")
    # Isolated nodes appear in no edge: pack the node column too, then drop it.
    every_node = np.arange(len(index), dtype=np.int64)
    (src_ids, dst_ids, _), names = index.pack(
        [np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), every_node]
    )
    graph, _ = graph_from_edge_ids(src_ids, dst_ids, len(names), directed=directed)
    return LoadedGraph(graph, names)


register(
    Format(
        "adjlist",
        "graph",
        (".adjlist",),
        read_adjacency_list,
        description="adjacency list, 'node neighbour ...' lines",
    )
)
