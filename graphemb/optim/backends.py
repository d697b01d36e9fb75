"""Where an optimizer's update runs: one interface, three backends, chosen once per embedding.

Every backend takes the same call (:meth:`UpdateBackend.update_`): the rows ``ids`` of this
process's weight and state tables (duplicates allowed), their gradient rows, the divisor
(world size), the formula of the registry (:data:`graphemb.optim.functional.FORMULAS`) and
its hyper-parameters by name. It sums the gradient rows of each row, divides by the
divisor and applies the formula to the weight and state rows in place.

* ``"cpu-kernels"``: the fused C++ kernels (:mod:`graphemb.optim.kernels`), contiguous CPU
  tables;
* ``"triton"``: the fused Triton kernel (:mod:`graphemb.optim.triton_update`), CUDA tables;
* ``"torch"``: coalesce -> gather rows -> formula -> scatter rows, everywhere.

Both fused backends are a :class:`FusedBackend` around a function of the same signature,
``fused_update(formula, weight, state, index, order, grads, divisor, hyper)`` with ``index``
the stably sorted rows and ``order`` the gradient row behind each position, and the sort
that gives them (:func:`graphemb.optim.kernels.sort_rows` on CPU, ``torch.sort`` on GPUs).
Gradient rows may come as :class:`~graphemb.distributed.mailbox.RowParts` (rows pushed
through shared memory, left where the senders wrote them): the C++ kernels read the parts
in place, the other backends copy them into one tensor first.

:func:`select_backend` picks one when an optimizer takes an embedding (its
``add_param_group``); ``GRAPHEMB_DISABLE_KERNELS=1`` at that moment picks pure torch.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Callable, Mapping

import torch

from ..distributed.mailbox import RowParts
from . import kernels, triton_update
from .functional import Formula
from .rows import Workspace, coalesce_rows, gather_rows, scatter_rows

__all__ = [
    "FusedBackend",
    "KernelFallbackWarning",
    "FusedUpdate",
    "RowSort",
    "TorchBackend",
    "UpdateBackend",
    "select_backend",
    "stable_sort",
]

FusedUpdate = Callable[
    [
        str,
        torch.Tensor,
        Mapping[str, torch.Tensor],
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        float,
        Mapping[str, float],
    ],
    None,
]
"""``fused_update(formula, weight, state, index, order, grads, divisor, hyper)``: the
interface of :func:`graphemb.optim.kernels.fused_update` and
:func:`graphemb.optim.triton_update.fused_update`."""


class UpdateBackend(abc.ABC):
    """Applies a formula to the rows of one embedding's tables."""

    name: str = ""

    @abc.abstractmethod
    def update_(
        self,
        formula: Formula,
        weight: torch.Tensor,
        state: Mapping[str, torch.Tensor],
        ids: torch.Tensor,
        grads: torch.Tensor | RowParts,
        divisor: int,
        hyper: Mapping[str, float],
    ) -> None:
        """Sum the ``grads`` rows of each row of ``ids``, divide by ``divisor``, apply
        ``formula`` to the weight and state rows in place.

        Parameters
        ----------
        formula : Formula
        weight : Tensor (N, dim), updated in place
        state : mapping of str to Tensor
            The formula's state tables, ``(N, dim)`` or ``(N,)``, updated in place.
        ids : Tensor of int64 (M,)
            Rows of the tables, duplicates allowed.
        grads : Tensor (M, dim) of the compute dtype, or RowParts of M such rows
        divisor : int
            The world size (gradients are averaged over ranks).
        hyper : mapping of str to float
            Every name of ``formula.hyper``.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class TorchBackend(UpdateBackend):
    """Pure torch: coalesce, gather the distinct rows, run the formula, scatter them back.

    Parameters
    ----------
    workspace : Workspace
        Buffers reused from step to step.
    """

    name = "torch"

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace

    def update_(self, formula, weight, state, ids, grads, divisor, hyper):
        if isinstance(grads, RowParts):
            grads = grads.materialize()
        index, grads = coalesce_rows(ids, grads, self._workspace)
        if divisor != 1:
            grads.div_(divisor)
        rows, dim = index.numel(), grads.shape[1]
        compute, device = grads.dtype, grads.device
        take = self._workspace.take
        weight_rows = gather_rows(
            weight, index, compute, take("weight", rows, (dim,), compute, device)
        )
        state_rows = {
            key: gather_rows(
                t, index, t.dtype, take(f"state.{key}", rows, t.shape[1:], t.dtype, device)
            )
            for key, t in state.items()
        }
        scratch = take("scratch", rows, (dim,), compute, device) if formula.uses_scratch else None
        formula.apply_(weight_rows, grads, state_rows, hyper, scratch)
        scatter_rows(weight, index, weight_rows)
        for key, t in state.items():
            scatter_rows(t, index, state_rows[key])


RowSort = Callable[..., tuple[torch.Tensor, torch.Tensor]]
"""``sort(ids, num_rows, out=(index, order)) -> (index, order)``, as
``torch.sort(ids, stable=True)``: the interface of :func:`stable_sort` and
:func:`graphemb.optim.kernels.sort_rows`."""


def stable_sort(
    ids: torch.Tensor, num_rows: int, out: tuple[torch.Tensor, torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.sort(ids, stable=True)``: ``(index, order)`` for a fused kernel, written to
    ``out`` when given."""
    if out is None:
        return torch.sort(ids, stable=True)
    return torch.sort(ids, stable=True, out=out)


class FusedBackend(UpdateBackend):
    """A fused kernel: sorts the rows stably (keeping the summation order of the pure-torch
    path) and hands them to ``kernel``.

    Parameters
    ----------
    name : str
    kernel : FusedUpdate
    sort : RowSort
        ``sort(ids, num_rows, out=(index, order)) -> (index, order)``, as
        ``torch.sort(ids, stable=True)``.
    takes_parts : bool
        Whether ``kernel`` takes ``grads`` as a list of tensors whose concatenation
        ``order`` indexes (else one tensor).
    workspace : Workspace, optional
        Where the sorted rows go, reused from step to step (else fresh tensors each step).
    """

    def __init__(
        self,
        name: str,
        kernel: FusedUpdate,
        sort: RowSort = stable_sort,
        takes_parts: bool = False,
        workspace: Workspace | None = None,
    ) -> None:
        self.name = name
        self._kernel = kernel
        self._sort = sort
        self._takes_parts = takes_parts
        self._workspace = workspace

    def update_(self, formula, weight, state, ids, grads, divisor, hyper):
        out = None
        if self._workspace is not None:  # pages mapped once, not at every step
            take, count = self._workspace.take, ids.numel()
            out = tuple(
                take(purpose, count, (), torch.int64, ids.device)
                for purpose in ("sorted rows", "sorted rows' positions")
            )
        index, order = self._sort(ids, weight.shape[0], out=out)
        if isinstance(grads, RowParts) and self._takes_parts:
            order = grads.positions[order]  # rows of the parts' concatenation
            grads = [part.contiguous() for part in grads.parts]
        elif isinstance(grads, RowParts):
            grads = grads.materialize()
        else:
            grads = grads.contiguous()
        self._kernel(formula.name, weight, state, index, order, grads, divisor, hyper)


def select_backend(
    weight: torch.Tensor, state: Mapping[str, torch.Tensor], workspace: Workspace, formula: Formula
) -> UpdateBackend:
    """The backend of ``formula`` for these tables: the C++ kernels for contiguous CPU
    tables, Triton for CUDA tables where it runs, else pure torch; pure torch with
    ``GRAPHEMB_DISABLE_KERNELS``, and for a formula the fused kernel at hand does not
    compile (with a one-line :class:`KernelFallbackWarning`).

    Examples
    --------
    >>> from graphemb.optim.functional import FORMULAS
    >>> from graphemb.optim.rows import Workspace
    >>> table = torch.zeros(4, 2, dtype=torch.float64).t()
    >>> select_backend(table, {}, Workspace(), FORMULAS["sgd"]).name
    'torch'
    """
    contiguous = all(t.is_contiguous() for t in state.values())
    if contiguous and kernels.usable_for(weight):
        if kernels.supports(formula.name):
            return FusedBackend(
                "cpu-kernels",
                kernels.fused_update,
                kernels.sort_rows,
                takes_parts=True,
                workspace=workspace,
            )
        _fall_back(formula, kernels.unavailable_reason(formula.name))
    elif contiguous and weight.device.type == "cuda" and triton_update.available(weight):
        if triton_update.supports(formula.name):
            return FusedBackend("triton", triton_update.fused_update, workspace=workspace)
        _fall_back(formula, f"the Triton kernel has no branch for {formula.name!r}")
    return TorchBackend(workspace)


class KernelFallbackWarning(UserWarning):
    """A formula is updated in pure torch because the fused kernel at hand lacks it."""


def _fall_back(formula: Formula, why: str) -> None:
    warnings.warn(
        f"graphemb.optim: {why}; formula {formula.name!r} runs on the pure-torch backend",
        KernelFallbackWarning,
        stacklevel=4,
    )
