"""Huge pages under torch's large CPU allocations, turned on when graphemb is imported.

Training with sparse embeddings allocates large fresh tensors every batch: gathered rows,
sampled blocks, activations and their gradients, each of tens to hundreds of MB. glibc
returns such blocks to the kernel when they are freed, so every batch faults each of their
4 KiB pages in again, and the kernel zeroes them one by one: on the 1M-node GraphSAGE loop of
``benchmarks/bench_end_to_end.py`` more than half of the CPU time went to the kernel.
torch's own switch ``THP_MEM_ALLOC_ENABLE=1`` makes its CPU allocator ask for transparent
huge pages (``madvise``) under every allocation of 2 MiB or more: one fault per 2 MiB.

torch reads the variable once, at its first CPU allocation; ``import torch`` alone makes
none. So the default takes effect when graphemb is imported before any tensor is created,
as at the top of a script or notebook. A value the user set is left as it is: set
``THP_MEM_ALLOC_ENABLE=0`` before importing to keep torch's plain allocations. Where Linux's
transparent huge pages are disabled, the advice is ignored and nothing changes.

This module imports nothing from torch: it must run before torch's first allocation.
"""

from __future__ import annotations

import os

__all__ = ["HUGE_PAGE_ALLOCATIONS", "default_huge_page_allocations"]

HUGE_PAGE_ALLOCATIONS = "THP_MEM_ALLOC_ENABLE"


def default_huge_page_allocations() -> bool:
    """Turn torch's huge-page CPU allocations on unless the user chose already.

    Returns
    -------
    bool
        Whether the variable now asks for huge pages (``"1"``).
    """
    os.environ.setdefault(HUGE_PAGE_ALLOCATIONS, "1")
    return os.environ[HUGE_PAGE_ALLOCATIONS] == "1"
