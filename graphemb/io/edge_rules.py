"""What the graph readers do with a file's edges after parsing them: duplicate edges, self
loops and implicit node ids, as :class:`~graphemb.io.read_options.ReadOptions` asks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .errors import GraphFileError
from .fields import numbered_lines, split_fields
from .read_options import ReadOptions

__all__ = [
    "RuledEdges",
    "apply_edge_rules",
    "counted",
    "first_line_with_bad_id",
    "merge_duplicate_edges",
]

#: A name that ``implicit_ids`` takes: a non-negative integer.
_ID = re.compile(r"\+?\d+")
# implicit_ids: at most this many rows per distinct node (plus _ROWS_SLACK), so that one
# large id does not ask for a table of billions of untrained rows.
_ROWS_PER_NODE, _ROWS_SLACK = 10, 1 << 20


class RuledEdges(NamedTuple):
    """The edges after :func:`apply_edge_rules`; ``changed``: whether ``src``/``dst`` are
    other arrays than the ones given (their memory was not reused)."""

    src: np.ndarray
    dst: np.ndarray
    node_names: np.ndarray
    weights: np.ndarray | None
    notes: tuple[str, ...]
    changed: bool


def apply_edge_rules(
    path: str | os.PathLike[str],
    src: np.ndarray,
    dst: np.ndarray,
    node_names: np.ndarray,
    weights: np.ndarray | None,
    *,
    options: ReadOptions,
    first_bad_id_line: Callable[[], int | None],
) -> RuledEdges:
    """Apply ``options``' rules (``merge_duplicates``, ``drop_self_loops``,
    ``implicit_ids``) to parsed edges.

    Parameters
    ----------
    path : str or PathLike
        Named in errors and notes.
    src, dst : int64 arrays, shape (E,)
        Node ids ``0 .. N-1``, edge ``i`` from the ``i``-th edge line.
    node_names : array, shape (N,)
    weights : float64 array, shape (E,), or None
    options : ReadOptions
        Its ``directed``: whether ``a b`` and ``b a`` are different edges (for merging).
    first_bad_id_line : callable
        Returns the line of the first name that is not an integer ``>= 0`` (for the error
        of ``implicit_ids``); called only then.

    Returns
    -------
    RuledEdges
        With the notes for the user: how many self loops were kept or dropped and how
        many duplicates merged.

    Raises
    ------
    GraphFileError
        ``implicit_ids`` with a name that is not an integer ``>= 0`` (naming its line), or
        an id so large that the rows would outnumber the nodes by far.
    """
    path = os.fspath(path)
    notes: list[str] = []
    changed = False
    if options.implicit_ids:
        src, dst, node_names = _implicit_ids(path, src, dst, node_names, first_bad_id_line)
        changed = True
    loops = src == dst
    count = int(np.count_nonzero(loops))
    if count and options.drop_self_loops:
        keep = ~loops
        src, dst = src[keep], dst[keep]
        weights = None if weights is None else weights[keep]
        notes.append(f"{path}: {counted(count, 'self loop')} dropped")
        changed = True
    elif count:
        notes.append(f"{path}: {counted(count, 'self loop')} kept (a walk may stay on a node)")
    if options.merge_duplicates:
        before = len(src)
        src, dst, weights = merge_duplicate_edges(
            src, dst, weights, len(node_names), options.directed
        )
        if len(src) < before:
            summed = " (weights summed)" if weights is not None else ""
            notes.append(f"{path}: {counted(before - len(src), 'duplicate edge')} merged{summed}")
            changed = True
    return RuledEdges(src, dst, node_names, weights, tuple(notes), changed)


def counted(count: int, thing: str) -> str:
    """``"1 self loop"``, ``"2 self loops"``."""
    return f"{count} {thing}{'' if count == 1 else 's'}"


def merge_duplicate_edges(
    src: np.ndarray,
    dst: np.ndarray,
    weights: np.ndarray | None,
    num_nodes: int,
    directed: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One edge per pair of nodes: the first of its duplicates, with their summed weight.

    Examples
    --------
    >>> src, dst = np.array([0, 1, 0, 2]), np.array([1, 0, 1, 2])
    >>> merged = merge_duplicate_edges(src, dst, np.array([1.0, 2.0, 4.0, 8.0]), 3, False)
    >>> [a.tolist() for a in merged]
    [[0, 2], [1, 2], [7.0, 8.0]]
    >>> [a.tolist() for a in merge_duplicate_edges(src, dst, None, 3, True)[:2]]
    [[0, 1, 2], [1, 0, 2]]
    """
    low, high = (src, dst) if directed else (np.minimum(src, dst), np.maximum(src, dst))
    keys = low.astype(np.int64) * max(num_nodes, 1) + high
    _, first, group = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # groups in order of their first edge
    kept = first[order]
    merged = None
    if weights is not None:
        sums = np.bincount(group.reshape(-1), weights=weights, minlength=len(first))
        merged = sums[order]
    return src[kept], dst[kept], merged


def _implicit_ids(
    path: str,
    src: np.ndarray,
    dst: np.ndarray,
    names: np.ndarray,
    first_bad_id_line: Callable[[], int | None],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The names as ids: ``src``/``dst`` renumbered, names ``0 .. max``."""
    bad = None
    if names.dtype.kind not in "iu":
        bad = next((str(n) for n in names.tolist() if not _ID.fullmatch(str(n))), None)
    elif len(names) and int(names.min()) < 0:
        bad = str(int(names.min()))
    if bad is not None:
        raise GraphFileError(
            path,
            f"implicit ids: node name {bad!r} is not an integer >= 0",
            first_bad_id_line(),
        )
    ids = names.astype(np.int64)
    rows = int(ids.max()) + 1 if len(ids) else 0
    if rows > _ROWS_PER_NODE * len(ids) + _ROWS_SLACK:
        raise GraphFileError(
            path,
            f"implicit ids: node id {rows - 1} would make {rows} rows for {len(ids)} nodes; "
            "without implicit ids the names are numbered 0..N-1",
        )
    return ids[src], ids[dst], np.arange(rows, dtype=np.int64)


def first_line_with_bad_id(
    path: str, delimiter: str | None, first_line: int, columns: slice
) -> int | None:
    """The first line from ``first_line`` on whose name fields (``columns`` of its fields)
    hold one that is not an integer ``>= 0`` (for :func:`apply_edge_rules`)."""
    for number, line in numbered_lines(path):
        if number < first_line:
            continue
        if any(not _ID.fullmatch(f) for f in split_fields(line, delimiter)[columns]):
            return number
    return None
