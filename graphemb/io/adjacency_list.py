"""Adjacency lists: one node a line, followed by its neighbours (``node nbr nbr ...``)."""

from __future__ import annotations

import os
from array import array

import numpy as np

from .edge_rules import apply_edge_rules, first_line_with_bad_id
from .errors import GraphFileError
from .fields import numbered_lines, split_fields
from .formats import Format, register
from .loaded_graph import LoadedGraph, graph_from_edge_ids
from .node_names import NameIndex
from .read_options import ReadOptions, takes_read_options

__all__ = ["read_adjacency_list"]


@takes_read_options(omit=("weighted",))
def read_adjacency_list(
    path: str | os.PathLike[str], *, delimiter: str | None = None, options: ReadOptions
) -> LoadedGraph:
    """A graph from an adjacency-list file (the DeepWalk reference tool's ``adjlist``).

    Parameters
    ----------
    path : str or PathLike
        Lines ``node [neighbour ...]``: an edge ``node -> neighbour`` per neighbour; a node
        alone on its line is a node without out-edges. ``#`` starts a comment, and so does
        ``%`` at the start of a line. A node may have several lines.
    delimiter : str, optional
        Default: any run of whitespace.
    directed, merge_duplicates, drop_self_loops, implicit_ids
        See :class:`~graphemb.io.read_options.ReadOptions` (default: every listed edge is
        also stored reversed, a neighbour listed twice is two parallel edges, self loops
        are kept). A file that lists each undirected edge from both of its ends should be
        read with ``directed=True``.

    Returns
    -------
    LoadedGraph
        Names as in :func:`graphemb.io.read_edge_list` (integers in increasing order,
        otherwise strings in order of first appearance); ``notes`` as there.

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
    ruled = apply_edge_rules(
        path,
        src_ids,
        dst_ids,
        names,
        None,
        options=options,
        first_bad_id_line=lambda: first_line_with_bad_id(path, delimiter, 1, slice(None)),
    )
    graph, _ = graph_from_edge_ids(
        ruled.src, ruled.dst, len(ruled.node_names), directed=options.directed
    )
    return LoadedGraph(graph, ruled.node_names, notes=ruled.notes)


register(
    Format(
        "adjlist",
        "graph",
        (".adjlist",),
        read_adjacency_list,
        description="adjacency list, 'node neighbour ...' lines",
    )
)
