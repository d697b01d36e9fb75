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

from .adjacency_matrix import adjacency_graph
from .errors import GraphFileError
from .formats import Format, register
from .labels import NodeLabels, single_labels
from .loaded_graph import LoadedGraph
from .read_options import ReadOptions, takes_read_options

__all__ = ["read_mat", "read_mat_labels", "read_npz"]


@takes_read_options()
def read_mat(
    path: str | os.PathLike[str],
    *,
    network: str = "network",
    group: str | None = "group",
    options: ReadOptions,
) -> LoadedGraph:
    """A graph (and its labels) from a MATLAB ``.mat`` file.

    Parameters
    ----------
    path : str or PathLike
    network : str
        Name of the (N, N) adjacency matrix variable, sparse or dense.
    group : str or None
        Name of the optional (N, C) 0/1 label matrix; absent or None: no labels.
    directed, weighted, merge_duplicates, drop_self_loops, implicit_ids
        See :func:`~graphemb.io.graph_from_adjacency`.

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
    loaded = adjacency_graph(variables[network], path, options)
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


@takes_read_options()
def read_npz(path: str | os.PathLike[str], *, options: ReadOptions) -> LoadedGraph:
    """A graph from a scipy sparse matrix saved with ``scipy.sparse.save_npz``.

    See :func:`~graphemb.io.graph_from_adjacency` for the arguments and the weights
    (refused as in :func:`read_mat`); node names are ``0 .. N-1``.
    """
    import scipy.sparse

    path = os.fspath(path)
    try:
        matrix = scipy.sparse.load_npz(path)
    except (ValueError, OSError, KeyError) as error:
        raise GraphFileError(path, f"not a scipy sparse .npz file ({error})") from None
    return adjacency_graph(matrix, path, options)


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
