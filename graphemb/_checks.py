"""Argument checks shared by the public API: one place for what counts as a size."""

from __future__ import annotations

import numbers
import operator

import torch

__all__ = ["as_size", "check_positive_int", "check_probability", "is_integer_like"]


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


def as_size(what: str, value: object, minimum: int = 0) -> int:
    """``value`` as a Python int ``>= minimum``, or a ``ValueError`` naming ``what``.

    Integer-like values are accepted the way ``range()`` accepts them: Python and numpy
    integers, 0-d integer tensors (on any device), anything with ``__index__``. Booleans,
    floats (even ``2.0``), strings and multi-element tensors are refused.

    Parameters
    ----------
    what : str
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
        ``value`` is not integer-like, or is below ``minimum``; the message names ``what``
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
        raise ValueError(f"{what} must be an integer >= {minimum}, got {shown}")
    if isinstance(value, torch.Tensor):
        number = int(value.item())
    else:
        number = operator.index(value)  # type: ignore[arg-type]
    if number < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {number}")
    return number


def check_positive_int(what: str, value: object) -> int:
    """``value`` if it is a Python int ``>= 1`` (not a bool), else a ``ValueError`` naming
    ``what``: the layer sizes of :mod:`graphemb.nn` and :mod:`graphemb.dgl` models.

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
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return value


def check_probability(what: str, value: object) -> float:
    """``value`` as a float if it is a number in ``[0, 1)`` (not a bool), else a
    ``ValueError`` naming ``what``: dropout rates.

    Examples
    --------
    >>> check_probability("dropout", 0.5)
    0.5
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{what} must be a number in [0, 1), got {value!r}")
    return float(value)
