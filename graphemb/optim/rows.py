"""Row bookkeeping of a sparse step: deduplicate, gather, scatter, reuse buffers.

Kept apart from the update formulas (:mod:`graphemb.optim.functional`) and from where rows
live (:mod:`graphemb.storage`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["Workspace", "coalesce_rows", "gather_rows", "scatter_rows"]


class Workspace:
    """Scratch buffers reused from step to step, grown when a step needs more rows.

    A fresh allocation of tens of MB costs more than the arithmetic done in it: the kernel
    maps and zeroes every page on first touch (measured here: ~13 ms to allocate and fill
    50 MB against ~2 ms to fill a reused buffer). Buffers are keyed by purpose, so
    embeddings of the same width and dtype share them.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}

    def take(
        self,
        purpose: str,
        rows: int,
        row_shape: Sequence[int],
        dtype: torch.dtype,
        device: torch.device,
    ) -> torch.Tensor:
        """A buffer of shape ``(rows, *row_shape)``; its content is undefined."""
        key = (purpose, tuple(row_shape), dtype, device)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape[0] < rows:
            capacity = max(rows, 0 if buffer is None else buffer.shape[0] + buffer.shape[0] // 4)
            buffer = torch.empty((capacity, *row_shape), dtype=dtype, device=device)
            self._buffers[key] = buffer
        return buffer[:rows]

    def clear(self) -> None:
        """Release every buffer."""
        self._buffers.clear()


def coalesce_rows(
    ids: torch.Tensor, values: torch.Tensor, workspace: Workspace | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum the rows of duplicate ids.

    Parameters
    ----------
    ids : Tensor of int64 (M,)
    values : Tensor (M, ...)
    workspace : Workspace, optional
        Where to put the result (it is overwritten by the next call).

    Returns
    -------
    unique_ids : Tensor of int64 (U,), sorted ascending
    summed : Tensor (U, ...), ``summed[k] = sum of values[i] with ids[i] == unique_ids[k]``
    """
    if ids.numel() == 0:
        return ids, values
    unique_ids, inverse = torch.unique(ids, sorted=True, return_inverse=True)
    shape = (unique_ids.numel(), *values.shape[1:])
    if workspace is None:
        summed = values.new_zeros(shape)
    else:
        summed = workspace.take("coalesced", shape[0], shape[1:], values.dtype, values.device)
        summed.zero_()
    summed.index_add_(0, inverse, values)
    return unique_ids, summed


def gather_rows(
    table: torch.Tensor, index: torch.Tensor, dtype: torch.dtype, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``table[index]`` converted to ``dtype``, written into ``out`` when given."""
    if out is None:
        return table.index_select(0, index).to(dtype)
    if table.dtype == dtype:
        return torch.index_select(table, 0, index, out=out)
    return out.copy_(table.index_select(0, index))


def scatter_rows(table: torch.Tensor, index: torch.Tensor, rows: torch.Tensor) -> None:
    """``table[index] = rows`` (converted to the table's dtype); ``index`` has no duplicates."""
    table.index_copy_(0, index, rows.to(table.dtype))
