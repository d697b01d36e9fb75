"""Graphs from (N, N) adjacency matrices, scipy sparse or dense: the edges of the ``.mat``,
``.npz`` and ``.mtx`` readers, and :func:`graph_from_adjacency` for a matrix in memory."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .edge_rules import apply_edge_rules, counted
from .errors import GraphFileError
from .loaded_graph import LoadedGraph, graph_from_edge_ids, refuse_bad_weights
from .read_options import ReadOptions, takes_read_options

__all__ = ["adjacency_graph", "graph_from_adjacency"]


@takes_read_options()
def graph_from_adjacency(
    matrix: Any,
    *,
    path: str | os.PathLike[str] = "<matrix>",
    index_base: int = 0,
    options: ReadOptions,
) -> LoadedGraph:
    """A graph from an (N, N) adjacency matrix: entry ``(u, v)`` is an edge ``u -> v``.

    Parameters
    ----------
    matrix : scipy sparse matrix or 2-D array
        Stored entries are edges (explicit zeros too, as in DGL); their values are the
        weights.
    path : str or PathLike
        Named in errors.
    index_base : int
        The number of the first row and column in messages (1 for Matrix Market files).
    directed, weighted, merge_duplicates, drop_self_loops, implicit_ids
        See :class:`~graphemb.io.read_options.ReadOptions`: by default the graph is made
        symmetric, the values are weights unless every one is 1, duplicate entries are
        parallel edges and the diagonal is kept; the node names are the row numbers.

    Returns
    -------
    LoadedGraph
        Edge ids in the order of the matrix's COO entries (then the added reverses);
        ``weights`` None when unweighted; ``notes`` on self loops and merged duplicates.

    Raises
    ------
    GraphFileError
        A matrix that is not square; unless ``weighted=False``, a value that is NaN,
        infinite or negative (naming ``path`` and the entry's ``(row, col)``) or values
        that are all 0.

    Examples
    --------
    >>> loaded = graph_from_adjacency(np.array([[0, 2.0], [0, 0]]))  # made symmetric
    >>> loaded.num_edges, loaded.weights.tolist()
    (2, [2.0, 2.0])
    >>> graph_from_adjacency(np.array([[0, 2.0], [0, 0]]), directed=True).num_edges
    1
    """
    return adjacency_graph(matrix, path, options, index_base)


def adjacency_graph(
    matrix: Any, path: str | os.PathLike[str], options: ReadOptions, index_base: int = 0
) -> LoadedGraph:
    """:func:`graph_from_adjacency` with its options resolved (for the readers)."""
    import scipy.sparse

    if not scipy.sparse.issparse(matrix):
        matrix = scipy.sparse.coo_matrix(np.asarray(matrix))
    if len(matrix.shape) != 2 or matrix.shape[0] != matrix.shape[1]:
        raise GraphFileError(path, f"an adjacency matrix must be square, got shape {matrix.shape}")
    count = matrix.shape[0]
    weighted = options.weighted
    src, dst, values, notes = _matrix_edges(matrix, path, options, index_base)
    if not options.directed:
        forward = src * count + dst
        reverse = dst * count + src
        missing = ~np.isin(reverse, forward)
        src, dst = np.concatenate([src, dst[missing]]), np.concatenate([dst, src[missing]])
        values = np.concatenate([values, values[missing]])
    keep = weighted or (weighted is None and not bool((values == 1).all()))
    graph, weight_tensor = graph_from_edge_ids(
        src, dst, count, directed=True, weights=values if keep else None
    )
    return LoadedGraph(graph, np.arange(count, dtype=np.int64), weight_tensor, notes=notes)


def _matrix_edges(
    matrix: Any, path: str | os.PathLike[str], options: ReadOptions, base: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """``(src, dst, values, notes)`` of a square sparse matrix's stored entries, values
    checked as weights (unless ``weighted=False``), duplicates summed and diagonal dropped
    as ``options`` ask."""
    import scipy.sparse

    coo = scipy.sparse.coo_matrix(matrix, copy=True)
    entries = coo.nnz
    if options.merge_duplicates:
        coo.sum_duplicates()
    src = np.asarray(coo.row, dtype=np.int64)
    dst = np.asarray(coo.col, dtype=np.int64)
    values = np.asarray(coo.data, dtype=np.float64)
    if options.weighted is not False:
        refuse_bad_weights(
            path, values, lambda i: (f"entry ({src[i] + base}, {dst[i] + base}): ", None)
        )
    ruled = apply_edge_rules(
        path,
        src,
        dst,
        np.arange(matrix.shape[0], dtype=np.int64),
        values,
        # entries (u, v) and (v, u) are the two directions of an edge; duplicates are summed
        # above, and the names are the row numbers
        options=ReadOptions(directed=True, drop_self_loops=options.drop_self_loops),
        first_bad_id_line=lambda: None,
    )
    notes = ruled.notes
    if entries > coo.nnz:
        summed = counted(entries - coo.nnz, "duplicate entry")
        notes += (f"{os.fspath(path)}: {summed.replace('entrys', 'entries')} summed",)
    assert ruled.weights is not None
    return ruled.src, ruled.dst, ruled.weights, notes
