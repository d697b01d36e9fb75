"""What this install of graphemb runs with: versions, the compiled kernels (loaded, or why
not), the SIMD level they chose, threads and huge pages (``python -m graphemb info``)."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import torch

from ._allocator import HUGE_PAGE_ALLOCATIONS
from ._compiled import DISABLE_VARIABLE, REBUILD_COMMAND, disabled, load_module

__all__ = ["about"]

_SYSTEM_HUGE_PAGES = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _kernels_line() -> tuple[str, str]:
    module, why = load_module()
    if module is None:
        return f"not loaded: {why}; fix: {REBUILD_COMMAND}", "-"
    from ._native.library import library

    lib = library()
    state = f"disabled by {DISABLE_VARIABLE}=1" if disabled() else "loaded"
    return f"{state} ({lib.path})", f"{lib.simd_level} (chosen at run time)"


def _kernel_threads() -> str:
    """Whose threads the compiled kernels run on, if they loaded."""
    if load_module()[0] is None or disabled():
        return ""
    from ._native.library import library

    if library().uses_openmp:
        return ", on torch's OpenMP threads"
    return ", on threads of their own"


def _huge_pages() -> str:
    system = "unknown"
    if _SYSTEM_HUGE_PAGES.is_file():
        text = _SYSTEM_HUGE_PAGES.read_text().split()
        system = next((word.strip("[]") for word in text if word.startswith("[")), "unknown")
    torch_setting = os.environ.get(HUGE_PAGE_ALLOCATIONS, "unset")
    return f"torch's allocations {HUGE_PAGE_ALLOCATIONS}={torch_setting}; Linux THP: {system}"


def about() -> dict[str, str]:
    """This install's versions and run-time settings, by name (what ``info`` prints)."""
    from . import __version__

    kernels, simd = _kernels_line()
    return {
        "graphemb": f"{__version__} ({Path(__file__).resolve().parent})",
        "python": f"{platform.python_version()} ({sys.executable})",
        "torch": f"{torch.__version__} (CUDA: {'yes' if torch.cuda.is_available() else 'no'})",
        "kernels": kernels,
        "SIMD": simd,
        "threads": f"{torch.get_num_threads()} (torch.get_num_threads(); the kernels use as many"
        f"{_kernel_threads()})",
        "huge pages": _huge_pages(),
    }
