"""Matrix Market ``.mtx`` files (SuiteSparse, Network Repository), read by
:func:`scipy.io.mmread`.

A coordinate file lists the entries ``i j [value]`` of an N x N adjacency matrix with
1-based indices after a ``%%MatrixMarket`` banner and a size line; ``symmetric`` files
list one triangle (scipy returns both). The nodes keep the file's numbers ``1 .. N`` as
their names.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from .errors import GraphFileError
from .formats import Format, register
from .loaded_graph import LoadedGraph
from .sparse_matrix import graph_from_adjacency

__all__ = ["read_mtx"]


def read_mtx(
    path: str | os.PathLike[str],
    *,
    directed: bool = False,
    weighted: bool | None = None,
    merge_duplicates: bool = False,
    drop_self_loops: bool = False,
    implicit_ids: bool = False,
) -> LoadedGraph:
    """A graph from a Matrix Market file: entry ``(i, j)`` is an edge ``i -> j``.

    Parameters
    ----------
    path : str or PathLike
    directed : bool
        False: an entry ``(i, j)`` without its ``(j, i)`` also gets it (see
        :func:`~graphemb.io.graph_from_adjacency`); a ``symmetric`` file has both.
    weighted : bool, optional
        True: the values are the weights; False: ignored. Default: weights unless every
        value is 1 (a ``pattern`` file has none).
    merge_duplicates, drop_self_loops : bool
        See :func:`~graphemb.io.graph_from_adjacency`.
    implicit_ids : bool
        False (default): node ``k`` (0-based) is named ``k + 1``, its number in the file;
        True: it is named ``k``.

    Returns
    -------
    LoadedGraph

    Raises
    ------
    GraphFileError
        A file that :func:`scipy.io.mmread` cannot read (scipy's reason attached), complex
        values, a matrix that is not square, or bad weights (naming the entry as the file
        numbers it).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "g.mtx"
    >>> _ = path.write_text(
    ...     "%%MatrixMarket matrix coordinate pattern symmetric\\n% a path\\n3 3 2\\n2 1\\n3 2\\n"
    ... )
    >>> loaded = read_mtx(path)
    >>> loaded.node_names.tolist(), loaded.num_edges, loaded.weights is None
    ([1, 2, 3], 4, True)
    """
    import scipy.io

    try:
        matrix = scipy.io.mmread(os.fspath(path))
    except (ValueError, TypeError, IndexError, OSError, EOFError) as error:
        raise GraphFileError(path, f"not a readable Matrix Market file ({error})") from None
    if np.iscomplexobj(getattr(matrix, "data", matrix)):
        raise GraphFileError(path, "complex values cannot be edge weights")
    loaded = graph_from_adjacency(
        matrix,
        directed=directed,
        path=path,
        weighted=weighted,
        merge_duplicates=merge_duplicates,
        drop_self_loops=drop_self_loops,
        index_base=1,
    )
    if implicit_ids:
        return loaded
    return dataclasses.replace(loaded, node_names=loaded.node_names + 1)


register(
    Format(
        "mtx",
        "graph",
        (".mtx",),
        read_mtx,
        description="Matrix Market adjacency matrix (scipy.io.mmread), nodes named 1..N",
    )
)
