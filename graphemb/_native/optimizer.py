"""The fused sparse-optimizer update and the sort of a step's rows, compiled.

``fused_update`` is the one entry point of the compiled optimizer backend
(:mod:`graphemb.optim.kernels` calls it): the formula by its position in the library's
table (:func:`formulas`), the tables, the sorted rows of the step and their gradient rows,
checked here (devices, dtypes, shapes) and in the library (rows sorted and in range)
before any row is written.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

import torch

from .library import library, span
from .tensors import check_dtype, check_tensor, dtype_code, dtype_name, pointers

__all__ = ["formulas", "fused_update", "sort_rows"]

_WEIGHT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

FormulaEntry = tuple[str, list[tuple[str, str]], list[str]]


def formulas() -> list[FormulaEntry]:
    """The library's formula table: ``(name, [(state key, kind)], [hyper-parameters])``
    by position (kinds: ``"element"``, ``"row"``, ``"count"``)."""
    return list(_formula_table())


@functools.cache
def _formula_table() -> tuple[FormulaEntry, ...]:
    lib = library()
    table = []
    for position in range(lib.function("ge_formula_count")()):
        spec = bytes(lib.function("ge_formula_spec")(position)).decode()
        name, state, hyper = spec.split(";")
        pairs = [tuple(item.split(":")) for item in state.split(",") if item]
        table.append(
            (name, [(key, kind) for key, kind in pairs], hyper.split(",") if hyper else [])
        )
    return tuple(table)


def _check_grads(kernel: str, grads: Sequence[torch.Tensor], weight: torch.Tensor) -> int:
    """Every part (R_p, dim) of one float dtype; returns their rows together."""
    if not grads:
        raise ValueError(
            f"graphemb_kernels.{kernel}: grads must hold at least one tensor, got an empty list"
        )
    first = grads[0].dtype
    if first not in (torch.float32, torch.float64):
        raise TypeError(
            f"graphemb_kernels.{kernel}: grads must be float32 or float64 (the compute dtype), "
            f"got {dtype_name(first)}"
        )
    rows = 0
    for position, part in enumerate(grads):
        name = "grads" if len(grads) == 1 else f"grads[{position}]"
        check_tensor(kernel, part, name, 2)
        check_dtype(kernel, part, name, first, "the dtype of grads[0]")
        if part.shape[1] != weight.shape[1]:
            raise ValueError(
                f"graphemb_kernels.{kernel}: {name} must have the weight's {weight.shape[1]} "
                f"columns, got shape {list(part.shape)}"
            )
        rows += part.shape[0]
    return rows


def _check_state(
    kernel: str,
    layout: list[tuple[str, str]],
    state: Sequence[torch.Tensor],
    weight: torch.Tensor,
    compute: torch.dtype,
) -> None:
    """State tables of the formula's layout: (N, dim) per element, (N,) per row or count."""
    if len(state) != len(layout):
        raise ValueError(
            f"graphemb_kernels.{kernel}: takes {len(layout)} state table(s), got {len(state)}"
        )
    for (key, kind), table in zip(layout, state, strict=True):
        shape = list(weight.shape) if kind == "element" else [weight.shape[0]]
        check_tensor(kernel, table, key, len(shape))
        if list(table.shape) != shape:
            raise ValueError(
                f"graphemb_kernels.{kernel}: {key} must have shape {shape} to match the "
                f"weight, got {list(table.shape)}"
            )
        if kind == "count":
            check_dtype(kernel, table, key, torch.int64, "step counts")
        else:
            check_dtype(kernel, table, key, compute, "the dtype of grads")


def _check_step(
    kernel: str,
    weight: torch.Tensor,
    index: torch.Tensor,
    order: torch.Tensor,
    parts: list[torch.Tensor],
    divisor: float,
) -> None:
    """The weight, the step's rows and gradient parts, and the divisor of one call."""
    check_tensor(kernel, weight, "weight", 2)
    check_tensor(kernel, index, "index", 1)
    check_tensor(kernel, order, "order", 1)
    if weight.dtype not in _WEIGHT_DTYPES:
        raise TypeError(
            f"graphemb_kernels.{kernel}: weight must be float32, float64, float16 or bfloat16, "
            f"got {dtype_name(weight.dtype)}"
        )
    check_dtype(kernel, index, "index", torch.int64, "row numbers")
    check_dtype(kernel, order, "order", torch.int64, "rows of grads")
    _check_grads(kernel, parts, weight)
    if index.numel() != order.numel():
        raise ValueError(
            f"graphemb_kernels.{kernel}: index and order must have the same length, got "
            f"{index.numel()} and {order.numel()}"
        )
    if not divisor > 0 or divisor == float("inf"):
        raise ValueError(
            f"graphemb_kernels.{kernel}: divisor must be a positive finite number, got {divisor}"
        )


def fused_update(
    formula: int,
    weight: torch.Tensor,
    state: Sequence[torch.Tensor],
    index: torch.Tensor,
    order: torch.Tensor,
    grads: Sequence[torch.Tensor],
    divisor: float,
    hyper: Sequence[float],
) -> None:
    """Sum each run's gradient rows, divide by ``divisor``, apply formula ``formula`` in place.

    Parameters
    ----------
    formula : int
        Position of the formula in :func:`formulas`.
    weight : Tensor (N, dim), float32, float64, float16 or bfloat16
    state : list of Tensor
        The formula's state tables in its order: (N, dim) per element or (N,) per row in
        the compute dtype (float64 for float64 tables, else float32); (N,) int64 counts.
    index : Tensor of int64 (M,)
        Rows of ``weight``, sorted ascending, duplicates allowed.
    order : Tensor of int64 (M,)
        The row of the concatenated ``grads`` of each position of ``index``.
    grads : list of Tensor (R_p, dim)
        Gradient rows in the compute dtype, read in place as their concatenation.
    divisor : float > 0
        The world size.
    hyper : list of float
        The formula's hyper-parameters in its order.
    """
    lib = library()
    table = _formula_table()
    if not 0 <= formula < len(table):
        raise ValueError(
            f"graphemb_kernels.fused_update: formula must be in [0, {len(table)}), got {formula}"
        )
    name, layout, hyper_names = table[formula]
    parts = list(grads)
    _check_step(name, weight, index, order, parts, divisor)
    _check_state(name, layout, state, weight, parts[0].dtype)
    if len(hyper) != len(hyper_names):
        raise ValueError(
            f"graphemb_kernels.{name}: takes {len(hyper_names)} hyper-parameter(s), got "
            f"{len(hyper)}"
        )
    part_rows = (ctypes.c_int64 * len(parts))(*[part.shape[0] for part in parts])
    values = (ctypes.c_double * max(len(hyper), 1))(*[float(h) for h in hyper])
    with span(f"graphemb_kernels::{name}_"):
        lib.call(
            "ge_fused_update",
            formula,
            weight.data_ptr(),
            dtype_code(weight.dtype),
            weight.shape[0],
            weight.shape[1],
            pointers(list(state)),
            len(state),
            index.data_ptr(),
            order.data_ptr(),
            index.numel(),
            pointers(parts),
            part_rows,
            len(parts),
            dtype_code(parts[0].dtype),
            float(divisor),
            values,
            len(hyper),
        )


def sort_rows(
    ids: torch.Tensor,
    num_rows: int,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.sort(ids, stable=True)`` of row ids in ``[0, num_rows)`` (a merge onto their
    ascending tail, or a radix sort; ``csrc/optim/sort_rows.cpp``): ``(sorted ids, their
    positions in ids)``, written to ``out`` when given."""
    check_tensor("sort_rows", ids, "ids", 1)
    check_dtype("sort_rows", ids, "ids", torch.int64, "row numbers")
    if out is None:
        index, order = torch.empty_like(ids), torch.empty_like(ids)
    else:
        index, order = out
        for name, tensor in (("out[0]", index), ("out[1]", order)):
            check_tensor("sort_rows", tensor, name, 1)
            check_dtype("sort_rows", tensor, name, torch.int64, "row numbers")
            if tensor.numel() != ids.numel():
                raise ValueError(
                    f"graphemb_kernels.sort_rows: {name} must hold {ids.numel()} ids, as ids "
                    f"does, got {tensor.numel()}"
                )
        if index.data_ptr() == order.data_ptr() or ids.data_ptr() in (
            index.data_ptr(),
            order.data_ptr(),
        ):
            raise ValueError("graphemb_kernels.sort_rows: ids, out[0] and out[1] must not overlap")
    with span("graphemb_kernels::sort_rows"):
        library().call(
            "ge_sort_rows",
            ids.data_ptr(),
            ids.numel(),
            int(num_rows),
            index.data_ptr(),
            order.data_ptr(),
        )
    return index, order
