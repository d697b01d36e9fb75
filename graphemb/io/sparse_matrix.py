"""Graphs stored as sparse adjacency matrices: MATLAB ``.mat`` and scipy ``.npz`` files.

The DeepWalk and node2vec benchmark graphs (BlogCatalog, Flickr, YouTube, PPI, ...) ship
as ``.mat`` files with a sparse ``network`` (N x N adjacency) and a sparse ``group``
(N x C label indicator).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from .edge_rules import EdgeRules, apply_edge_rules, counted
from .errors import GraphFileError
from .formats import Format, register
from .labels import NodeLabels, single_labels
from .loaded_graph import LoadedGraph, graph_from_edge_ids, refuse_bad_weights

__all__ = ["graph_from_adjacency", "read_mat", "read_mat_labels", "read_npz"]


def read_mat(
    path: str | os.PathLike[str],
    *,
    directed: bool = False,
    network: str = "network",
    group: str | None = "group",
    weighted: bool | None = None,
    merge_duplicates: bool = False,
    drop_self_loops: bool = False,
    implicit_ids: bool = False,
) -> LoadedGraph:
    """A graph (and its labels) from a MATLAB ``.mat`` file.

    Parameters
    ----------
    path : str or PathLike
    directed : bool
        See :func:`graph_from_adjacency`.
    network : str
        Name of the (N, N) adjacency matrix variable, sparse or dense.
    group : str or None
        Name of the optional (N, C) 0/1 label matrix; absent or None: no labels.
    weighted, merge_duplicates, drop_self_loops, implicit_ids
        See :func:`graph_from_adjacency`.

    Returns
    -------
    LoadedGraph
        Node names ``0 .. N-1``; ``labels`` multi-label from ``group``; ``weights`` when
        some entry of ``network`` is not 1.

    Raises
    ------
    GraphFileError
        No ``network`` variable, a matrix that is not square, a value that is NaN,
        infinite or negative (naming its ``(row, col)``), values all 0, or a ``group``
        whose row count is not N.
    """
    path = os.fspath(path)
    variables = _load_mat(path)
    if network not in variables:
        raise GraphFileError(path, f"no {network!r} variable (found: {_names_in(variables)})")
    loaded = graph_from_adjacency(
        variables[network],
        directed=directed,
        path=path,
        weighted=weighted,
        merge_duplicates=merge_duplicates,
        drop_self_loops=drop_self_loops,
        implicit_ids=implicit_ids,
    )
    if group is None or group not in variables:
        return loaded
    indicator = _dense(variables[group])
    if indicator.ndim != 2 or indicator.shape[0] != loaded.num_nodes:
        raise GraphFileError(
            path,
            f"{group!r} must have shape ({loaded.num_nodes}, C), got {indicator.shape}",
        )
    return dataclasses.replace(loaded, labels=NodeLabels.from_indicator(indicator))


def read_mat_labels(
    path: str | os.PathLike[str], node_names: np.ndarray, *, group: str = "group"
) -> NodeLabels:
    """The multi-label labels of a ``.mat`` file's ``group``, for nodes given by name.

    Parameters
    ----------
    path : str or PathLike
    node_names : numpy array, shape (N,)
        E.g. the names read with embeddings; each must be a row number of ``group``
        (``"0" .. "M-1"``: the node names of :func:`read_mat`).
    group : str
        Name of the (M, C) 0/1 label matrix.

    Returns
    -------
    NodeLabels
        Row ``i`` for ``node_names[i]``.

    Raises
    ------
    GraphFileError
        No ``group`` variable, or a node name that is not a row of it.
    """
    path = os.fspath(path)
    variables = _load_mat(path)
    if group not in variables:
        raise GraphFileError(path, f"no {group!r} variable (found: {_names_in(variables)})")
    indicator = _dense(variables[group])
    rows = []
    for name in node_names.tolist():
        row = int(name) if str(name).isdigit() else -1
        if not 0 <= row < indicator.shape[0]:
            raise GraphFileError(
                path, f"node {str(name)!r} is not a row of {group!r} (rows 0..{len(indicator) - 1})"
            )
        rows.append(row)
    return NodeLabels.from_indicator(indicator[np.array(rows, dtype=np.int64)])


def _load_mat(path: str) -> dict[str, Any]:
    import scipy.io

    try:
        return scipy.io.loadmat(path)
    except (ValueError, TypeError, OSError, scipy.io.matlab.MatReadError) as error:
        raise GraphFileError(path, f"not a readable .mat file ({error})") from None


def _names_in(variables: dict[str, Any]) -> list[str]:
    return sorted(k for k in variables if not k.startswith("__"))


def _dense(matrix: Any) -> np.ndarray:
    return matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)


def read_npz(
    path: str | os.PathLike[str],
    *,
    directed: bool = False,
    weighted: bool | None = None,
    merge_duplicates: bool = False,
    drop_self_loops: bool = False,
    implicit_ids: bool = False,
) -> LoadedGraph:
    """A graph from a scipy sparse matrix saved with ``scipy.sparse.save_npz``.

    See :func:`graph_from_adjacency` for the arguments and the weights (refused as in
    :func:`read_mat`); node names are ``0 .. N-1``.
    """
    import scipy.sparse

    path = os.fspath(path)
    try:
        matrix = scipy.sparse.load_npz(path)
    except (ValueError, OSError, KeyError) as error:
        raise GraphFileError(path, f"not a scipy sparse .npz file ({error})") from None
    return graph_from_adjacency(
        matrix,
        directed=directed,
        path=path,
        weighted=weighted,
        merge_duplicates=merge_duplicates,
        drop_self_loops=drop_self_loops,
        implicit_ids=implicit_ids,
    )


def graph_from_adjacency(
    matrix: Any,
    *,
    directed: bool = False,
    path: str | os.PathLike[str] = "<matrix>",
    weighted: bool | None = None,
    merge_duplicates: bool = False,
    drop_self_loops: bool = False,
    implicit_ids: bool = False,
    index_base: int = 0,
) -> LoadedGraph:
    """A graph from an (N, N) adjacency matrix: entry ``(u, v)`` is an edge ``u -> v``.

    Parameters
    ----------
    matrix : scipy sparse matrix or 2-D array
        Stored entries are edges (explicit zeros too, as in DGL); their values are the
        weights.
    directed : bool
        False: the graph is made symmetric: an entry ``(u, v)`` whose ``(v, u)`` is not
        stored gets it, with the same weight. A symmetric matrix (both directions stored,
        as in the benchmark ``.mat`` files) is used as it is.
    path : str or PathLike
        Named in errors.
    weighted : bool, optional
        True: the values are the weights; False: they are ignored (not checked), every
        stored entry an edge of weight 1. Default: weights unless every value is 1.
    merge_duplicates : bool
        Sum the entries stored more than once at the same ``(u, v)`` into one edge (edge
        ids then in row-major order). Default: each a parallel edge.
    drop_self_loops : bool
        Drop the diagonal entries. Default: kept (a walk may stay on a node).
    implicit_ids : bool
        Accepted for every graph reader's sake: a matrix's node names are its row numbers.
    index_base : int
        The number of the first row and column in messages (1 for Matrix Market files).

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
    """
    import scipy.sparse

    del implicit_ids  # always so
    if not scipy.sparse.issparse(matrix):
        matrix = scipy.sparse.coo_matrix(np.asarray(matrix))
    if len(matrix.shape) != 2 or matrix.shape[0] != matrix.shape[1]:
        raise GraphFileError(path, f"an adjacency matrix must be square, got shape {matrix.shape}")
    count = matrix.shape[0]
    src, dst, values, notes = _matrix_edges(
        matrix, path, weighted is not False, merge_duplicates, drop_self_loops, index_base
    )
    if not directed:
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
    matrix: Any,
    path: str | os.PathLike[str],
    check_values: bool,
    merge_duplicates: bool,
    drop_self_loops: bool,
    base: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """``(src, dst, values, notes)`` of a square sparse matrix's stored entries, values
    checked as weights (if ``check_values``), duplicates summed and diagonal dropped as
    asked."""
    import scipy.sparse

    coo = scipy.sparse.coo_matrix(matrix, copy=True)
    entries = coo.nnz
    if merge_duplicates:
        coo.sum_duplicates()
    src = np.asarray(coo.row, dtype=np.int64)
    dst = np.asarray(coo.col, dtype=np.int64)
    values = np.asarray(coo.data, dtype=np.float64)
    if check_values:
        refuse_bad_weights(
            path, values, lambda i: (f"entry ({src[i] + base}, {dst[i] + base}): ", None)
        )
    ruled = apply_edge_rules(
        path,
        src,
        dst,
        np.arange(matrix.shape[0], dtype=np.int64),
        values,
        directed=True,  # entries (u, v) and (v, u) are the two directions of an edge
        rules=EdgeRules(drop_self_loops=drop_self_loops),
        first_bad_id_line=lambda: None,
    )
    notes = ruled.notes
    if entries > coo.nnz:
        summed = counted(entries - coo.nnz, "duplicate entry")
        notes += (f"{os.fspath(path)}: {summed.replace('entrys', 'entries')} summed",)
    assert ruled.weights is not None
    return ruled.src, ruled.dst, ruled.weights, notes


def _read_group_labels(
    path: str | os.PathLike[str],
    node_names: np.ndarray,
    *,
    multi_label: bool | None = None,
    group: str = "group",
) -> NodeLabels:
    """:func:`read_mat_labels` as a label format: ``multi_label=False`` asks for one label
    per node (class ids), refusing a node with several."""
    labels = read_mat_labels(path, node_names, group=group)
    return single_labels(labels, node_names, path) if multi_label is False else labels


register(
    Format(
        "mat",
        "graph",
        (".mat",),
        read_mat,
        description="MATLAB file, adjacency matrix 'network', labels 'group'",
    )
)
register(Format("npz", "graph", (".npz",), read_npz, description="scipy sparse adjacency matrix"))
register(
    Format(
        "mat",
        "label",
        (".mat",),
        _read_group_labels,
        description="a .mat file's 0/1 matrix 'group', row i for the node named i",
    )
)
