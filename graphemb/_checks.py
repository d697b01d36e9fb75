"""Argument checks shared by the public API: one place for what counts as a size, a node
id, a valid lookup."""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = [
    "LookupIds",
    "as_size",
    "check_edge_weight",
    "check_node_id_vector",
    "check_node_ids",
    "check_positive_int",
    "check_probability",
    "check_walks",
    "edge_weight_problem",
    "is_integer_like",
    "node_id_message",
]


def is_integer_like(value: object) -> bool:
    """Whether ``value`` is an integer the way ``range()`` sees one, booleans excluded.

    Python and numpy integers, 0-d integer tensors and anything else with ``__index__``
    are; ``True``, ``np.bool_``, floats (even ``2.0``), strings and tensors with more
    than one element or a floating/boolean dtype are not.

    Examples
    --------
    >>> import numpy as np, torch
    >>> [is_integer_like(v) for v in (3, np.int32(3), torch.tensor(3), 3.0, True)]
    [True, True, True, False, False]
    """
    if isinstance(value, torch.Tensor):
        return value.dim() == 0 and not (
            value.is_floating_point() or value.is_complex() or value.dtype == torch.bool
        )
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # numpy's bool too
        return False
    if isinstance(value, numbers.Number) and not isinstance(value, numbers.Integral):
        return False  # floats, complex, Decimal, Fraction: never silently truncated
    try:
        operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def as_size(name: str, value: object, minimum: int = 0) -> int:
    """``value`` as a Python int ``>= minimum``, or a ``ValueError`` naming ``name``.

    Integer-like values are accepted the way ``range()`` accepts them: Python and numpy
    integers, 0-d integer tensors (on any device), anything with ``__index__``. Booleans,
    floats (even ``2.0``), strings and multi-element tensors are refused.

    Parameters
    ----------
    name : str
        Name of the argument, quoted in the error message.
    value : object
        The size to check.
    minimum : int
        Smallest accepted value.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``value`` is not integer-like, or is below ``minimum``; the message names ``name``
        and the value.

    Examples
    --------
    >>> import numpy as np, torch
    >>> as_size("num_nodes", np.int64(2708)), as_size("num_nodes", torch.tensor(5))
    (2708, 5)
    >>> as_size("num_parts", 0, minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: num_parts must be an integer >= 1, got 0
    """
    if not is_integer_like(value):
        if isinstance(value, torch.Tensor):
            shown = f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
        else:
            shown = repr(value)
        raise ValueError(f"{name} must be an integer >= {minimum}, got {shown}")
    if isinstance(value, torch.Tensor):
        number = int(value.item())
    else:
        number = operator.index(value)  # type: ignore[arg-type]
    if number < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {number}")
    return number


def check_node_id_vector(name: str, ids: object) -> torch.Tensor:
    """``ids`` if it is a 1-D tensor of integers, else the error naming ``name``.

    Raises
    ------
    TypeError
        ``ids`` is not a tensor, or holds booleans, floats or complex numbers.
    ValueError
        ``ids`` is not 1-dimensional.

    Examples
    --------
    >>> import torch
    >>> check_node_id_vector("seeds", torch.tensor([[1, 2]]))
    Traceback (most recent call last):
    ...
    ValueError: seeds must be 1-dimensional, got shape (1, 2)
    """
    ids = _integer_id_tensor(name, ids)
    if ids.dim() != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {tuple(ids.shape)}")
    return ids


def check_walks(walks: object) -> torch.Tensor:
    """``walks`` itself when it is a 2-dimensional integer tensor of node ids ``(W, T)``, one
    walk a row; else raises TypeError (not an integer tensor) or ValueError (another shape)
    naming what it got."""
    walks = _integer_id_tensor("walks", walks)
    if walks.dim() != 2:
        raise ValueError(f"walks must have shape (W, T), got {tuple(walks.shape)}")
    return walks


def _integer_id_tensor(name: str, ids: object) -> torch.Tensor:
    """``ids`` itself when it is a tensor of integers (of any shape); else a TypeError
    naming what ``name`` got."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a tensor of node ids, got {type(ids).__name__}")
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{name} must hold integer node ids, got dtype {ids.dtype}")
    return ids


def check_node_ids(
    ids: torch.Tensor,
    num_nodes: int,
    name: str,
    *,
    error: type[Exception] = ValueError,
    context: str = "",
) -> None:
    """Raise ``error`` unless every id of ``ids`` (any shape) lies in ``[0, num_nodes)``.

    The message names the first bad id in storage order, its position and the valid range.
    A valid tensor costs one reduction and one read of its result (for CUDA ids a wait for
    the device: callers that must not wait check on the device and report through
    :func:`node_id_message` later, as ``NodeEmbedding`` does); the position is searched
    only when an id is bad.

    Parameters
    ----------
    ids : Tensor of integers, any shape
    num_nodes : int
        Ids must lie in ``[0, num_nodes)``.
    name : str
        The argument's name, quoted with the bad position (``seeds[3]``).
    error : exception class
        Raised on a bad id (``IndexError`` for lookups, ``ValueError`` elsewhere).
    context : str
        Prefix of the message (e.g. the table's name).

    Examples
    --------
    >>> import torch
    >>> check_node_ids(torch.tensor([3, 7, -1]), 5, "seeds")
    Traceback (most recent call last):
    ...
    ValueError: node id 7 out of range [0, 5) at seeds[1]
    """
    if ids.numel() == 0:
        return
    # along the one dimension of a vector: the whole-tensor reduction copies a strided
    # vector (a column of a matrix) into a contiguous temporary first
    low, high = (
        int(v) for v in (torch.aminmax(ids, dim=0) if ids.dim() == 1 else torch.aminmax(ids))
    )
    if low >= 0 and high < num_nodes:
        return
    flat = ids.reshape(-1)
    outside = (flat < 0) | (flat >= num_nodes)
    first = int(torch.argmax(outside.to(torch.uint8)))  # the first True
    position = ", ".join(str(int(i)) for i in np.unravel_index(first, tuple(ids.shape)))
    raise error(node_id_message(int(flat[first]), num_nodes, context, f" at {name}[{position}]"))


def node_id_message(bad: int, num_nodes: int, context: str = "", where: str = "") -> str:
    """The one wording of a node id out of range (see :func:`check_node_ids`)."""
    return f"{context}node id {bad} out of range [0, {num_nodes}){where}"


def check_positive_int(name: str, value: object) -> int:
    """``value`` if it is a Python int ``>= 1`` (not a bool), else a ``ValueError`` naming
    ``name``: the layer sizes of :mod:`graphemb.nn` and :mod:`graphemb.dgl` models.

    Examples
    --------
    >>> check_positive_int("num_layers", 2)
    2
    >>> check_positive_int("num_layers", 0)
    Traceback (most recent call last):
    ...
    ValueError: num_layers must be a positive int, got 0
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_probability(name: str, value: object) -> float:
    """``value`` as a float if it is a number in ``[0, 1)`` (not a bool), else a
    ``ValueError`` naming ``name``: dropout rates.

    Examples
    --------
    >>> check_probability("dropout", 0.5)
    0.5
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


class LookupIds:
    """Validation of the ids of one table's lookups: type, then range.

    The range is checked at once where the lookup waits for the device anyway (CPU ids, a
    copy to the CPU, the pull of distributed storage). CUDA ids into a single-process CUDA
    table are checked on the device instead, without waiting for it: the result stays
    pending until :meth:`raise_pending`, and meanwhile a bad id reads a clamped (valid) row.

    Parameters
    ----------
    owner : str
        How errors name the table (``"NodeEmbedding 'emb'"``).
    num_rows : int
        Valid ids are ``[0, num_rows)``.
    storage : object
        Where the rows live: its ``device`` and whether it is ``distributed``.
    """

    def __init__(self, owner: str, num_rows: int, storage: Any) -> None:
        self._owner = owner
        self._num_rows = num_rows
        self._storage = storage
        # (any bad, first bad id), still on the device; read by raise_pending()
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None

    def checked_type(self, node_ids: object) -> torch.Tensor:
        """``node_ids`` if it is an integer tensor, else ``TypeError``."""
        if not isinstance(node_ids, torch.Tensor):
            raise TypeError(
                f"{self._owner}: node ids must be a torch.Tensor of integers, "
                f"got {type(node_ids).__name__}"
            )
        if node_ids.dtype == torch.bool or node_ids.is_floating_point() or node_ids.is_complex():
            raise TypeError(f"{self._owner}: node ids must be integers, got {node_ids.dtype}")
        return node_ids

    def flat(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids`` as int64 (M,) on the storage device, every id in range (or pending)."""
        flat = ids.reshape(-1)
        storage = self._storage
        if not self._deferred(flat):
            if storage.device.type == "cpu":
                flat = flat.to(storage.device)  # check on the CPU, after the copy
            check_node_ids(
                flat.view(ids.shape),  # positions in the caller's shape
                self._num_rows,
                "node_ids",
                error=IndexError,
                context=f"{self._owner}: ",
            )
            return flat.to(device=storage.device, dtype=torch.int64)
        flat = flat.to(torch.int64)
        if flat.numel():
            lowest, highest = torch.aminmax(flat)
            bad = (lowest < 0) | (highest >= self._num_rows)
            first = torch.where(lowest < 0, lowest, highest)
            if self._pending is not None:  # keep the earliest bad id
                seen, seen_id = self._pending
                first = torch.where(seen, seen_id, first)
                bad = bad | seen
            self._pending = (bad, first)
            # Never read out of bounds: a bad id reads a valid row until raise_pending().
            flat = flat.clamp(0, self._num_rows - 1)
        return flat

    def _deferred(self, flat_ids: torch.Tensor) -> bool:
        """Whether checking the range now would make the lookup wait for a GPU that it
        otherwise never waits for: CUDA ids into a single-process table on their device."""
        storage = self._storage
        return (
            flat_ids.device.type == "cuda"
            and flat_ids.device == storage.device
            and not storage.distributed
        )

    def raise_pending(self, before: Callable[[], None]) -> None:
        """Read the pending device check (a synchronisation); if an id was out of range,
        call ``before()`` and raise the ``IndexError`` naming the first one."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        bad, first = pending
        if bool(bad):
            before()
            raise IndexError(
                node_id_message(
                    int(first),
                    self._num_rows,
                    f"{self._owner}: ",
                    " (in a CUDA lookup since the last check)",
                )
            )


def edge_weight_problem(weights: torch.Tensor) -> tuple[int, str] | None:
    """The first bad edge weight as ``(position, what is wrong)``, or None when every
    weight is a finite number ``>= 0``.

    Costs one reduction for good weights; the position is searched only when one is bad.

    Examples
    --------
    >>> import torch
    >>> edge_weight_problem(torch.tensor([1.0, 0.0, float("nan")]))
    (2, 'weight nan is not a finite number')
    >>> edge_weight_problem(torch.tensor([1.0, 2.5])) is None
    True
    """
    bad = ~torch.isfinite(weights) | (weights < 0)
    if not bool(bad.any()):
        return None
    first = int(torch.argmax(bad.reshape(-1).to(torch.uint8)))
    value = float(weights.reshape(-1)[first])
    if not math.isfinite(value):
        return first, f"weight {value} is not a finite number"
    return first, f"weight {value} is negative"


def check_edge_weight(weights: object, num_edges: int) -> torch.Tensor:
    """``weights`` as a floating tensor of shape (num_edges,), each finite and ``>= 0``,
    else the error naming the first bad value and its position (``edge_weight[i]``).

    Integer values become float64; floating tensors keep their dtype.

    Raises
    ------
    TypeError
        Not numbers.
    ValueError
        A wrong shape, or a weight that is NaN, infinite or negative.
    """
    if not isinstance(weights, torch.Tensor):
        weights = torch.as_tensor(np.asarray(weights))
    if weights.dtype == torch.bool or weights.is_complex():
        raise TypeError(f"edge_weight must hold real numbers, got dtype {weights.dtype}")
    if not weights.is_floating_point():
        weights = weights.to(torch.float64)
    if weights.shape != (num_edges,):
        raise ValueError(
            f"edge_weight must have one entry per edge, shape ({num_edges},), got "
            f"{tuple(weights.shape)}"
        )
    problem = edge_weight_problem(weights)
    if problem is not None:
        raise ValueError(f"edge_weight[{problem[0]}]: {problem[1]}")
    return weights


def check_fanout(name: str, fanout: object) -> int:
    """``fanout`` as an int: -1 (all neighbours) or >= 0; ``TypeError`` / ``ValueError``
    naming ``name`` and the value otherwise."""
    if isinstance(fanout, bool) or not isinstance(fanout, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer (-1 for all neighbours), got {fanout!r} "
            f"({type(fanout).__name__})"
        )
    value = int(fanout)
    if value < -1:
        raise ValueError(f"{name} = {value}: a fanout is -1 (all neighbours) or >= 0")
    return value


def check_seeds(seeds: object, num_nodes: int, device: torch.device) -> torch.Tensor:
    """``seeds`` as an int64 vector of node ids below ``num_nodes`` on the graph's
    ``device``; an error naming the bad value otherwise."""
    seeds = check_node_id_vector("seeds", seeds)
    if seeds.device != device:
        raise ValueError(
            f"seeds are on {seeds.device} but the graph is on {device}; move them with "
            f"seeds.to({str(device)!r})"
        )
    check_node_ids(seeds, num_nodes, "seeds")
    return seeds.to(torch.int64)


def check_generator(generator: torch.Generator | None, device: torch.device) -> None:
    """Nothing for ``None`` or a generator on the graph's ``device``; ``TypeError`` /
    ``ValueError`` naming both devices otherwise."""
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    where = torch.device(generator.device)
    if where.type != device.type or (
        where.index is not None and device.index is not None and where.index != device.index
    ):
        raise ValueError(
            f"generator is on {generator.device} but the graph is on {device}; "
            f"use torch.Generator(device={str(device)!r})"
        )
