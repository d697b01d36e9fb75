"""Allocation of large CPU tensors: huge pages where Linux allows them.

Huge pages matter twice for sparse embeddings. Tables are read and written at rows
scattered over hundreds of MB, so with 4 KiB pages nearly every row access misses the TLB;
and every lookup writes a fresh result whose pages the kernel faults in one by one. Measured
here (N=1M rows, D=128, batch 100k): the fused Adam step of 95k rows took ~120 ms with
4 KiB pages and ~60 ms with 2 MiB pages (one thread); a lookup into a fresh result 21 ms
and 7 ms. Transparent huge pages are usually in "madvise" mode, hence the advice; where
they are disabled, or off Linux, these functions are plain allocations.
"""

from __future__ import annotations

import sys

import torch

from .._allocator import MADV_HUGEPAGE, advise
from .._compiled import compiled_module, disabled

__all__ = [
    "advise_huge_pages",
    "advise_huge_pages_of_mapping",
    "empty_rows",
    "zeros_table",
    "index_rows",
]

_HUGE_PAGE = 2 << 20
_HUGE_PAGES_FROM = 16 << 20  # smaller tensors gain little


def advise_huge_pages(table: torch.Tensor) -> None:
    """Ask Linux for 2 MiB pages under a large CPU tensor that has not been touched yet."""
    nbytes = table.numel() * table.element_size()
    if nbytes < _HUGE_PAGES_FROM or not sys.platform.startswith("linux"):
        return
    start = -(-table.data_ptr() // _HUGE_PAGE) * _HUGE_PAGE
    stop = (table.data_ptr() + nbytes) // _HUGE_PAGE * _HUGE_PAGE
    advise(start, stop, MADV_HUGEPAGE)


def advise_huge_pages_of_mapping(buffer, nbytes: int) -> None:
    """The same for an ``mmap`` object (honoured for shared memory where Linux's
    ``shmem_enabled`` allows "advise")."""
    if nbytes >= _HUGE_PAGES_FROM and hasattr(buffer, "madvise"):
        try:
            buffer.madvise(MADV_HUGEPAGE)
        except OSError:
            pass


def empty_rows(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialised tensor; large CPU ones are backed by huge pages."""
    out = torch.empty(shape, dtype=dtype, device=device)
    if device.type == "cpu":
        advise_huge_pages(out)  # before the first touch
    return out


def zeros_table(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zero table (see :func:`empty_rows`)."""
    return empty_rows(shape, dtype, device).zero_()


def index_rows(
    table: torch.Tensor, ids: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``table[ids]`` into ``out`` (of that shape, contiguous), else into a fresh tensor of
    :func:`empty_rows`.

    A contiguous CPU table read at int64 ids goes through the compiled gather, which keeps
    rows ahead in flight (``graphemb._native.tables.gather_rows``); anything else, and
    every table without the kernels, through ``torch.index_select``.
    """
    if out is None:
        out = empty_rows((ids.numel(), *table.shape[1:]), table.dtype, table.device)
    module = compiled_module()
    if (
        module is not None
        and table.device.type == "cpu"
        and ids.dtype == torch.int64
        and ids.device.type == "cpu"
        and ids.dim() == 1
        and table.dim() >= 1
        and table.is_contiguous()
        and ids.is_contiguous()
        and out.is_contiguous()
        and not disabled()
    ):
        return module.gather_rows(table, ids, out)
    return torch.index_select(table, 0, ids, out=out)
