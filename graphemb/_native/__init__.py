"""graphemb's compiled CPU kernels: a shared library of plain C++ built with the package.

The library (``csrc/``, installed as ``graphemb/_kernels.abi3.so``) has a C interface
(``csrc/graphemb_kernels.h``) and depends on no torch: one build serves every torch.
:mod:`.library` loads it with ctypes; :mod:`.tensors` checks what Python hands it; the
other modules are its bindings, one per concern (optimizer, tables, graph, sampling,
layers, skip-gram), gathered in :mod:`.kernels`. The rest of graphemb reaches them through
:mod:`graphemb._compiled`, which also honours ``GRAPHEMB_DISABLE_KERNELS``.
"""

from __future__ import annotations

from types import ModuleType

from .library import library_path, load_error

__all__ = ["REBUILD_COMMAND", "kernels_module", "library_path", "load_error"]

REBUILD_COMMAND = "pip install --force-reinstall --no-deps <graphemb checkout or wheel>"
"""What rebuilds the kernels into an environment (a C++ compiler, g++ or clang++, needed)."""


def kernels_module() -> ModuleType | None:
    """The bindings (:mod:`.kernels`) when the library loaded, else None."""
    if load_error():
        return None
    from . import kernels

    return kernels
