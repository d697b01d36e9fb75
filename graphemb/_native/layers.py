"""Kernels of GNN layers, compiled: the CSR aggregation (a sparse x dense product, summed
or averaged per row, its source rows prefetched) and dropout's masked scaling from a
counter-based hash."""

from __future__ import annotations

import torch

from .library import library, span
from .tensors import dtype_code, dtype_name

__all__ = ["csr_aggregate", "dropout_masked_scale"]

_FLOATS = (torch.float32, torch.float64)


def _check_index(tensor: torch.Tensor, name: str) -> None:
    if tensor.dtype != torch.int64:
        raise TypeError(f"graphemb_kernels: {name} must be int64, got {dtype_name(tensor.dtype)}")
    if tensor.device.type != "cpu" or tensor.dim() != 1 or not tensor.is_contiguous():
        raise ValueError(f"graphemb_kernels: {name} must be a contiguous 1-D CPU tensor")


def csr_aggregate(
    crow: torch.Tensor,
    col: torch.Tensor,
    values: torch.Tensor | None,
    dense: torch.Tensor,
    mean: bool,
) -> torch.Tensor:
    """CSR ``(crow, col, values or None)`` x ``dense`` (N, F) -> (R, F), summed or averaged
    per row (rows without entries: 0)."""
    _check_index(crow, "crow")
    _check_index(col, "col")
    if dense.device.type != "cpu" or not dense.is_contiguous() or dense.dim() != 2:
        raise ValueError(
            "graphemb_kernels.csr_aggregate: dense must be a contiguous 2-D CPU tensor"
        )
    if dense.dtype not in _FLOATS:
        raise TypeError(
            "graphemb_kernels.csr_aggregate: dense must be float32 or float64, got "
            f"{dtype_name(dense.dtype)}"
        )
    if crow.numel() < 1:
        raise ValueError("graphemb_kernels.csr_aggregate: crow is empty")
    if values is not None and (
        values.dtype != dense.dtype or not values.is_contiguous() or values.numel() != col.numel()
    ):
        raise ValueError(
            "graphemb_kernels.csr_aggregate: values must be contiguous, one per entry, of "
            "dense's dtype"
        )
    rows = crow.numel() - 1
    out = torch.empty(rows, dense.shape[1], dtype=dense.dtype)
    with span("graphemb_kernels::csr_aggregate"):
        library().call(
            "ge_csr_aggregate",
            crow.data_ptr(),
            rows,
            col.data_ptr(),
            col.numel(),
            None if values is None else values.data_ptr(),
            dense.data_ptr(),
            dense.shape[0],
            dense.shape[1],
            dtype_code(dense.dtype),
            int(bool(mean)),
            out.data_ptr(),
        )
    return out


def dropout_masked_scale(x: torch.Tensor, threshold: int, scale: float, key: int) -> torch.Tensor:
    """``x * scale`` where a 32-bit hash of ``(key, i)`` is at least ``threshold``, else 0,
    per element ``i`` of ``x`` in memory order: dropout's forward, and with the same key
    its backward on the gradient."""
    if x.device.type != "cpu" or not x.is_contiguous():
        raise ValueError("graphemb_kernels.dropout_masked_scale: x must be a contiguous CPU tensor")
    if x.dtype not in _FLOATS:
        raise TypeError(
            "graphemb_kernels.dropout_masked_scale: x must be float32 or float64, got "
            f"{dtype_name(x.dtype)}"
        )
    if not 0 <= threshold <= 0xFFFFFFFF:
        raise ValueError(
            f"graphemb_kernels.dropout_masked_scale: threshold = {threshold} is not in [0, 2^32)"
        )
    out = torch.empty_like(x)
    with span("graphemb_kernels::dropout_masked_scale"):
        library().call(
            "ge_dropout_masked_scale",
            x.data_ptr(),
            out.data_ptr(),
            x.numel(),
            dtype_code(x.dtype),
            int(threshold),
            float(scale),
            int(key) & ((1 << 64) - 1),
        )
    return out
