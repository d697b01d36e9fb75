"""Node features from a file, matched to a graph's nodes by name."""

from __future__ import annotations

import os

import numpy as np
import torch

from .errors import GraphFileError
from .formats import find_format

__all__ = ["read_node_features"]


def read_node_features(
    path: str | os.PathLike[str], node_names: np.ndarray, format: str | None = None
) -> torch.Tensor:
    """The (N, F) feature rows of a graph's nodes.

    Parameters
    ----------
    path : str or PathLike
        A file in an embedding format (:func:`graphemb.io.read_embeddings`). ``.npy``: an
        (M, F) array whose row ``r`` belongs to the node named ``r`` (integer node
        names), or to the names in ``<path>.names`` when that file exists. Any suffix no
        format claims: the word2vec text format (a first line ``M F``, then
        ``name f1 ... fF``). Rows of nodes not in the graph are ignored.
    node_names : numpy array, shape (N,)
        ``LoadedGraph.node_names``.
    format : str, optional
        A registered embedding format (``"word2vec"``, ``"npy"``); default: from the
        suffix, else ``"word2vec"``.

    Returns
    -------
    Tensor of float32, shape (N, F)
        Row ``i`` for node ``i``.

    Raises
    ------
    GraphFileError
        A node of the graph without a row (naming it).
    """
    path = os.fspath(path)
    rows, names = find_format("embedding", path, format, default="word2vec").reader(path)
    row_of = {name: r for r, name in enumerate(names.tolist())}
    wanted = [str(name) for name in node_names.tolist()]
    missing = [name for name in wanted if name not in row_of]
    if missing:
        raise GraphFileError(
            path,
            f"no features for node {missing[0]!r}"
            + (f" (and {len(missing) - 1} more nodes)" if len(missing) > 1 else ""),
        )
    return rows[torch.tensor([row_of[name] for name in wanted], dtype=torch.int64)]
