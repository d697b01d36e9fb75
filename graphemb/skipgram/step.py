"""word2vec's SGD step on a batch of walks, written straight into the tables.

:func:`sgd_step` is the update of :meth:`graphemb.skipgram.SkipGram.sgd_step` on plain
tensors: the gradient of the summed loss of
:meth:`~graphemb.skipgram.SkipGram.forward` taken by hand (no autograd, no optimizer),
products optionally in a lower precision (:func:`fast_matmul_dtype`), rows repeated in the
batch scaled by a rule (:func:`check_duplicates`), and every row added in place (Hogwild
on tables in shared memory). The negatives' part is the layout's
(:meth:`~.sharing.Sharing.step_negatives`).
"""

from __future__ import annotations

import functools
import math
import time

import torch
import torch.nn.functional as F

from .._checks import check_walks
from .sharing import Sharing, StepBatch, fused_names
from .windows import pair_mask

__all__ = ["OccurrenceCounter", "check_duplicates", "fast_matmul_dtype", "sgd_step"]


def check_duplicates(duplicates: str) -> float | None:
    """The rule of :meth:`SkipGram.sgd_step` for rows repeated in a batch, checked.

    Returns the cap ``C`` of ``"cap:C"`` (a number >= 1), else None; raises ValueError
    naming the value otherwise.

    >>> check_duplicates("cap:1.5"), check_duplicates("mean")
    (1.5, None)
    """
    if duplicates in ("sum", "mean", "sqrt"):
        return None
    if isinstance(duplicates, str) and duplicates.startswith("cap:"):
        try:
            cap = float(duplicates[4:])
        except ValueError:
            cap = math.nan
        if math.isfinite(cap) and cap >= 1:
            return cap
    raise ValueError(
        f"duplicates must be 'sum', 'mean', 'sqrt' or 'cap:C' with a number C >= 1, got "
        f"{duplicates!r}"
    )


class OccurrenceCounter:
    """A zeroed count per row, kept between steps: counting a batch by scatter into it,
    then zeroing the touched entries, costs the batch's size, not the table's or a sort."""

    def __init__(self) -> None:
        self._counts: torch.Tensor | None = None

    def zeros_for(self, table: torch.Tensor) -> torch.Tensor:
        """Zeros, one per row of ``table``, of its dtype and device (callers leave it
        zero)."""
        counts = self._counts
        if counts is None or counts.shape[0] != table.shape[0] or counts.device != table.device:
            counts = torch.zeros(table.shape[0], dtype=table.dtype, device=table.device)
            self._counts = counts
        return counts


def scale_duplicates(
    parts: list[tuple[torch.Tensor, torch.Tensor]],
    how: str,
    cap: float | None,
    counter: torch.Tensor,
) -> None:
    """For every ``(ids, grads)`` of ``parts``, divide the rows of ``grads`` by how often
    their id occurs in all the ``ids`` ("mean": then ``index_add_`` adds their mean), by its
    square root ("sqrt") or by ``count / C`` where that exceeds 1 ("cap:C", ``cap`` = C),
    in place. ``counter``: zeros, one per row; left zero."""
    for ids, _ in parts:
        counter.index_add_(0, ids, torch.ones(ids.shape, dtype=counter.dtype, device=ids.device))
    divisors = [counter.index_select(0, ids) for ids, _ in parts]
    for ids, _ in parts:
        counter.index_fill_(0, ids, 0)
    for (_, grads), divisor in zip(parts, divisors, strict=True):
        if how == "sqrt":
            divisor.sqrt_()
        elif cap is not None:  # "cap:C": at most C times the mean
            divisor.div_(cap).clamp_(min=1.0)
        grads.div_(divisor.to(grads.dtype).unsqueeze(1))


@torch.no_grad()
def sgd_step(
    center_table: torch.Tensor,
    context_table: torch.Tensor,
    walks: torch.Tensor,
    negatives: torch.Tensor,
    sharing: Sharing,
    window: int,
    num_negatives: int,
    *,
    lr: float,
    radii: torch.Tensor | None = None,
    matmul_dtype: torch.dtype | None = None,
    duplicates: str = "sum",
    return_loss: bool = True,
    counter: OccurrenceCounter | None = None,
) -> float | None:
    """One SGD step of the summed skip-gram loss, in place on the tables.

    Parameters
    ----------
    center_table, context_table : Tensor, shape (N, D)
        Every row of the two tables (in this process's memory).
    walks : Tensor of int64, shape (W, T)
        Walks, :data:`~graphemb.sampling.walks.PAD` after their end.
    negatives : Tensor of int64
        Noise node ids in the shape of ``sharing``.
    sharing : Sharing
        The layout of ``negatives``; one with a fused step.
    window, num_negatives : int
        Largest context distance, and ``K`` (the weight of shared negatives).
    lr, radii, matmul_dtype, duplicates, return_loss
        As in :meth:`graphemb.skipgram.SkipGram.sgd_step`.
    counter : OccurrenceCounter, optional
        Reused between steps by ``duplicates`` other than "sum" (a fresh one otherwise).

    Returns
    -------
    float or None
        The summed loss of the batch before the step, or None with ``return_loss=False``.
    """
    if not sharing.fused_step:
        raise ValueError(f"sgd_step supports sharing={fused_names()}, not {sharing.name!r}")
    cap = check_duplicates(duplicates)
    walks = check_walks(walks)
    num_walks, length = walks.shape
    if num_walks == 0 or length == 0:
        return 0.0 if return_loss else None
    mask = pair_mask(walks, window, radii)
    flat = walks.clamp(min=0).view(-1)  # PAD rows are read, but get zero gradients
    dim, dtype = center_table.shape[1], center_table.dtype
    low = dtype if matmul_dtype is None else matmul_dtype
    centers = center_table.index_select(0, flat).view(num_walks, length, dim).to(low)
    contexts = context_table.index_select(0, flat).view(num_walks, length, dim).to(low)
    # d/ds log sigmoid(s) = 1 - sigmoid(s) = sigmoid(-s); d/ds log sigmoid(-s) = -sigmoid(s).
    scores = torch.bmm(centers, contexts.transpose(1, 2)).to(dtype)
    scores.neg_()
    weights = mask.to(dtype)
    loss = None
    if return_loss:  # -log sigmoid(s) = softplus(-s)
        loss = F.softplus(scores).mul_(weights).sum()
    positive = torch.sigmoid(scores).mul_(weights).mul_(lr).to(low)
    center_grad = torch.bmm(positive, contexts)  # ascent directions, scaled by lr
    context_grad = torch.bmm(positive.transpose(1, 2), centers)
    batch = StepBatch(
        centers, center_grad, context_table, negatives, mask, window, lr, num_negatives, return_loss
    )
    center_grad, noise_ids, noise_grad, noise_loss = sharing.step_negatives(batch)
    if loss is not None and noise_loss is not None:
        loss += noise_loss
    center_grad = center_grad.view(-1, dim).to(dtype)
    context_grad = context_grad.view(-1, dim).to(dtype)
    noise_grad = noise_grad.to(dtype)
    if duplicates != "sum":
        counts = (counter or OccurrenceCounter()).zeros_for(center_table)
        scale_duplicates([(flat, center_grad)], duplicates, cap, counts)
        # A context row also drawn as a negative counts once per occurrence of either.
        scale_duplicates([(flat, context_grad), (noise_ids, noise_grad)], duplicates, cap, counts)
    center_table.index_add_(0, flat, center_grad)
    context_table.index_add_(0, flat, context_grad)
    context_table.index_add_(0, noise_ids, noise_grad)
    return None if loss is None else float(loss)


@functools.cache
def fast_matmul_dtype(device: str = "cpu") -> torch.dtype | None:
    """``torch.bfloat16`` where batched products in it are clearly (1.5x) faster than in
    float32 on ``device`` with the calling thread's torch thread count (CPUs with bfloat16
    units: AVX512-BF16, AMX), else None.

    Decided by timing both on a batch shaped like :meth:`SkipGram.sgd_step`'s, each after
    a first call (which compiles the bfloat16 kernel: milliseconds), best of 5.
    """
    if torch.device(device).type != "cpu":
        return None
    timings = {}
    for dtype in (torch.float32, torch.bfloat16):
        left = torch.ones(32, 41, 128, dtype=dtype)
        right = torch.ones(32, 128, 48, dtype=dtype)
        torch.bmm(left, right)
        best = math.inf
        for _ in range(5):
            start = time.perf_counter()
            torch.bmm(left, right)
            best = min(best, time.perf_counter() - start)
        timings[dtype] = best
    return torch.bfloat16 if timings[torch.bfloat16] < timings[torch.float32] / 1.5 else None
