"""Uniform neighbour sampling without replacement, compiled: one layer's draws, or every
layer's draws and relabelling into DGL-style blocks (the CPU path of
:class:`graphemb.sampling.NeighborSampler`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .library import Outputs, library, span
from .tensors import dtype_code, dtype_name

__all__ = ["sample_blocks", "sample_layer"]

_KEY_MASK = (1 << 64) - 1  # a signed key's bits, as the library's unsigned one


def _check_long(tensor: torch.Tensor, name: str) -> None:
    if tensor.dtype != torch.int64:
        raise TypeError(
            f"graphemb_kernels sampler: {name} must be int64, got {dtype_name(tensor.dtype)}"
        )
    if tensor.device.type != "cpu" or tensor.dim() != 1 or not tensor.is_contiguous():
        raise ValueError(
            f"graphemb_kernels sampler: {name} must be a contiguous 1-D CPU tensor, got shape "
            f"{list(tensor.shape)} on {tensor.device}"
        )


def _check_graph(indptr: torch.Tensor, indices: torch.Tensor, seeds: torch.Tensor) -> int:
    """The number of nodes of the CSC graph."""
    _check_long(indptr, "indptr")
    _check_long(indices, "indices")
    _check_long(seeds, "seeds")
    if indptr.numel() < 1:
        raise ValueError("graphemb_kernels sampler: indptr is empty")
    return indptr.numel() - 1


def _int64_outputs() -> Outputs:
    return Outputs(lambda _slot, count: torch.empty(count, dtype=torch.int64))


def sample_layer(
    indptr: torch.Tensor, indices: torch.Tensor, seeds: torch.Tensor, fanout: int, key: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Up to ``fanout`` distinct in-edges of every seed (-1: all), uniformly without
    replacement: ``(src (E,), seed position (E,), CSC position (E,))``."""
    num_nodes = _check_graph(indptr, indices, seeds)
    outputs = _int64_outputs()
    with span("graphemb_kernels::sample_layer"):
        library().call(
            "ge_sample_layer",
            indptr.data_ptr(),
            indices.data_ptr(),
            num_nodes,
            seeds.data_ptr(),
            seeds.numel(),
            int(fanout),
            int(key) & _KEY_MASK,
            outputs.callback,
            None,
            outputs=outputs,
        )
    return outputs.tensors[0], outputs.tensors[1], outputs.tensors[2]


def sample_blocks(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    seeds: torch.Tensor,
    fanouts: Sequence[int],
    key: int,
    marker: torch.Tensor,
    scan_fraction: int,
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Every layer's draws and relabelling, seeds outwards.

    Parameters
    ----------
    indptr, indices : Tensor of int64
        The CSC graph.
    seeds : Tensor of int64 (S,)
        Distinct seed nodes.
    fanouts : sequence of int
        Per layer, seeds outwards (-1: every in-edge).
    key : int
        The draws' key: the sample depends on it only, not on the thread count.
    marker : Tensor of int32 or int64 (num_nodes,)
        All -1; comes back all -1 (the relabelling's scratch space, kept by the caller).
    scan_fraction : int
        A layer of E edges numbers its new nodes by a scan of per-thread bit maps of the
        nodes (set by its draws) when ``E * scan_fraction >= num_nodes``, else by sorting
        them.

    Returns
    -------
    list of tuple
        Per layer ``(src_nodes, edge_index (2, E) local ids, CSC positions (E,), row
        pointers (num_dst + 1,))``.
    """
    num_nodes = _check_graph(indptr, indices, seeds)
    if marker.device.type != "cpu" or not marker.is_contiguous() or marker.numel() != num_nodes:
        raise ValueError(
            f"graphemb_kernels.sample_blocks: marker must be a contiguous CPU tensor of "
            f"{num_nodes} entries, got shape {list(marker.shape)}"
        )
    if marker.dtype not in (torch.int32, torch.int64):
        raise TypeError(
            "graphemb_kernels.sample_blocks: marker must be int32 or int64, got "
            f"{dtype_name(marker.dtype)}"
        )
    layers = torch.tensor(list(fanouts), dtype=torch.int64)
    outputs = _int64_outputs()
    with span("graphemb_kernels::sample_blocks"):
        library().call(
            "ge_sample_blocks",
            indptr.data_ptr(),
            indices.data_ptr(),
            num_nodes,
            seeds.data_ptr(),
            seeds.numel(),
            layers.data_ptr(),
            layers.numel(),
            int(key) & _KEY_MASK,
            marker.data_ptr(),
            dtype_code(marker.dtype),
            int(scan_fraction),
            outputs.callback,
            None,
            outputs=outputs,
        )
    blocks = []
    for layer in range(layers.numel()):
        rowptr, edges, positions, src_nodes = (outputs.tensors[4 * layer + k] for k in range(4))
        blocks.append((src_nodes, edges.view(2, -1), positions, rowptr))
    return blocks
