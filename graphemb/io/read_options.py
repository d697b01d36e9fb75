"""The options every graph reader shares, defined and documented once: whether the edges
are directed, whether the file's values are edge weights, and what is done with duplicate
edges, self loops and integer node names.

A reader declares them with :func:`takes_read_options`: its callers pass them as keyword
arguments (``read_edge_list(path, directed=True)``, as ``read_graph``'s ``**options`` and
the command line do), and the reader receives them resolved into one :class:`ReadOptions`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from .loaded_graph import LoadedGraph

__all__ = ["ReadOptions", "takes_read_options"]

Reader = Callable[..., LoadedGraph]


@dataclass(frozen=True)
class ReadOptions:
    """How a graph file's edges become a graph, whatever its format.

    By default every edge the file lists is an edge: a line repeated (or, undirected,
    ``a b`` and ``b a``) gives parallel edges, which walks take that much more often, and a
    self loop ``a a`` is an edge on which a walk stays at ``a``.

    Attributes
    ----------
    directed : bool
        False (default): every edge is undirected, stored in both directions (a self loop
        once). A file that already lists both directions of each edge should be read with
        ``directed=True`` (or ``merge_duplicates=True``). An adjacency matrix is made
        symmetric instead: an entry ``(u, v)`` whose ``(v, u)`` is not stored gets it, with
        the same weight; a symmetric matrix is used as it is.
    weighted : bool, optional
        True: the file's values are the edge weights (an edge list's third column, which
        must be there; a matrix's entries). False: they are ignored, not read nor checked;
        every edge weighs 1. None (default): weights where the file has them (an edge list
        whose first edge line has three columns; a matrix with an entry other than 1).
        Weights that are NaN, infinite or negative, or all 0, are refused, naming the line
        or entry. Adjacency lists carry no weights.
    merge_duplicates : bool
        Merge the edges between the same two nodes (the same direction if directed, either
        if undirected; a matrix's entries stored twice at the same ``(u, v)``) into one,
        whose weight is the sum of theirs; the first one's line stays its edge id. Default
        False: parallel edges.
    drop_self_loops : bool
        Drop the edges from a node to itself (the node stays). Default False: kept.
    implicit_ids : bool
        The node names are the ids (PecanPy's ``--implicit_ids``): every name must be an
        integer ``>= 0``, and node ``k`` is row ``k``; ids absent from the file are nodes
        without edges. Default False: the names are mapped to ``0 .. N-1`` in order. A
        matrix's nodes are its row numbers either way (a Matrix Market file's are named
        ``1 .. N`` unless ``implicit_ids``).
    """

    directed: bool = False
    weighted: bool | None = None
    merge_duplicates: bool = False
    drop_self_loops: bool = False
    implicit_ids: bool = False


def takes_read_options(*, omit: Collection[str] = ()) -> Callable[[Reader], Reader]:
    """A decorator: the reader takes the fields of :class:`ReadOptions` (less ``omit``) as
    keyword arguments, with the dataclass's defaults.

    The decorated function has a keyword-only parameter ``options``; the function returned
    takes the same arguments with ``options`` replaced by one keyword-only parameter per
    field (what :func:`inspect.signature` shows, and the command line reads its defaults
    from), and calls it with ``options=ReadOptions(...)`` of them. ``omit``: fields the
    format has nothing to do with (given, they are refused as unknown arguments).

    Examples
    --------
    >>> @takes_read_options(omit=("weighted",))
    ... def read_nothing(path, *, options):
    ...     return options
    >>> read_nothing("x", directed=True).directed
    True
    >>> inspect.signature(read_nothing)  # doctest: +ELLIPSIS
    <Signature (path, *, directed: 'bool' = False, merge_duplicates: 'bool' = False, ...)>
    """
    unknown = set(omit) - {field.name for field in dataclasses.fields(ReadOptions)}
    if unknown:
        raise ValueError(f"ReadOptions has no fields {sorted(unknown)}")
    shared = [
        inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=field.default,
            annotation=field.type,
        )
        for field in dataclasses.fields(ReadOptions)
        if field.name not in omit
    ]

    def decorate(reader: Reader) -> Reader:
        signature = inspect.signature(reader)
        parameters = list(signature.parameters.values())
        at = [p.name for p in parameters].index("options")

        @functools.wraps(reader)
        def read(*args: Any, **kwargs: Any) -> LoadedGraph:
            given = {p.name: kwargs.pop(p.name) for p in shared if p.name in kwargs}
            return reader(*args, options=ReadOptions(**given), **kwargs)

        read.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=parameters[:at] + shared + parameters[at + 1 :]
        )
        return read

    return decorate
