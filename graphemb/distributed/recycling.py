"""Large CPU results written into the same memory batch after batch, once nothing holds it.

A training loop asks its call sites for results of about the same sizes every batch (the
rows of a lookup, the gradient of the gathered rows) and drops them before the next batch.
A fresh tensor each time is fresh memory from the kernel, which zeroes every page of it
before the result is written: tens of MB per result, per batch. :class:`RecycledBlocks`
keeps the blocks it handed out and hands one out again when nothing else holds any view of
it (torch's count of the users of the block's storage), else allocates a fresh one. A result
still held -- by the caller, by autograd for a backward pass, by a numpy array -- is
therefore never written over.
"""

from __future__ import annotations

import functools
import math
import threading

import torch

from .huge_pages import empty_rows

__all__ = ["RecycledBlocks"]

_HEADROOM = 1.125  # a fresh block's room for the next batches' slightly larger results
_RECYCLE_FROM = 4 << 20  # bytes: smaller results come from the allocator's own free lists


def _storage_users(tensor: torch.Tensor) -> int:
    return int(torch._C._storage_Use_Count(tensor.untyped_storage()._cdata))


@functools.lru_cache(maxsize=1)
def _sole_owner_users() -> int | None:
    """What :func:`_storage_users` reads for a tensor held by one reference and nothing
    else (torch versions count the query's own reference differently), or None where this
    torch has no such count: then nothing is recycled."""
    try:
        return _storage_users(torch.empty(1))
    except (AttributeError, RuntimeError):
        return None


class RecycledBlocks:
    """A few blocks of CPU memory for one owner's large results, reused while free.

    Parameters
    ----------
    blocks : int
        Blocks kept at most: about the number of large results the owner's callers hold at
        once (a model's layers each hold their own).
    keep_at_most : int
        Bytes of the largest block kept; a larger result is a fresh tensor that is not kept,
        so that one-off results (a whole table) are not held afterwards.

    Notes
    -----
    Thread-safe: the check that a block is free and the view handed out happen under one
    lock, so two threads never receive the same block.
    """

    def __init__(self, blocks: int = 4, keep_at_most: int = 256 << 20) -> None:
        self._most = blocks
        self._keep_at_most = keep_at_most
        self._blocks: list[torch.Tensor] = []
        self._lock = threading.Lock()

    def empty(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        """An uninitialised contiguous tensor of ``shape``: the smallest free kept block
        that holds it, else a fresh tensor (large CPU ones on huge pages), kept in place of
        a free block too small for it, or beside the others while fewer than ``blocks``."""
        count = math.prod(shape)
        item = dtype.itemsize
        sole = _sole_owner_users()
        if (
            device.type != "cpu"
            or sole is None
            or not _RECYCLE_FROM <= count * item <= self._keep_at_most
        ):
            return empty_rows(shape, dtype, device)
        with self._lock:
            free = [i for i, b in enumerate(self._blocks) if _storage_users(b) == sole]
            fits = [
                i
                for i in free
                if self._blocks[i].dtype == dtype and self._blocks[i].numel() >= count
            ]
            if fits:
                block = self._blocks[min(fits, key=lambda i: self._blocks[i].numel())]
                return block[:count].view(shape)
            room = max(count, min(int(count * _HEADROOM), self._keep_at_most // item))
            block = empty_rows((room,), dtype, device)
            if len(self._blocks) < self._most:
                self._blocks.append(block)
            elif free:  # the free block that fits worst makes way
                self._blocks[min(free, key=lambda i: self._blocks[i].numel())] = block
            return block[:count].view(shape)
