"""Bindings of the table kernels (``csrc/storage/gather_rows.cpp``)."""

from __future__ import annotations

import torch

from .library import library, span
from .tensors import check_dtype, check_tensor

__all__ = ["gather_rows"]


def gather_rows(table: torch.Tensor, ids: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``torch.index_select(table, 0, ids, out=out)`` with the rows ahead prefetched.

    Parameters
    ----------
    table : Tensor (R, ...)
        Any dtype, on the CPU, contiguous.
    ids : Tensor of int64 (M,)
        Rows of ``table``; each in ``[0, R)``, else IndexError naming the first bad one, and
        ``out`` left as it was.
    out : Tensor (M, ...)
        Of ``table``'s dtype and row shape, contiguous, not overlapping ``table``.

    Returns
    -------
    Tensor (M, ...): ``out``.
    """
    check_tensor("gather_rows", table, "table", table.dim())
    check_tensor("gather_rows", ids, "ids", 1)
    check_dtype("gather_rows", ids, "ids", torch.int64, "row numbers")
    check_tensor("gather_rows", out, "out", table.dim())
    if table.dim() == 0:
        raise ValueError("graphemb_kernels.gather_rows: table must have rows, got a scalar")
    expected = (ids.numel(), *table.shape[1:])
    if out.shape != expected or out.dtype != table.dtype:
        raise ValueError(
            f"graphemb_kernels.gather_rows: out must be {table.dtype} of shape "
            f"{list(expected)}, got {out.dtype} of shape {list(out.shape)}"
        )
    row_bytes = table[0].numel() * table.element_size() if table.shape[0] else 0
    table_end = table.data_ptr() + table.shape[0] * row_bytes
    out_end = out.data_ptr() + out.numel() * out.element_size()
    if out.numel() and table.numel() and out.data_ptr() < table_end and table.data_ptr() < out_end:
        raise ValueError("graphemb_kernels.gather_rows: out must not overlap table")
    with span("graphemb_kernels::gather_rows"):
        library().call(
            "ge_gather_rows",
            table.data_ptr(),
            table.shape[0],
            row_bytes,
            ids.data_ptr(),
            ids.numel(),
            out.data_ptr(),
        )
    return out
