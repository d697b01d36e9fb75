"""Fused CPU kernels of the sparse optimizers, when the optional module is installed.

``graphemb_kernels`` (built from ``csrc/`` against the environment's torch: ``pip install
--no-build-isolation ./csrc``; ``make`` does it for both stacks) updates each row in one
pass -- sum of its gradient contributions, division by the world size, the formula of
:mod:`graphemb.optim.functional` on weight and state -- where the pure-torch path moves every
row through memory about 30 times (gather, seven elementwise passes, scatter).

Without the module, on GPUs, or with ``GRAPHEMB_DISABLE_KERNELS=1`` in the environment,
optimizers use the pure-torch path; both are tested against the same oracles.

Contract of every kernel (``sgd_``, ``adagrad_``, ``rowwise_adagrad_``, ``adam_``), in place:

* ``weight`` (N, D): the table, float32, float64, float16 or bfloat16;
* ``index`` (M,) int64: table rows, sorted ascending (runs of equal rows = duplicates);
* ``order`` (M,) int64: the row of ``grads`` of each position of ``index`` (a stable sort
  keeps the summation order of ``index_add_``);
* ``grads`` (R, D) float32 or float64: the compute dtype, also that of the state tables;
* ``divisor`` > 0: the summed gradient of a row is divided by it (the world size).

Every tensor must be a contiguous CPU tensor. The kernels check all of it before touching a
row and raise ``IndexError`` (a row of ``index`` outside the table, a row of ``order``
outside ``grads``), ``ValueError`` (device, contiguity, shapes, unsorted ``index``,
``divisor``) or ``TypeError`` (dtypes) naming the bad value; a rejected call changes
nothing. Each call is a ``torch.profiler`` span ``graphemb_kernels::<kernel>``.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import torch


def _load() -> ModuleType | None:
    try:
        return importlib.import_module("graphemb_kernels")
    except ImportError:  # not built for this environment: the pure-torch path is used
        return None


_module = _load()

__all__ = [
    "available",
    "usable_for",
    "module",
    "sgd_",
    "adagrad_",
    "rowwise_adagrad_",
    "adam_",
]

DISABLE_VARIABLE = "GRAPHEMB_DISABLE_KERNELS"


def available() -> bool:
    """Whether the kernels are installed and not disabled by ``GRAPHEMB_DISABLE_KERNELS``."""
    return _module is not None and os.environ.get(DISABLE_VARIABLE, "") not in ("1", "true")


def usable_for(table: torch.Tensor) -> bool:
    """Whether the kernels can update ``table`` (a contiguous CPU table).

    Examples
    --------
    >>> usable_for(torch.zeros(4, 3).t())  # a transposed view is not contiguous
    False
    """
    return available() and table.device.type == "cpu" and table.is_contiguous()


def module() -> ModuleType:
    """The compiled module (call only when :func:`available`)."""
    if _module is None:
        raise RuntimeError(
            "graphemb_kernels is not installed in this environment: build it with "
            "`pip install --no-build-isolation ./csrc` (or check kernels.available() first)"
        )
    return _module


def sgd_(
    weight: torch.Tensor,
    index: torch.Tensor,
    order: torch.Tensor,
    grads: torch.Tensor,
    divisor: float,
    lr: float,
) -> None:
    """SGD on the rows of sorted ``index``: ``w -= lr * g``, in place.

    ``g`` is the sum of the rows ``grads[order[i]]`` of a run of equal ``index[i]``, divided
    by ``divisor``. Shapes and checks: see the module's docstring.

    Examples
    --------
    >>> weight = torch.zeros(4, 2)
    >>> index, order = torch.sort(torch.tensor([3, 1, 3]), stable=True)
    >>> grads = torch.ones(3, 2)
    >>> if available():
    ...     sgd_(weight, index, order, grads, divisor=1, lr=0.5)
    ... else:  # the same update in plain torch
    ...     _ = weight.index_add_(0, index, grads[order], alpha=-0.5)
    >>> weight
    tensor([[ 0.0000,  0.0000],
            [-0.5000, -0.5000],
            [ 0.0000,  0.0000],
            [-1.0000, -1.0000]])
    """
    module().sgd_(weight, index, order, grads, float(divisor), float(lr))


def adagrad_(
    weight: torch.Tensor,
    state_sum: torch.Tensor,
    index: torch.Tensor,
    order: torch.Tensor,
    grads: torch.Tensor,
    divisor: float,
    lr: float,
    eps: float,
) -> None:
    """Adagrad on the rows of sorted ``index``: ``s += g*g; w -= lr*g / (sqrt(s) + eps)``.

    ``state_sum`` (N, D) in the dtype of ``grads``. Shapes and checks: see the module's
    docstring.
    """
    module().adagrad_(weight, state_sum, index, order, grads, float(divisor), float(lr), float(eps))


def rowwise_adagrad_(
    weight: torch.Tensor,
    state_sum: torch.Tensor,
    index: torch.Tensor,
    order: torch.Tensor,
    grads: torch.Tensor,
    divisor: float,
    lr: float,
    eps: float,
) -> None:
    """Row-wise Adagrad: ``s += mean(g*g); w -= lr*g / (sqrt(s) + eps)`` per row.

    ``state_sum`` (N,) in the dtype of ``grads``. Shapes and checks: see the module's
    docstring.
    """
    module().rowwise_adagrad_(
        weight, state_sum, index, order, grads, float(divisor), float(lr), float(eps)
    )


def adam_(
    weight: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: torch.Tensor,
    index: torch.Tensor,
    order: torch.Tensor,
    grads: torch.Tensor,
    divisor: float,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
) -> None:
    """Adam with a step count per row (lazy Adam) on the rows of sorted ``index``.

    ``exp_avg``, ``exp_avg_sq`` (N, D) in the dtype of ``grads``; ``step`` (N,) int64. A row
    updated for the t-th time gets the bias corrections of step t. Shapes and checks: see
    the module's docstring.
    """
    module().adam_(
        weight, exp_avg, exp_avg_sq, step, index, order, grads, float(divisor), float(lr),
        float(beta1), float(beta2), float(eps),
    )  # fmt: skip
