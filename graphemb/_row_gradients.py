"""How rows read from a :class:`~graphemb.NodeEmbedding` get their gradient back, and the
form in which the optimizers receive them.

The table is not a leaf of autograd's graph: a read hangs off a zero-size anchor tensor
that requires grad, and its backward hands the rows' gradient to the embedding, which
keeps it for the next optimizer step. Recording in backward (rather than returning a leaf
and reading ``.grad`` later) keeps nothing alive for reads that never get a gradient, and
lets several backward passes add up exactly as gradients of dense parameters do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

__all__ = ["RecordedGradients", "traced_rows"]

#: ``record(ids (S,), grad (S, dim))``: keeps the gradient of the rows ``ids``.
Recorder = Callable[[torch.Tensor, torch.Tensor], None]


class _TracedRows(torch.autograd.Function):
    """``compute()`` forward; backward hands the rows' gradient to ``record``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        anchor: torch.Tensor,
        flat_ids: torch.Tensor,
        compute: Callable[[], torch.Tensor],
        rows_gradient: Callable[[torch.Tensor], torch.Tensor] | None,
        record: Recorder,
    ) -> torch.Tensor:
        ctx.rows_gradient, ctx.record = rows_gradient, record
        ctx.save_for_backward(flat_ids)
        return compute()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, ...]:  # type: ignore[override]
        (flat_ids,) = ctx.saved_tensors
        rows_grad = grad if ctx.rows_gradient is None else ctx.rows_gradient(grad)
        ctx.record(flat_ids, rows_grad)
        return None, None, None, None, None


def traced_rows(
    anchor: torch.Tensor,
    flat_ids: torch.Tensor,
    compute: Callable[[], torch.Tensor],
    record: Recorder,
    rows_gradient: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """``compute()``, a function of the rows ``flat_ids``, traced so that its backward
    records the gradient of those rows.

    Parameters
    ----------
    anchor : Tensor
        The embedding's zero-size leaf that requires grad: what makes the result require
        grad.
    flat_ids : Tensor of int64, shape (S,)
        The rows read.
    compute : callable () -> Tensor
        The read: the rows themselves (a lookup), or any function of them.
    record : callable (ids (S,), grad (S, dim)) -> None
        Receives the rows' gradient in backward.
    rows_gradient : callable (grad of the result) -> Tensor (S, dim), optional
        The rows' gradient from the result's; default: the result's gradient itself (the
        result is the rows).
    """
    return _TracedRows.apply(anchor, flat_ids, compute, rows_gradient, record)


class RecordedGradients(NamedTuple):
    """Gradient rows handed from :class:`NodeEmbedding` to an optimizer
    (:meth:`NodeEmbedding.take_gradients`)."""

    ids: torch.Tensor
    """(M,) int64 global ids, duplicates allowed."""
    grads: torch.Tensor
    """(M, embedding_dim) gradient rows, one per id, in the compute dtype."""
    pushed: bool
    """Whether the rows already went to their owners: then they are the rows this rank owns,
    from every rank, and each summed row is to be divided by the world size."""
