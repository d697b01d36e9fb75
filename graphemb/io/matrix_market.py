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

from .adjacency_matrix import adjacency_graph
from .errors import GraphFileError
from .formats import Format, register
from .loaded_graph import LoadedGraph
from .read_options import ReadOptions, takes_read_options

__all__ = ["read_mtx"]


@takes_read_options()
def read_mtx(path: str | os.PathLike[str], *, options: ReadOptions) -> LoadedGraph:
    """A graph from a Matrix Market file: entry ``(i, j)`` is an edge ``i -> j``.

    Parameters
    ----------
    path : str or PathLike
    directed, weighted, merge_duplicates, drop_self_loops, implicit_ids
        See :func:`~graphemb.io.graph_from_adjacency` (a ``symmetric`` file has both
        directions of each entry; a ``pattern`` file's values are all 1, so it reads as
        unweighted). Node ``k`` (0-based) is named ``k + 1``, its number in the file,
        unless ``implicit_ids``: then ``k``.

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
    loaded = adjacency_graph(matrix, path, options, index_base=1)
    if options.implicit_ids:
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
