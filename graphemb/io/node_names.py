"""Node names to contiguous ids ``0 .. N-1``, keeping the names for output.

Integer names keep their order (ids ``0 .. N-1`` that are all present map to themselves;
sparse ones such as ``10, 500, 7_000_000`` are packed); string names are numbered in order
of first appearance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["NameIndex", "pack_integer_names"]

# Integer names are packed through a presence table (one pass, no sort) when the table,
# 9 bytes per possible name 0..max, costs at most about what the id columns cost (8 bytes
# per entry); sparser names go through np.unique (a sort).
_TABLE_SLACK = 1 << 16


def pack_integer_names(
    columns: Sequence[np.ndarray], bounds: tuple[int, int] | None = None
) -> tuple[list[np.ndarray], np.ndarray]:
    """Contiguous ids for integer node names given in one or more columns.

    Parameters
    ----------
    columns : sequence of int64 arrays
        E.g. ``(src_names, dst_names)``, each of shape (E,).
    bounds : (int, int), optional
        The smallest and the largest name, where the caller already knows them (saves a
        pass over the columns); ignored when every column is empty.

    Returns
    -------
    ids : list of int64 arrays
        One per column, the same shapes; the input arrays themselves when the names are
        already ``0 .. N-1``.
    names : int64 array, shape (N,)
        ``names[i]`` is the name of id ``i``, in increasing order.

    Examples
    --------
    >>> ids, names = pack_integer_names([np.array([10, 7000]), np.array([500, 10])])
    >>> [i.tolist() for i in ids], names.tolist()
    ([[0, 2], [1, 0]], [10, 500, 7000])
    """
    nonempty = [c for c in columns if c.size]
    if not nonempty:
        return [np.asarray(c, dtype=np.int64) for c in columns], np.zeros(0, dtype=np.int64)
    if bounds is None:
        low = min(int(c.min()) for c in nonempty)
        high = max(int(c.max()) for c in nonempty)
    else:
        low, high = bounds
    if low >= 0 and high < sum(c.size for c in columns) + _TABLE_SLACK:
        present = np.zeros(high + 1, dtype=bool)
        for column in columns:
            present[column] = True
        if present.all():  # already 0 .. N-1
            return list(columns), np.arange(high + 1, dtype=np.int64)
        new_id = np.cumsum(present, dtype=np.int64)
        new_id -= 1
        return [new_id[c] for c in columns], np.flatnonzero(present).astype(np.int64)
    names = np.unique(np.concatenate(columns))
    return [np.searchsorted(names, c) for c in columns], names


class NameIndex:
    """Ids of string names in order of first appearance (a dictionary that grows).

    Examples
    --------
    >>> index = NameIndex()
    >>> [index.id("alice"), index.id("bob"), index.id("alice")], index.names().tolist()
    ([0, 1, 0], ['alice', 'bob'])
    """

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def id(self, name: str) -> int:
        """The id of ``name``, a new one if it was not seen yet."""
        ids = self._ids
        found = ids.get(name)
        if found is None:
            found = ids[name] = len(ids)
        return found

    def __len__(self) -> int:
        return len(self._ids)

    def names(self) -> np.ndarray:
        """All names seen, indexed by id: a numpy string array of shape (N,)."""
        return np.array(list(self._ids), dtype=str) if self._ids else np.zeros(0, dtype=str)

    def pack(self, columns: Sequence[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
        """Final ids and names for id columns built with :meth:`id`.

        If every name is an integer, names are compared as numbers (``"017"`` is ``17``)
        and the nodes renumbered as :func:`pack_integer_names` does, so that a file reads
        the same whichever parser reads it; otherwise the ids stay in order of first
        appearance and the names are strings.
        """
        names = self.names()
        as_integers = _integers(names)
        if as_integers is None:
            return list(columns), names
        return pack_integer_names([as_integers[c] for c in columns])


def _integers(names: np.ndarray) -> np.ndarray | None:
    """``names`` as int64 if each is an integer, else None."""
    try:
        return names.astype(np.int64)
    except (ValueError, OverflowError):
        return None
