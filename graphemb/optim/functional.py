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

Each formula is described once by a :class:`Formula` in :data:`FORMULAS`, the registry
that every backend reads (:mod:`graphemb.optim.backends`): its name, its per-row state and
its scalar hyper-parameters. The pure-torch backend calls the function of this module and
runs every formula; the fused backends -- the C++ kernels (:mod:`graphemb.optim.kernels`)
and the Triton kernel (:mod:`graphemb.optim.triton_update`) -- know formulas by name, take
the state tables and the hyper-parameters in the registry's order, and leave a formula they
do not compile to the pure-torch backend. A new optimizer is a function here, an entry of
:data:`FORMULAS` and a :class:`~graphemb.optim.optimizer.SparseOptimizer` subclass naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

__all__ = [
    "sgd_rows_",
    "adagrad_rows_",
    "rowwise_adagrad_rows_",
    "adam_rows_",
    "Formula",
    "FORMULAS",
]


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


# ---------------------------------------------------------------------- formula registry
# Shapes of a per-row state: one value per element of the row, one per row, or a per-row
# update count (int64, whatever the compute dtype).
_STATE_KINDS = ("element", "row", "count")


@dataclass(frozen=True)
class Formula:
    """An update rule: the pure-torch function, its per-row state and its hyper-parameters.

    Parameters
    ----------
    name : str
        The formula's name: the fused kernels know their formulas by it (also the profiler
        span ``graphemb_kernels::<name>_`` of the C++ kernel).
    rows_ : callable
        ``rows_(weight, grad, *state, **hyper[, scratch=])``: the formula over gathered rows,
        in place (the functions of this module).
    state : tuple of (str, str)
        Per-row state tables in kernel argument order: ``(key, kind)`` with kind
        ``"element"`` (shape ``(N, dim)``, compute dtype), ``"row"`` (``(N,)``, compute
        dtype) or ``"count"`` (``(N,)``, int64).
    hyper : tuple of str
        Scalar hyper-parameters in kernel argument order (keyword names of ``rows_``).
    uses_scratch : bool
        Whether ``rows_`` takes an optional ``(U, dim)`` ``scratch`` buffer.

    Examples
    --------
    >>> import torch
    >>> adam = FORMULAS["adam"]
    >>> adam.state_layout(4, torch.float32)["step"]
    ((), torch.int64)
    >>> w, g = torch.zeros(1, 2), torch.ones(1, 2)
    >>> FORMULAS["sgd"].apply_(w, g, {}, {"lr": 0.5})
    >>> w
    tensor([[-0.5000, -0.5000]])
    """

    name: str
    rows_: Callable[..., None]
    state: tuple[tuple[str, str], ...]
    hyper: tuple[str, ...]
    uses_scratch: bool = False

    def __post_init__(self) -> None:
        for key, kind in self.state:
            if kind not in _STATE_KINDS:
                raise ValueError(f"state {key!r} of formula {self.name!r}: unknown kind {kind!r}")

    @property
    def state_keys(self) -> tuple[str, ...]:
        """Names of the per-row state tables, in kernel argument order."""
        return tuple(key for key, _ in self.state)

    def state_layout(
        self, embedding_dim: int, dtype: torch.dtype
    ) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Row shape and dtype of each state table for rows of ``embedding_dim`` elements
        computed in ``dtype``."""
        shapes = {
            "element": ((embedding_dim,), dtype),
            "row": ((), dtype),
            "count": ((), torch.int64),
        }
        return {key: shapes[kind] for key, kind in self.state}

    def apply_(
        self,
        weight: torch.Tensor,
        grad: torch.Tensor,
        state: Mapping[str, torch.Tensor],
        hyper: Mapping[str, float],
        scratch: torch.Tensor | None = None,
    ) -> None:
        """Run the formula on gathered rows in place.

        Parameters
        ----------
        weight : Tensor (U, dim), compute dtype, updated in place
        grad : Tensor (U, dim)
            Summed (and averaged over ranks) gradient of each row.
        state : mapping of str to Tensor
            Gathered state rows, ``(U, dim)`` or ``(U,)`` per :meth:`state_layout`.
        hyper : mapping of str to float
            Every name of :attr:`hyper`.
        scratch : Tensor (U, dim), optional
        """
        extra = {"scratch": scratch} if self.uses_scratch else {}
        arguments = {name: hyper[name] for name in self.hyper}
        self.rows_(weight, grad, *(state[key] for key in self.state_keys), **arguments, **extra)


FORMULAS: dict[str, Formula] = {
    formula.name: formula
    for formula in (
        Formula("sgd", sgd_rows_, (), ("lr",)),
        Formula("adagrad", adagrad_rows_, (("sum", "element"),), ("lr", "eps"), True),
        Formula("rowwise_adagrad", rowwise_adagrad_rows_, (("sum", "row"),), ("lr", "eps")),
        Formula(
            "adam",
            adam_rows_,
            (("exp_avg", "element"), ("exp_avg_sq", "element"), ("step", "count")),
            ("lr", "beta1", "beta2", "eps"),
            True,
        ),
    )
}
"""Every update formula by name."""
