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

The advice rounds a buffer's resident memory up to whole 2 MiB pages once it is written:
a buffer of 2.5 MiB holds 4 MiB. :func:`without_huge_pages` takes the advice back under a
small buffer that lives through a long run (a chunk of walks).

The advice also outlives the tensor. glibc serves blocks of up to 32 MiB from its heap once
such blocks have been freed before, so a tensor of 2 to 32 MiB often sits in the heap, and
when it is freed its range keeps the advice. Linux's ``khugepaged`` then fills every 2 MiB
range of it that still holds a page into a whole huge page (its default
``max_ptes_none`` of 511), so that freed heap memory, even memory ``malloc_trim`` gave back,
becomes resident again seconds later. :func:`heap_without_huge_pages` takes the advice back
from the whole heap, and :func:`release_free_heap` then gives the heap's free pages back
to the system (glibc's ``malloc_trim``), before a long run allocates its largest tensors.

This module imports nothing from torch: it must run before torch's first allocation.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import sys
from typing import Any

__all__ = [
    "HUGE_PAGE_ALLOCATIONS",
    "MADV_HUGEPAGE",
    "MADV_NOHUGEPAGE",
    "advise",
    "default_huge_page_allocations",
    "heap_without_huge_pages",
    "release_free_heap",
    "without_huge_pages",
]

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


MADV_HUGEPAGE, MADV_NOHUGEPAGE = 14, 15  # <linux/mman.h>


def without_huge_pages(tensor: Any) -> bool:
    """Ask Linux for 4 KiB pages under ``tensor``'s memory (``madvise(MADV_NOHUGEPAGE)``),
    so that it holds what it is written, not whole 2 MiB pages.

    Call it before the buffer is first written: pages already faulted in stay as they are.
    Elsewhere than Linux, or where the call fails, nothing changes.

    Parameters
    ----------
    tensor : Tensor
        A CPU tensor (its ``data_ptr()`` and ``nbytes`` are read).

    Returns
    -------
    bool
        Whether the advice was taken.
    """
    if tensor.nbytes == 0:
        return False
    page = mmap.PAGESIZE  # every page the buffer touches (a neighbour sharing its first or
    # last page only loses huge pages there)
    start = tensor.data_ptr() // page * page
    stop = -(-(tensor.data_ptr() + tensor.nbytes) // page) * page
    return advise(start, stop, MADV_NOHUGEPAGE)


def heap_without_huge_pages() -> int:
    """Take the huge-page advice back from the C library's heap (the ``[heap]`` ranges of
    ``/proc/self/maps``), so that what it frees stays freed (see the module's docstring).

    Tensors in the heap keep the huge pages they have; a tensor allocated later gets the
    advice again under its own range. Elsewhere than Linux nothing changes.

    Returns
    -------
    int
        Bytes of heap that took the advice.
    """
    if not sys.platform.startswith("linux"):
        return 0
    advised = 0
    with open("/proc/self/maps") as maps:
        ranges = [line.split()[0] for line in maps if line.rstrip().endswith("[heap]")]
    for span in ranges:
        start, stop = (int(bound, 16) for bound in span.split("-"))
        if advise(start, stop, MADV_NOHUGEPAGE):
            advised += stop - start
    return advised


def release_free_heap() -> bool:
    """Give the C heap's free pages back to the system, for good: the heap's huge-page
    advice taken back first (:func:`heap_without_huge_pages`), then glibc's
    ``malloc_trim(0)``.

    What earlier work freed stops counting as resident memory and is not made resident
    again by ``khugepaged``. Call it before a long run allocates its largest tensors, after
    its setup freed its temporaries.

    Returns
    -------
    bool
        Whether the C library could trim (glibc); elsewhere nothing changes.
    """
    heap_without_huge_pages()
    trim = _libc_function("malloc_trim", (ctypes.c_size_t,))
    if trim is None:
        return False
    trim(0)
    return True


def advise(start: int, stop: int, advice: int) -> bool:
    """``madvise(start, stop - start, advice)`` on Linux (addresses page-aligned as the
    kernel wants them); whether the advice was taken. Elsewhere nothing happens: False."""
    madvise = _libc_function("madvise", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))
    if madvise is None or stop <= start:
        return False
    return madvise(ctypes.c_void_p(start), ctypes.c_size_t(stop - start), advice) == 0


@functools.cache
def _libc_function(name: str, argtypes: tuple) -> Any:
    """The C library's function ``name`` (taking ``argtypes``, returning int) on Linux,
    else None."""
    if not sys.platform.startswith("linux"):
        return None
    # the process's own symbols: the C library it runs on
    function = getattr(ctypes.CDLL(None, use_errno=True), name, None)
    if function is not None:
        function.argtypes = list(argtypes)
        function.restype = ctypes.c_int
    return function
