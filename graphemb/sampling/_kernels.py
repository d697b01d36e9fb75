"""Where the sampler and the walker reach the compiled kernels, and the one number each
call draws from the user's generator for them."""

from __future__ import annotations

from typing import Any

import torch

from .._compiled import compiled_module, disabled
from ..graph import Graph

__all__ = ["compiled_on", "compiled_sampling", "draw_key"]


def compiled_sampling(graph: Graph, function: str) -> Any:
    """``graphemb_kernels`` where its ``function`` runs on this graph (CPU, built with it,
    not disabled by ``GRAPHEMB_DISABLE_KERNELS``), else None."""
    return compiled_on(graph.device, function)


def compiled_on(device: torch.device, function: str) -> Any:
    """``graphemb_kernels`` where its ``function`` runs on ``device`` (the CPU, built with
    it, not disabled by ``GRAPHEMB_DISABLE_KERNELS``), else None."""
    module = compiled_module()
    if device.type != "cpu" or module is None or disabled():
        return None
    return module if hasattr(module, function) else None


def draw_key(generator: torch.Generator | None) -> int:
    """One random int64 from ``generator``: the kernels seed every seed's or walker's own
    random stream from it, so a seeded generator reproduces a sample exactly."""
    return int(torch.randint(0, 2**62, (), generator=generator))
