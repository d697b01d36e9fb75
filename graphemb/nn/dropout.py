"""Dropout whose mask is never stored: a hash of (call key, element position) decides.

``torch.nn.functional.dropout`` draws one Bernoulli variable per element through torch's
generic sampler, writes a mask of the input's size, multiplies by it, and multiplies the
gradient by it again; on CPU the draw is the most expensive pass of a GNN layer's
forward. With the compiled kernels (``graphemb_kernels``), each call here draws one random
64-bit key from torch's generator, and element ``i`` (in memory order) is kept when a
16-bit hash of ``(key, i)`` is at least ``round(p * 2**16)``: kept with probability
``1 - p`` to within ``2**-17``, independently of the others (one 32-bit hash serves two
elements, a half each: the hash is the costliest part of the layers that apply the mask).
Forward and backward are each one pass (the backward recomputes the mask from the key),
and nothing of the input's size is kept between them.

Without the kernels, on GPUs, and for dtypes other than float32 and float64, it is
``torch.nn.functional.dropout``: the same distribution.

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

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_probability
from .._compiled import float_kernel

__all__ = ["Dropout", "dropout", "hashed_dropout_applies"]

_LEVELS = 1 << 16  # the hash's 16 bits per element

#: A call's hashed mask, ``(threshold, scale, key)``: what :meth:`Dropout.hashed_mask`
#: returns and the kernels that apply a dropout to the rows they read or write take.
Mask = tuple[int, float, int]


def _threshold(p: float) -> tuple[int, float]:
    """The 16-bit threshold that drops ``round(p * 2**16)`` of the ``2**16`` hash values,
    and the probability of keeping an element that it gives."""
    dropped = min(round(p * _LEVELS), _LEVELS - 1)  # p just below 1 still keeps 1 in 2**16
    return dropped, (_LEVELS - dropped) / _LEVELS


def hashed_dropout_applies(x: torch.Tensor) -> bool:
    """Whether :func:`dropout` takes the compiled hashed-mask path for ``x`` (CPU,
    float32 or float64, kernels built and not disabled) rather than torch's dropout."""
    return float_kernel("dropout_masked_scale", x) is not None


class _HashedDropout(torch.autograd.Function):
    """``x * scale`` where ``hash(key, i) >= threshold``, else 0; the gradient is the same
    map of the output's gradient (same key, so the same elements)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, threshold: int, scale: float, key: int) -> torch.Tensor:  # type: ignore[override]
        kernel = float_kernel("dropout_masked_scale", x)
        assert kernel is not None  # dropout() checked
        ctx.kernel, ctx.args = kernel, (threshold, scale, key)  # backward uses the same
        return kernel(x.contiguous(), threshold, scale, key)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:  # type: ignore[override]
        return ctx.kernel(grad.contiguous(), *ctx.args), None, None, None


def dropout(
    x: torch.Tensor, p: float, training: bool = True, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Zero each element of ``x`` with probability ``p`` and scale the others by
    ``1 / (1 - p)``, as ``torch.nn.functional.dropout``; ``x`` itself when not
    ``training`` or ``p == 0``.

    Parameters
    ----------
    x : Tensor of any shape, floating point
    p : float in [0, 1)
    training : bool
    generator : torch.Generator, optional
        Source of the call's key on the hashed path (default: torch's generator).
        torch's dropout, the path elsewhere, always reads torch's default generator.

    Returns
    -------
    Tensor of ``x``'s shape, dtype and device.
    """
    if not training or p == 0.0:
        return x
    if not hashed_dropout_applies(x):
        return F.dropout(x, p, training=True)
    return _HashedDropout.apply(x, *_draw_mask(p, generator))


def _draw_mask(p: float, generator: torch.Generator | None) -> Mask:
    """A call's ``(threshold, scale, key)``, its key drawn from ``generator``."""
    threshold, keep = _threshold(p)
    key = int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64, generator=generator))
    return threshold, 1.0 / keep, key


class Dropout(nn.Module):
    """Drop-in for ``torch.nn.Dropout`` that keeps no mask (see the module's docstring).

    Parameters
    ----------
    p : float
        Probability of zeroing an element, in ``[0, 1)``.
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = check_probability("p", p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` with dropout applied in training mode, unchanged in eval mode."""
        return dropout(x, self.p, self.training)

    def hashed_mask(self, x: torch.Tensor) -> Mask | None:
        """The hashed mask that calling this layer on ``x`` would apply, as ``(threshold,
        scale, key)``, its key drawn now (from torch's generator, as the call would); or
        ``None`` where the call would not take the hashed path (eval mode, ``p == 0``, no
        kernels, another device or dtype). A kernel that applies the mask to the rows it
        reads or writes then gives the floats of the call followed by that kernel."""
        if not self.training or self.p == 0.0 or not hashed_dropout_applies(x):
            return None
        return _draw_mask(self.p, None)

    def extra_repr(self) -> str:
        return f"p={self.p}"
