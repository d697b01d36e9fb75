"""``read_graph``: any supported graph file, its format guessed from the suffix."""

from __future__ import annotations

import inspect
import os
from typing import Any

from .formats import SuffixFormats, file_format, find_format
from .loaded_graph import LoadedGraph

__all__ = ["GRAPH_FORMATS", "graph_format", "read_graph", "reader_options"]

#: Graph formats by file suffix (``format=`` takes the values): a live view of
#: :mod:`graphemb.io.formats`.
GRAPH_FORMATS = SuffixFormats("graph")


def graph_format(path: str | os.PathLike[str], format: str | None = None) -> str:
    """The format name: ``format`` if given (checked), else the one of the suffix."""
    return file_format(path, format, "graph")


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
    format : str, optional
        A registered graph format (``"edgelist"``, ``"adjlist"``, ``"mat"``, ``"npz"``,
        ``"mtx"``; :func:`graphemb.io.formats.formats` ``("graph")``). Default: from the
        suffix (:data:`GRAPH_FORMATS`).
    directed : bool
        False (default): edges are undirected and stored in both directions.
    **options
        Passed to the format's reader: ``delimiter`` and ``header`` for edge lists
        (:func:`~graphemb.io.read_edge_list`), ``delimiter`` for adjacency lists
        (:func:`~graphemb.io.read_adjacency_list`), ``network`` and ``group`` for ``.mat``
        (:func:`~graphemb.io.read_mat`); the fields of
        :class:`~graphemb.io.read_options.ReadOptions` for all of these (``weighted`` for
        all but adjacency lists). :func:`reader_options` lists a format's.

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
    reader = find_format("graph", path, format).reader
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such graph file: {os.fspath(path)!r}")
    loaded: LoadedGraph = reader(path, directed=directed, **options)
    return loaded


def reader_options(format: str) -> frozenset[str] | None:
    """The options (keyword arguments besides ``directed``) that the reader of the graph
    format ``format`` takes; None where it takes any (``**options``).

    Examples
    --------
    >>> sorted(reader_options("adjlist"))
    ['delimiter', 'drop_self_loops', 'implicit_ids', 'merge_duplicates']
    """
    reader = find_format("graph", "", format).reader
    parameters = inspect.signature(reader).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(
        p.name
        for p in parameters
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "directed"
    )
