"""Sampling, compiled: uniform neighbour sampling without replacement (one layer's draws,
or every layer's draws and relabelling into DGL-style blocks: the CPU path of
:class:`graphemb.sampling.NeighborSampler`), random walks (the CPU path of
:class:`graphemb.sampling.RandomWalker`), and the walks' random order of start nodes (of
:class:`graphemb.sampling.permutation.RandomOrder`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .library import Outputs, library, span
from .tensors import dtype_code, dtype_name

__all__ = ["random_order", "random_walks", "sample_blocks", "sample_layer"]

_KEY_MASK = (1 << 64) - 1  # a signed key's bits, as the library's unsigned one


def _check_long(tensor: torch.Tensor, name: str, *, strided: bool = False) -> None:
    """``tensor`` must be a 1-D int64 CPU tensor, contiguous unless ``strided``."""
    if tensor.dtype != torch.int64:
        raise TypeError(
            f"graphemb_kernels sampler: {name} must be int64, got {dtype_name(tensor.dtype)}"
        )
    layout = "" if strided else "contiguous "
    if tensor.device.type != "cpu" or tensor.dim() != 1 or not (strided or tensor.is_contiguous()):
        raise ValueError(
            f"graphemb_kernels sampler: {name} must be a {layout}1-D CPU tensor, got shape "
            f"{list(tensor.shape)} on {tensor.device}"
        )


def _check_graph(
    indptr: torch.Tensor, indices: torch.Tensor, seeds: torch.Tensor, *, strided: bool = False
) -> int:
    """The number of nodes of the CSC graph (``seeds`` may be strided if ``strided``)."""
    _check_long(indptr, "indptr")
    _check_long(indices, "indices")
    _check_long(seeds, "seeds", strided=strided)
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
        The relabelling's scratch space, kept by the caller: any values before the call,
        any after it (an entry is read only after the call wrote it).
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


def random_walks(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    cumulative: torch.Tensor | None,
    last: torch.Tensor | None,
    start: torch.Tensor,
    p: float,
    q: float,
    key: int,
    out: torch.Tensor,
) -> None:
    """One walk from each node of ``start`` along the out-edges, written into ``out``.

    Parameters
    ----------
    indptr, indices : Tensor of int64
        The CSR graph of the out-edges (rows sorted unless ``p == q == 1``).
    cumulative : Tensor of float64 (E + 1,) or None
        Weighted walks: the prefix sums of the edge weights (with a leading 0).
    last : Tensor of int64 (N,) or None
        Weighted walks: each node's last edge of positive weight.
    start : Tensor of int64 (W,)
        Start nodes, strided or not; it may be ``out[:, 0]`` itself (each walk reads its
        start before it writes its row).
    p, q : float
        node2vec's return and in-out parameters (both 1: first-order walks).
    key : int
        The walks' key: the walks depend on it only, not on the thread count.
    out : Tensor of int64 (W, L + 1)
        Receives the walks: the start, then ``L`` steps, -1 after a node a walk cannot
        leave.
    """
    num_nodes = _check_graph(indptr, indices, start, strided=True)
    _check_weights(cumulative, last, indices.numel(), num_nodes)
    if (
        out.dtype != torch.int64
        or out.device.type != "cpu"
        or out.dim() != 2
        or out.shape[0] != start.numel()
        or not out.is_contiguous()
    ):
        raise ValueError(
            f"graphemb_kernels.random_walks: out must be a contiguous int64 CPU tensor of "
            f"{start.numel()} rows, got {dtype_name(out.dtype)} of shape {list(out.shape)} "
            f"on {out.device}"
        )
    with span("graphemb_kernels::random_walks"):
        library().call(
            "ge_random_walks",
            indptr.data_ptr(),
            indices.data_ptr(),
            None if cumulative is None else cumulative.data_ptr(),
            None if last is None else last.data_ptr(),
            num_nodes,
            start.data_ptr(),
            start.stride(0),
            start.numel(),
            out.shape[1] - 1,
            float(p),
            float(q),
            int(key) & _KEY_MASK,
            out.data_ptr(),
        )


def _check_weights(
    cumulative: torch.Tensor | None, last: torch.Tensor | None, num_edges: int, num_nodes: int
) -> None:
    """:func:`random_walks`' weights: both or neither, of the graph's sizes."""
    if (cumulative is None) != (last is None):
        raise ValueError("graphemb_kernels.random_walks: weighted walks need cumulative and last")
    if cumulative is None or last is None:
        return
    if (
        cumulative.dtype != torch.float64
        or cumulative.shape != (num_edges + 1,)
        or cumulative.device.type != "cpu"
        or not cumulative.is_contiguous()
    ):
        raise ValueError(
            "graphemb_kernels.random_walks: cumulative must be a contiguous float64 CPU "
            f"tensor of E + 1 = {num_edges + 1} entries, got {dtype_name(cumulative.dtype)} "
            f"of shape {list(cumulative.shape)} on {cumulative.device}"
        )
    _check_long(last, "last")
    if last.numel() != num_nodes:
        raise ValueError(
            f"graphemb_kernels.random_walks: last must have {num_nodes} entries, got {last.numel()}"
        )


def random_order(
    num_nodes: int,
    half_bits: int,
    keys: Sequence[int],
    odd: bool,
    start: int,
    count: int,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Positions ``start .. start + count - 1`` of the seeded pseudo-random order of
    ``0 .. num_nodes - 1``: int64 (count,), written into ``out`` if given (an int64 CPU
    vector of ``count`` entries, strided or not), else into a fresh tensor.

    Parameters
    ----------
    num_nodes : int
        ``n``, at most ``4 ** half_bits``.
    half_bits : int
        The Feistel network's half width ``k``, in ``[1, 31]``.
    keys : sequence of int
        One key per round, each in ``[0, 2**32)``.
    odd : bool
        Whether 0 and 1 are swapped after the last round.
    start, count : int
        The positions, inside ``[0, num_nodes)``.
    out : Tensor, optional
        Where to write them.
    """
    rounds = torch.tensor(list(keys), dtype=torch.int64)
    if bool(((rounds < 0) | (rounds >= 1 << 32)).any()):
        raise ValueError("graphemb_kernels.random_order: every key must lie in [0, 2**32)")
    if out is None:
        out = torch.empty(count, dtype=torch.int64)
    elif not (
        out.dtype == torch.int64
        and out.device.type == "cpu"
        and out.shape == (count,)
        and (count < 2 or out.stride(0) >= 1)
    ):
        raise ValueError(
            "graphemb_kernels.random_order: out must be an int64 CPU vector of shape "
            f"({count},) with distinct entries, got {out.dtype} {tuple(out.shape)} (stride "
            f"{tuple(out.stride())}) on {out.device}"
        )
    with span("graphemb_kernels::random_order"):
        library().call(
            "ge_random_order",
            int(num_nodes),
            int(half_bits),
            rounds.data_ptr(),
            rounds.numel(),
            int(bool(odd)),
            int(start),
            int(count),
            out.data_ptr(),
            max(out.stride(0), 1),
        )
    return out
