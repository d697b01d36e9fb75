"""Dropout from 16 random bits per element: the same distribution as ``torch.nn.Dropout``
(to within ``p``'s rounding to a multiple of 1/65536), cheaper than it on recent torch.

``torch.nn.functional.dropout`` draws one Bernoulli variable per element through torch's
generic per-element sampler; on CPU that is the most expensive pass of a GNN layer's
forward. Here one 64-bit random word (``Tensor.random_`` over int64's whole range) gives
four elements 16 uniform bits each, and an element is kept when its 16 bits, read as a
signed integer, are at least a threshold: one cheap comparison instead of a sample.

Measured on CPU (200k x 64 float32, 2 threads, forward only): torch 2.13's
``F.dropout`` 255 ms, this one about 95 ms; but torch 2.2.1's ``F.dropout`` takes 92 ms,
and there the ``torch.where`` of the forward and of the backward pass cost more than
torch's whole mask. So the GNN models keep ``torch.nn.Dropout``; use this module where the
torch at hand is the slow one.

Example
-------
>>> import torch
>>> from graphemb.nn.dropout import Dropout
>>> _ = torch.manual_seed(0)
>>> layer = Dropout(0.5)
>>> out = layer(torch.ones(2, 4))
>>> sorted(set(out.flatten().tolist()))              # dropped, or kept and scaled by 1 / 0.5
[0.0, 2.0]
>>> layer.eval()(torch.ones(2, 4)).sum().item()      # identity in eval mode
8.0
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_probability

__all__ = ["Dropout", "dropout", "keep_mask"]

_LEVELS = 1 << 16  # 16 bits per element


def _threshold(p: float) -> tuple[int, float]:
    """The signed 16-bit threshold that drops ``round(p * 65536)`` of 65536 values, and the
    probability of keeping an element that it gives."""
    dropped = min(round(p * _LEVELS), _LEVELS - 1)  # p just below 1 still keeps 1 in 65536
    return dropped - _LEVELS // 2, (_LEVELS - dropped) / _LEVELS


def keep_mask(
    shape: torch.Size | tuple[int, ...],
    p: float,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A boolean mask of ``shape``: each element ``True`` (kept) independently with
    probability ``1 - round(p * 65536) / 65536``.

    Parameters
    ----------
    shape : tuple of int
    p : float
        Probability of dropping an element, in ``[0, 1)``.
    device : torch.device, optional
    generator : torch.Generator, optional
        Source of the random bits (default: torch's generator of ``device``).

    Returns
    -------
    Tensor of bool, of ``shape``.
    """
    count = 1
    for size in shape:
        count *= int(size)
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device=device)
    # the whole int64 range: all 64 bits uniform (random_() alone leaves the sign bit 0)
    words.random_(-(2**63), 2**63 - 1, generator=generator)
    threshold, _ = _threshold(p)
    return (words.view(torch.int16)[:count] >= threshold).view(shape)


class _MaskedScale(torch.autograd.Function):
    """``where(mask, x, 0) * scale``; the gradient is the same map of the output's."""

    @staticmethod
    def forward(ctx, x, mask, scale):  # noqa: D102
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return torch.where(mask, x, 0.0).mul_(scale)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        (mask,) = ctx.saved_tensors
        return torch.where(mask, grad, 0.0).mul_(ctx.scale), None, None


def dropout(
    x: torch.Tensor, p: float, training: bool = True, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Zero each element of ``x`` with probability ``p`` and scale the others by
    ``1 / (1 - p)`` (both with ``p`` rounded to a multiple of 1/65536), as
    ``torch.nn.functional.dropout``; ``x`` itself when not ``training`` or ``p == 0``.

    Parameters
    ----------
    x : Tensor of any shape, floating point
    p : float in [0, 1)
    training : bool
    generator : torch.Generator, optional

    Returns
    -------
    Tensor of ``x``'s shape, dtype and device.
    """
    if not training or p == 0.0:
        return x
    _, keep = _threshold(p)
    mask = keep_mask(x.shape, p, x.device, generator)
    return _MaskedScale.apply(x, mask, 1.0 / keep)


class Dropout(nn.Module):
    """Drop-in for ``torch.nn.Dropout`` whose mask costs one comparison per element.

    Parameters
    ----------
    p : float
        Probability of zeroing an element, in ``[0, 1)`` (rounded to a multiple of 1/65536).
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = check_probability("p", p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` with dropout applied in training mode, unchanged in eval mode."""
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
