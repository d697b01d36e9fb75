"""Graph construction kernels, compiled: the CSC arrays of an edge list, and the parse of
integer edge-list files on all threads."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

import torch

from .library import DECLINED, Outputs, library, span
from .tensors import check_dtype

__all__ = ["csc_from_edges", "parse_integer_edges"]

EdgeArrays = tuple[torch.Tensor, torch.Tensor | None, int, int, bool]


def _check_ids(tensor: torch.Tensor, name: str) -> None:
    check_dtype("csc_from_edges", tensor, name, torch.int64, "node ids")
    if tensor.device.type != "cpu":
        raise ValueError(
            f"graphemb_kernels.csc_from_edges: {name} must be a CPU tensor, got one on "
            f"{tensor.device}"
        )
    if tensor.dim() != 1:
        raise ValueError(
            f"graphemb_kernels.csc_from_edges: {name} must have 1 dimension, got shape "
            f"{list(tensor.shape)}"
        )


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    """The bytes ``[first, end)`` that a 1-D tensor's elements lie in."""
    first = tensor.data_ptr()
    return first, first + ((tensor.numel() - 1) * tensor.stride(0) + 1) * tensor.element_size()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return False
    (a_first, a_end), (b_first, b_end) = _span(a), _span(b)
    return a_first < b_end and b_first < a_end


def csc_from_edges(
    src: torch.Tensor,
    dst: torch.Tensor,
    num_nodes: int,
    undirected: bool,
    allocate: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CSC arrays ``(indptr, indices, edge_ids)`` of an edge list by a counting sort.

    Parameters
    ----------
    src, dst : Tensor of int64 (E,)
        The edges; strided views are read in place.
    num_nodes : int
    undirected : bool
        Also store the reverse of every edge that is not a self-loop (ids E, E + 1, ...).
    allocate : callable
        ``allocate(S)`` returns the ``(indices, edge_ids)`` to fill, contiguous int64 of S
        elements each (S stored edges); ``edge_ids`` may be the memory of ``src`` and
        ``dst`` (every edge is read before it is written), ``indices`` may not.
    """
    _check_ids(src, "src")
    _check_ids(dst, "dst")
    if src.numel() != dst.numel():
        raise ValueError(
            "graphemb_kernels.csc_from_edges: src and dst must have the same length, got "
            f"{src.numel()} and {dst.numel()}"
        )
    indptr = torch.empty(max(int(num_nodes), 0) + 1, dtype=torch.int64)
    made: list[torch.Tensor] = []

    def make(slot: int, count: int) -> torch.Tensor:
        if slot == 0:
            made.extend(allocate(count))
            for name, tensor in zip(("indices", "edge_ids"), made, strict=True):
                _check_output(tensor, name, count)
            if any(_overlap(made[0], other) for other in (src, dst, made[1])):
                raise ValueError(
                    "graphemb_kernels.csc_from_edges: allocate must return indices apart from "
                    "src, dst and edge_ids"
                )
        return made[slot]

    outputs = Outputs(make)
    with span("graphemb_kernels::csc_from_edges"):
        library().call(
            "ge_csc_from_edges",
            src.data_ptr(),
            src.stride(0),
            dst.data_ptr(),
            dst.stride(0),
            src.numel(),
            int(num_nodes),
            int(bool(undirected)),
            indptr.data_ptr(),
            outputs.callback,
            None,
            outputs=outputs,
        )
    return indptr, made[0], made[1]


def _check_output(tensor: torch.Tensor, name: str, size: int) -> None:
    _check_ids(tensor, name)
    if not tensor.is_contiguous() or tensor.numel() != size:
        raise ValueError(
            f"graphemb_kernels.csc_from_edges: allocate must return contiguous {name} of {size} "
            f"elements, got shape {list(tensor.shape)}"
        )


def parse_integer_edges(
    path: str | os.PathLike[str],
    skip_lines: int,
    delimiter: str,
    columns: int,
    weighted: bool,
    parts: int = 0,
) -> EdgeArrays | None:
    """The edge lines of a file of integer node names after ``skip_lines``, parsed on all
    threads (``parts=0``) or in that many parts.

    Returns
    -------
    tuple or None
        ``(edges (2, E) int64, weights (E,) float64 or None, smallest id, largest id,
        dense)``, ``dense`` telling whether the ids are exactly ``0 .. largest``; None for
        anything that is not a plain integer edge list (the caller reads the file itself).
    """
    if len(delimiter.encode()) > 1:
        raise ValueError(
            'graphemb_kernels.parse_integer_edges: delimiter must be "" (blanks) or one '
            f"character that cannot be part of a field, got '{delimiter}'"
        )
    dtypes = {0: torch.int64, 1: torch.float64}
    outputs = Outputs(lambda slot, count: torch.empty(count, dtype=dtypes[slot]))
    result = (ctypes.c_int64 * 4)()
    with span("graphemb_kernels::parse_integer_edges"):
        status = library().call(
            "ge_parse_integer_edges",
            os.fsencode(path),
            int(skip_lines),
            delimiter.encode() or b"\0",
            int(columns),
            int(bool(weighted)),
            int(parts),
            outputs.callback,
            None,
            result,
            outputs=outputs,
        )
    if status == DECLINED:
        return None
    edges, low, high, dense = (int(value) for value in result)
    buffer = outputs.tensors[0]
    capacity = buffer.numel() // 2
    table = buffer[: 2 * edges].view(2, edges)
    weights = outputs.tensors[1][:edges] if weighted else None
    if edges < capacity - capacity // 4:  # a view keeps a few blank lines' slots, not many
        table = table.clone()
        weights = None if weights is None else weights.clone()
    return table, weights, low, high, bool(dense)
