"""``read_graph``: any supported graph file, its format guessed from the suffix."""

from __future__ import annotations

import os
from typing import Any

from .formats import file_format
from .loaded_graph import LoadedGraph

__all__ = ["GRAPH_FORMATS", "graph_format", "read_graph"]

#: Graph formats by file suffix (``format=`` takes the values).
GRAPH_FORMATS = {
    ".txt": "edgelist",
    ".edgelist": "edgelist",
    ".edges": "edgelist",
    ".el": "edgelist",
    ".tsv": "edgelist",
    ".csv": "edgelist",
    ".adjlist": "adjlist",
    ".mat": "mat",
    ".npz": "npz",
}


def graph_format(path: str | os.PathLike[str], format: str | None = None) -> str:
    """The format name: ``format`` if given, else the one of the suffix."""
    return file_format(path, format, GRAPH_FORMATS, "graph")


def read_graph(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    directed: bool = False,
    **options: Any,
) -> LoadedGraph:
    """Read a graph file.

    Parameters
    ----------
    path : str or PathLike
    format : {"edgelist", "adjlist", "mat", "npz"}, optional
        Default: from the suffix (:data:`GRAPH_FORMATS`).
    directed : bool
        False (default): edges are undirected and stored in both directions.
    **options
        Passed to the format's reader: ``delimiter``, ``weighted``, ``header`` for edge
        lists (:func:`~graphemb.io.read_edge_list`), ``delimiter`` for adjacency lists
        (:func:`~graphemb.io.read_adjacency_list`), ``network`` and ``group`` for ``.mat``
        (:func:`~graphemb.io.read_mat`).

    Returns
    -------
    LoadedGraph
        The graph, the original node names, and weights / labels where the format has
        them.

    Raises
    ------
    FileNotFoundError
    GraphFileError
        Malformed content, naming the file (and line for text formats).
    ValueError
        An unknown format.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "friends.txt"
    >>> _ = path.write_text("# who knows whom\\nalice bob\\nbob carol\\n")
    >>> loaded = read_graph(path)
    >>> loaded
    LoadedGraph(num_nodes=3, num_edges=4)
    >>> loaded.node_names.tolist()
    ['alice', 'bob', 'carol']
    """
    kind = graph_format(path, format)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such graph file: {os.fspath(path)!r}")
    if kind == "edgelist":
        from .edge_list import read_edge_list

        return read_edge_list(path, directed=directed, **options)
    if kind == "adjlist":
        from .adjacency_list import read_adjacency_list

        return read_adjacency_list(path, directed=directed, **options)
    if kind == "mat":
        from .sparse_matrix import read_mat

        return read_mat(path, directed=directed, **options)
    if kind == "npz":
        from .sparse_matrix import read_npz

        return read_npz(path, directed=directed, **options)
    raise AssertionError(kind)  # every format is handled above
