"""``F.linear`` whose output and input gradient are written into recycled CPU memory.

A GraphSAGE layer's product has as many rows as the layer has destination nodes: tens of
MB at the first layer of a 1M-node batch, and again for the gradient of its input, every
batch. A fresh tensor of that size is fresh memory from the kernel, faulted in page by page
(:mod:`graphemb.distributed.recycling`); the products themselves are the same
``torch.addmm`` and ``torch.mm`` that autograd runs for ``F.linear``, with ``out=``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ..distributed.recycling import RecycledBlocks

__all__ = ["linear"]

# A model's layers each hold their output until the backward has passed them, and their
# input gradients until the layer below has used them.
_OUTPUTS = RecycledBlocks(blocks=4)
_INPUT_GRADIENTS = RecycledBlocks(blocks=4)


class _RecycledLinear(torch.autograd.Function):
    """``x @ weight.T + bias`` forward, with the backward autograd gives ``F.linear``
    (``AddmmBackward0``: the same products in the same layouts), outputs in recycled
    memory. Differentiable once: a second derivative raises."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        out = _OUTPUTS.empty((x.shape[0], weight.shape[0]), x.dtype, x.device)
        if bias is None:
            return torch.mm(x, weight.t(), out=out)
        return torch.addmm(bias, x, weight.t(), out=out)

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx: Any, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        x, weight = ctx.saved_tensors
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.mm(grad, weight, out=_INPUT_GRADIENTS.empty(x.shape, x.dtype, x.device))
        if ctx.needs_input_grad[1]:
            grad_weight = torch.mm(x.t(), grad).t()
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad.sum(0)
        return grad_x, grad_weight, grad_bias


def _cpu_autocast() -> bool:
    """Whether autocast is on for CPU (it casts ``F.linear``'s inputs; this path would not)."""
    try:
        return bool(torch.is_autocast_enabled("cpu"))
    except TypeError:  # torch < 2.4 takes no device here
        return bool(torch.is_autocast_cpu_enabled())


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for a 2-D CPU ``x``, its output and its input's gradient
    in recycled memory (large ones only: :class:`~graphemb.distributed.recycling.RecycledBlocks`);
    elsewhere ``F.linear`` itself.

    Parameters
    ----------
    x : Tensor of shape (N, K)
    weight : Tensor of shape (M, K)
    bias : Tensor of shape (M,), optional

    Returns
    -------
    Tensor of shape (N, M)
        The same floats as ``F.linear``, forward and backward. Differentiable once: for a
        second derivative (``create_graph=True``) use ``F.linear``.
    """
    same_dtypes = weight.dtype == x.dtype and (bias is None or bias.dtype == x.dtype)
    two_d = x.dim() == 2 and weight.dim() == 2
    if x.device.type != "cpu" or _cpu_autocast() or not two_d or not same_dtypes:
        return F.linear(x, weight, bias)
    return _RecycledLinear.apply(x, weight, bias)
