"""Argument checks shared by the public API: one place for what counts as a size."""

from __future__ import annotations

import numbers
import operator

import torch

__all__ = ["as_size"]


def as_size(what: str, value: object, minimum: int = 0) -> int:
    """``value`` as a Python int ``>= minimum``, or a ``ValueError`` naming ``what``.

    Integer-like values are accepted the way ``range()`` accepts them: Python and numpy
    integers, 0-d integer tensors, anything with ``__index__``. Booleans, floats (even
    ``2.0``) and multi-element tensors are refused.

    Examples
    --------
    >>> import numpy as np, torch
    >>> as_size("num_nodes", np.int64(2708)), as_size("num_nodes", torch.tensor(5))
    (2708, 5)
    """
    if isinstance(value, bool) or isinstance(value, (float, complex, numbers.Real)) and not (
        isinstance(value, numbers.Integral)
    ):
        raise ValueError(f"{what} must be an integer >= {minimum}, got {value!r}")
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.dim() != 0 or value.is_floating_point() or (
            value.dtype == torch.bool
        ):
            raise ValueError(
                f"{what} must be an integer >= {minimum}, got a tensor of shape "
                f"{tuple(value.shape)} and dtype {value.dtype}"
            )
        number = int(value.item())
    else:
        try:
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise ValueError(f"{what} must be an integer >= {minimum}, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {number}")
    return number
