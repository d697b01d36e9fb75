"""Update formulas of the sparse optimizers, as functions over gathered rows.

Each function receives the rows of one step that one rank owns -- weights, their summed
gradient and their optimizer state, already gathered into dense ``(U, dim)`` tensors of the
compute dtype -- and updates them in place. The functions know nothing about storage,
deduplication or processes, so every storage (local, shared memory, partitioned, CPU or
CUDA) runs the same math. ``scratch`` arguments are optional preallocated ``(U, dim)``
buffers that avoid a fresh large allocation per step.

Formulas (``g`` = summed gradient of a row, all operations per element unless noted):

* SGD: ``w -= lr * g``
* Adagrad (as :class:`torch.optim.Adagrad`): ``s += g*g``; ``w -= lr * g / (sqrt(s) + eps)``
* row-wise Adagrad (as FBGEMM / PyTorch-BigGraph): one ``s`` per row,
  ``s += mean(g*g over the row)``; ``w -= lr * g / (sqrt(s) + eps)``
* Adam with a step count per row ("lazy" Adam, as :class:`torch.optim.SparseAdam` but with
  per-row bias correction): ``t += 1``; ``m = b1*m + (1-b1)*g``; ``v = b2*v + (1-b2)*g*g``;
  ``w -= lr / (1 - b1**t) * m / (sqrt(v) / sqrt(1 - b2**t) + eps)``
"""

from __future__ import annotations

import torch

__all__ = ["sgd_rows_", "adagrad_rows_", "rowwise_adagrad_rows_", "adam_rows_"]


def sgd_rows_(weight: torch.Tensor, grad: torch.Tensor, *, lr: float) -> None:
    """SGD on rows.

    Parameters
    ----------
    weight : Tensor (U, dim), updated in place
    grad : Tensor (U, dim)
    lr : float
    """
    weight.add_(grad, alpha=-lr)


def adagrad_rows_(
    weight: torch.Tensor,
    grad: torch.Tensor,
    state_sum: torch.Tensor,
    *,
    lr: float,
    eps: float,
    scratch: torch.Tensor | None = None,
) -> None:
    """Adagrad on rows, with :class:`torch.optim.Adagrad`'s formula.

    Parameters
    ----------
    weight : Tensor (U, dim), updated in place
    grad : Tensor (U, dim)
    state_sum : Tensor (U, dim), updated in place
        Running sum of squared gradients.
    lr, eps : float
    scratch : Tensor (U, dim), optional
    """
    state_sum.addcmul_(grad, grad, value=1.0)
    std = torch.sqrt(state_sum, out=scratch) if scratch is not None else state_sum.sqrt()
    weight.addcdiv_(grad, std.add_(eps), value=-lr)


def rowwise_adagrad_rows_(
    weight: torch.Tensor,
    grad: torch.Tensor,
    state_sum: torch.Tensor,
    *,
    lr: float,
    eps: float,
) -> None:
    """Row-wise Adagrad: one accumulator per row, the mean of ``g*g`` over the row.

    Parameters
    ----------
    weight : Tensor (U, dim), updated in place
    grad : Tensor (U, dim)
    state_sum : Tensor (U,), updated in place
    lr, eps : float
    """
    # squared norm / dim == mean of squares, without a (U, dim) temporary
    state_sum.add_(torch.linalg.vector_norm(grad, dim=1).square_().div_(grad.shape[1]))
    multiplier = state_sum.sqrt().add_(eps).reciprocal_().mul_(lr)
    weight.addcmul_(grad, multiplier.unsqueeze(1), value=-1.0)


def adam_rows_(
    weight: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: torch.Tensor,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    scratch: torch.Tensor | None = None,
) -> None:
    """Adam on rows with a step count per row.

    Rows that are not passed keep their moments and their step: a row seen for the t-th
    time gets the bias correction of step t, whatever the global step.

    Parameters
    ----------
    weight : Tensor (U, dim), updated in place
    grad : Tensor (U, dim)
    exp_avg, exp_avg_sq : Tensor (U, dim), updated in place
        First and second moments.
    step : Tensor of int64 (U,), updated in place
        How many updates each row has had; incremented here.
    lr, beta1, beta2, eps : float
    scratch : Tensor (U, dim), optional
    """
    step.add_(1)
    exp_avg.lerp_(grad, 1.0 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    if lr == 0.0:
        return
    # Per-row bias corrections in float64, folded into one denominator so that the update
    # is a single addcdiv:  w -= m / ((sqrt(v) / sqrt(bc2) + eps) * bc1 / lr)
    t = step.to(torch.float64)
    bias_correction1 = 1.0 - torch.pow(beta1, t)
    bias_correction2_sqrt = (1.0 - torch.pow(beta2, t)).sqrt_()
    scale = (bias_correction1 / (lr * bias_correction2_sqrt)).to(grad.dtype).unsqueeze(1)
    shift = (bias_correction1 * (eps / lr)).to(grad.dtype).unsqueeze(1)
    denom = torch.sqrt(exp_avg_sq, out=scratch) if scratch is not None else exp_avg_sq.sqrt()
    denom.mul_(scale).add_(shift)  # two in-place passes beat one broadcasting addcmul here
    weight.addcdiv_(exp_avg, denom, value=-1.0)
