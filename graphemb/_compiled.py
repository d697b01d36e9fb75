"""The compiled kernels (``graphemb._native``), as the rest of graphemb reaches them.

Their users check for what they call and keep a pure-torch (or numpy) path for CUDA, for an
install without a C++ compiler and for ``GRAPHEMB_DISABLE_KERNELS=1``:
:mod:`graphemb.optim.kernels` (fused optimizer updates; it also checks that the library's
formula table matches the registry), :class:`graphemb.graph.Graph` (CSC construction),
:mod:`graphemb.io.edge_list` (parsing integer edge lists on all threads), the sampler, the
layers (:func:`float_kernel`) and the skip-gram trainer.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from ._native import REBUILD_COMMAND, kernels_module, load_error

__all__ = [
    "DISABLE_VARIABLE",
    "REBUILD_COMMAND",
    "KernelsMissingWarning",
    "compiled_module",
    "disabled",
    "float_kernel",
    "load_module",
    "warn_if_kernels_missing",
]

DISABLE_VARIABLE = "GRAPHEMB_DISABLE_KERNELS"
"""Set to ``1`` (or ``true``) to keep graphemb off its compiled kernels (C++ and Triton)."""


def load_module() -> tuple[ModuleType | None, str]:
    """``(module, "")``, or ``(None, why)`` when the compiled kernels did not load."""
    module = kernels_module()
    return module, "" if module is not None else load_error()


_module, _ = load_module()


def compiled_module() -> ModuleType | None:
    """The kernels' bindings (:mod:`graphemb._native.kernels`), or None when they did not
    load."""
    return _module


def disabled() -> bool:
    """Whether ``GRAPHEMB_DISABLE_KERNELS`` asks, now, for the pure-torch paths."""
    return os.environ.get(DISABLE_VARIABLE, "") in ("1", "true")


def float_kernel(name: str, tensor: torch.Tensor) -> Callable[..., Any] | None:
    """The compiled kernel ``name`` where it applies to ``tensor``, else None.

    It applies to a CPU tensor of float32 or float64 when the kernels loaded and
    :func:`disabled` does not ask for torch's own operators.
    """
    if (
        tensor.device.type != "cpu"
        or tensor.dtype not in (torch.float32, torch.float64)
        or _module is None
        or disabled()
    ):
        return None
    return getattr(_module, name, None)


class KernelsMissingWarning(UserWarning):
    """The compiled kernels did not load: graphemb runs its slower pure-torch paths."""


_warned = False


def warn_if_kernels_missing() -> bool:
    """Warn once per process when the compiled kernels did not load (not when the user
    disabled them with ``GRAPHEMB_DISABLE_KERNELS``), naming why and the command that
    rebuilds them: the pure-torch paths are correct but several times slower, and a user
    should not find that out from a benchmark.

    Returns
    -------
    bool
        Whether the kernels are missing (warned now or before).
    """
    global _warned
    missing = _module is None and not disabled()
    if missing and not _warned:
        _warned = True
        warnings.warn(
            f"graphemb's compiled kernels did not load ({load_error()}): training runs its "
            f"pure-torch path, several times slower. Rebuild them with `{REBUILD_COMMAND}` "
            "(needs a C++ compiler); `python -m graphemb info` says what runs.",
            KernelsMissingWarning,
            stacklevel=3,
        )
    return missing
