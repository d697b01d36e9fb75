"""Kernels of GNN layers, compiled: the CSR aggregation (a sparse x dense product, summed
or averaged per row, its source rows prefetched), its backward (the transposed product,
its pattern counting-sorted by column) and dropout's masked scaling from a counter-based
hash."""

from __future__ import annotations

from ctypes import byref

import torch

from .library import DropoutMask, library, span
from .tensors import dtype_code, dtype_name

__all__ = ["csr_aggregate", "csr_aggregate_transposed", "dropout_masked_scale"]

_FLOATS = (torch.float32, torch.float64)

#: Dropout's ``(threshold, scale, key)`` (:func:`dropout_masked_scale`'s arguments).
Mask = tuple[int, float, int]

#: The values of an element's 16-bit hash: a threshold is one of them.
MASK_LEVELS = 1 << 16


def _mask_argument(mask: Mask | None, kernel: str) -> object:
    """The kernel's ``ge_dropout_mask*`` argument: None, or a reference to the struct."""
    if mask is None:
        return None
    threshold, scale, key = mask
    if not 0 <= threshold < MASK_LEVELS:
        raise ValueError(f"graphemb_kernels.{kernel}: threshold = {threshold} is not in [0, 2^16)")
    return byref(DropoutMask(int(threshold), float(scale), int(key) & ((1 << 64) - 1)))


def _check_index(tensor: torch.Tensor, name: str) -> None:
    if tensor.dtype != torch.int64:
        raise TypeError(f"graphemb_kernels: {name} must be int64, got {dtype_name(tensor.dtype)}")
    if tensor.device.type != "cpu" or tensor.dim() != 1 or not tensor.is_contiguous():
        raise ValueError(f"graphemb_kernels: {name} must be a contiguous 1-D CPU tensor")


def _check_rows(tensor: torch.Tensor, name: str, kernel: str) -> None:
    if tensor.device.type != "cpu" or not tensor.is_contiguous() or tensor.dim() != 2:
        raise ValueError(f"graphemb_kernels.{kernel}: {name} must be a contiguous 2-D CPU tensor")
    if tensor.dtype not in _FLOATS:
        raise TypeError(
            f"graphemb_kernels.{kernel}: {name} must be float32 or float64, got "
            f"{dtype_name(tensor.dtype)}"
        )


def _output(
    out: torch.Tensor | None, rows: int, width: int, dtype: torch.dtype, kernel: str
) -> torch.Tensor:
    """``out`` checked to be a contiguous CPU ``(rows, width)`` tensor of ``dtype`` (every
    element of it is overwritten), or a new one where it is None."""
    if out is None:
        return torch.empty(rows, width, dtype=dtype)
    if (
        out.shape != (rows, width)
        or out.dtype != dtype
        or out.device.type != "cpu"
        or not out.is_contiguous()
    ):
        raise ValueError(
            f"graphemb_kernels.{kernel}: out must be a contiguous CPU {dtype_name(dtype)} "
            f"tensor of shape ({rows}, {width}), got {dtype_name(out.dtype)} "
            f"{tuple(out.shape)} on {out.device}"
        )
    return out


def csr_aggregate(
    crow: torch.Tensor,
    col: torch.Tensor,
    values: torch.Tensor | None,
    dense: torch.Tensor,
    mean: bool,
    mask: Mask | None = None,
    with_self: bool = False,
    relu: bool = False,
    dense_ids: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """CSR ``(crow, col, values or None)`` x ``dense`` (N, F) -> (R, F), summed or averaged
    per row (rows without entries: 0); with ``mask``, of ``dense`` after that dropout
    (:func:`dropout_masked_scale` with these arguments), dropped as it is read; with
    ``relu``, of ``relu(dense)`` (then dropped). With ``with_self`` -> (R, 2F): each row's
    aggregate, then ``dense``'s row of the same index (read the same way), ``R <= N``.

    ``dense_ids`` (S,): the product of ``dense[dense_ids]`` (S, F), read in place (never
    copied out); ``mask`` and ``with_self`` then refer to that matrix, so the result is
    the same floats. An id outside ``[0, N)`` raises ``IndexError``. Written into ``out``
    if given (a contiguous CPU tensor of the result's shape and ``dense``'s dtype, every
    element overwritten), else into a new tensor."""
    _check_index(crow, "crow")
    _check_index(col, "col")
    if dense_ids is not None:
        _check_index(dense_ids, "dense_ids")
    _check_rows(dense, "dense", "csr_aggregate")
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
    sources = dense.shape[0] if dense_ids is None else dense_ids.numel()
    if with_self and rows > sources:
        raise ValueError(
            f"graphemb_kernels.csr_aggregate: with its own rows, the {rows} rows must be the "
            f"first of the {sources} sources"
        )
    width = dense.shape[1] * (2 if with_self else 1)
    out = _output(out, rows, width, dense.dtype, "csr_aggregate")
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
            _mask_argument(mask, "csr_aggregate"),
            out.data_ptr(),
            int(bool(with_self)),
            int(bool(relu)),
            None if dense_ids is None else dense_ids.data_ptr(),
            -1 if dense_ids is None else sources,
        )
    return out


def csr_aggregate_transposed(
    crow: torch.Tensor,
    col: torch.Tensor,
    grad: torch.Tensor,
    mean: bool,
    out_rows: int,
    addend: torch.Tensor | None = None,
    mask: Mask | None = None,
    out: torch.Tensor | None = None,
    paired: bool = False,
    relu_input: torch.Tensor | None = None,
) -> torch.Tensor:
    """The backward of :func:`csr_aggregate` with unit values: the transpose of the CSR
    matrix ``(crow, col)`` (values 1, or ``1 / entries of the row`` with ``mean``) times
    ``grad`` (R, F) -> (out_rows, F), plus ``addend`` (A, F) on the first ``A`` rows, then
    dropped by ``mask`` if given (the dropout's backward); the transpose's pattern is a
    counting sort inside the call, never a tensor. Written into ``out`` if given (a
    contiguous CPU tensor of that shape and grad's dtype, every element overwritten), else
    into a new tensor.

    ``paired``: ``grad`` is (R, 2F), the gradient of a ``with_self`` aggregation: its first
    F columns are multiplied as above, its last F added to the first R rows (no
    ``addend`` then). ``relu_input`` (out_rows, F): the values the forward read through a
    ReLU (``csr_aggregate(..., relu=True)``); the result is 0 wherever they are not above 0
    (the ReLU's backward)."""
    kernel = "csr_aggregate_transposed"
    rows, width = _transposed_shapes(crow, col, grad, out_rows, addend, paired, relu_input)
    out = _output(out, out_rows, width, grad.dtype, kernel)
    with span(f"graphemb_kernels::{kernel}"):
        library().call(
            "ge_csr_aggregate_transposed",
            crow.data_ptr(),
            rows,
            col.data_ptr(),
            col.numel(),
            grad.data_ptr(),
            width,
            dtype_code(grad.dtype),
            int(bool(mean)),
            None if addend is None else addend.data_ptr(),
            0 if addend is None else addend.shape[0],
            _mask_argument(mask, kernel),
            out.data_ptr(),
            out_rows,
            int(bool(paired)),
            None if relu_input is None else relu_input.data_ptr(),
        )
    return out


def _transposed_shapes(
    crow: torch.Tensor,
    col: torch.Tensor,
    grad: torch.Tensor,
    out_rows: int,
    addend: torch.Tensor | None,
    paired: bool,
    relu_input: torch.Tensor | None,
) -> tuple[int, int]:
    """:func:`csr_aggregate_transposed`'s arguments checked: the rows of its CSR matrix and
    the width ``F`` of its output."""
    kernel = "csr_aggregate_transposed"
    _check_index(crow, "crow")
    _check_index(col, "col")
    _check_rows(grad, "grad", kernel)
    if crow.numel() < 1:
        raise ValueError(f"graphemb_kernels.{kernel}: crow is empty")
    rows = crow.numel() - 1
    if rows != grad.shape[0]:
        raise ValueError(
            f"graphemb_kernels.{kernel}: grad has {grad.shape[0]} rows, crow {rows} (+ 1)"
        )
    width = grad.shape[1]
    if paired:
        if addend is not None or width % 2 or rows > out_rows:
            raise ValueError(
                f"graphemb_kernels.{kernel}: a paired grad needs an even width, no addend and "
                f"at most out_rows = {out_rows} rows; got width {width}, {rows} rows"
                + (", an addend" if addend is not None else "")
            )
        width //= 2
    if addend is not None:
        _check_rows(addend, "addend", kernel)
        if addend.dtype != grad.dtype or addend.shape[1] != width:
            raise ValueError(f"graphemb_kernels.{kernel}: addend must have grad's dtype and width")
    if relu_input is not None:
        _check_rows(relu_input, "relu_input", kernel)
        if relu_input.dtype != grad.dtype or relu_input.shape != (out_rows, width):
            raise ValueError(
                f"graphemb_kernels.{kernel}: relu_input must be {dtype_name(grad.dtype)} of "
                f"shape ({out_rows}, {width}), got {dtype_name(relu_input.dtype)} "
                f"{tuple(relu_input.shape)}"
            )
    return rows, width


def dropout_masked_scale(x: torch.Tensor, threshold: int, scale: float, key: int) -> torch.Tensor:
    """``x * scale`` where a 16-bit hash of ``(key, i)`` is at least ``threshold`` (in
    ``[0, 2**16)``), else 0, per element ``i`` of ``x`` in memory order: dropout's forward,
    and with the same key its backward on the gradient."""
    if x.device.type != "cpu" or not x.is_contiguous():
        raise ValueError("graphemb_kernels.dropout_masked_scale: x must be a contiguous CPU tensor")
    if x.dtype not in _FLOATS:
        raise TypeError(
            "graphemb_kernels.dropout_masked_scale: x must be float32 or float64, got "
            f"{dtype_name(x.dtype)}"
        )
    if not 0 <= threshold < MASK_LEVELS:
        raise ValueError(
            f"graphemb_kernels.dropout_masked_scale: threshold = {threshold} is not in [0, 2^16)"
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
