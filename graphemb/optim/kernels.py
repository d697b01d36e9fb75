"""Fused CPU kernels of the sparse optimizers, when the optional module is installed.

``graphemb_kernels`` (built from ``csrc/`` against the environment's torch: ``pip install
--no-build-isolation ./csrc``; ``make`` does it for both stacks) updates each row in one
pass -- sum of its gradient contributions, division by the world size, the formula of
:mod:`graphemb.optim.functional` on weight and state -- where the pure-torch path moves every
row through memory about 30 times (gather, seven elementwise passes, scatter).

Without the module, on GPUs, or with ``GRAPHEMB_DISABLE_KERNELS=1`` in the environment,
optimizers use the pure-torch path; both are tested against the same oracles.
"""

from __future__ import annotations

import os

import torch

try:
    import graphemb_kernels as _module
except ImportError:  # not built for this environment: the pure-torch path is used
    _module = None

__all__ = ["available", "usable_for", "module"]

DISABLE_VARIABLE = "GRAPHEMB_DISABLE_KERNELS"


def available() -> bool:
    """Whether the kernels are installed and not disabled by ``GRAPHEMB_DISABLE_KERNELS``."""
    return _module is not None and os.environ.get(DISABLE_VARIABLE, "") not in ("1", "true")


def usable_for(table: torch.Tensor) -> bool:
    """Whether the kernels can update ``table`` (a contiguous CPU table)."""
    return available() and table.device.type == "cpu" and table.is_contiguous()


def module():
    """The compiled module (call only when :func:`available`)."""
    return _module
