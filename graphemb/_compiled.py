"""The optional compiled module ``graphemb_kernels`` (built from ``csrc/``), imported once.

Its users check for what they call and keep a pure-torch (or numpy) path for when it is
absent: :mod:`graphemb.optim.kernels` (fused optimizer updates; it also checks that the
module's formula table matches the registry), :class:`graphemb.graph.Graph` (CSC
construction) and :mod:`graphemb.io.edge_list` (parsing integer edge lists on all threads).
The layers' kernels ask :func:`float_kernel` whether one applies to a tensor.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

__all__ = ["DISABLE_VARIABLE", "compiled_module", "disabled", "float_kernel", "load_module"]

DISABLE_VARIABLE = "GRAPHEMB_DISABLE_KERNELS"
"""Set to ``1`` (or ``true``) to keep graphemb off its compiled kernels (C++ and Triton)."""


def load_module() -> tuple[ModuleType | None, str]:
    """``(module, "")``, or ``(None, why)`` when ``graphemb_kernels`` does not import."""
    try:
        return importlib.import_module("graphemb_kernels"), ""
    except ImportError as error:  # not built for this environment
        return None, f"graphemb_kernels is not installed ({error})"


_module, _ = load_module()


def compiled_module() -> ModuleType | None:
    """The module ``graphemb_kernels``, or None when it does not import."""
    return _module


def disabled() -> bool:
    """Whether ``GRAPHEMB_DISABLE_KERNELS`` asks, now, for the pure-torch paths."""
    return os.environ.get(DISABLE_VARIABLE, "") in ("1", "true")


def float_kernel(name: str, tensor: torch.Tensor) -> Callable[..., Any] | None:
    """The compiled kernel ``name`` where it applies to ``tensor``, else None.

    It applies to a CPU tensor of float32 or float64 when the module is built with that
    kernel and :func:`disabled` does not ask for torch's own operators.
    """
    if (
        tensor.device.type != "cpu"
        or tensor.dtype not in (torch.float32, torch.float64)
        or _module is None
        or disabled()
    ):
        return None
    return getattr(_module, name, None)
