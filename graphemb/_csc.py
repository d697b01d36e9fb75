"""Building CSC arrays from edge lists: the compiled counting sort where it can run, a
stable sort in pure torch elsewhere (any device), and where the arrays are allocated.

:class:`graphemb.graph.Graph`'s constructors are the users of these functions.
"""

from __future__ import annotations

from typing import Any

import torch

from ._compiled import compiled_module, disabled
from .distributed.huge_pages import empty_rows

__all__ = ["GATHER_CHUNK", "allocate_csc", "compiled_csc", "csc_by_sort"]


def allocate_csc(
    num_stored: int, device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Uninitialized ``(indices, edge_ids)`` for ``num_stored`` edges. Indices on 2 MiB
    pages: samplers read them at scattered rows, and with 4 KiB pages most reads also miss
    the TLB (measured: gathers ~35% faster). Edge ids on ordinary pages: samplers gather
    them only when a model asks, and a first touch of 2 MiB pages costs more (measured
    here: ~1.1 s/GB against ~0.35 s/GB, half of read_graph's build at 1M / 20M edges)."""
    device = torch.device("cpu") if device is None else device
    indices = empty_rows((num_stored,), torch.int64, device)
    return indices, torch.empty(num_stored, dtype=torch.int64, device=device)


# Stored edges whose sources the pure-torch path gathers at a time (bounded temporaries).
GATHER_CHUNK = 1 << 22


def compiled_csc(device: torch.device) -> Any:
    """The compiled counting sort ``graphemb_kernels.csc_from_edges`` where it can run
    (CPU, module built from these sources, not disabled by ``GRAPHEMB_DISABLE_KERNELS``),
    else None."""
    module = compiled_module()
    if device.type != "cpu" or module is None or disabled():
        return None
    return getattr(module, "csc_from_edges", None)


def csc_by_sort(
    src: torch.Tensor,
    dst: torch.Tensor,
    num_nodes: int,
    indices: torch.Tensor,
    edge_ids: torch.Tensor,
) -> torch.Tensor:
    """The CSC arrays in pure torch (any device): a stable sort of the stored edges by
    destination. Fills ``indices`` and ``edge_ids`` (shape (S,): the E edges, then, if S > E,
    the reverses of the edges that are not self-loops) and returns ``indptr``; the reversed
    edges are never materialized."""
    num_edges = src.numel()
    device = src.device
    reverses = indices.numel() - num_edges
    # The reversed edge E + k is the reverse of edge forward[k] (None: of edge k).
    forward = None
    if 0 < reverses < num_edges:
        forward = torch.nonzero(src != dst).squeeze(1)
    # Destination of each stored edge; 32-bit where the ids fit (half the sort's memory,
    # and fewer radix passes). The sort writes its permutation straight into edge_ids.
    key_dtype = torch.int32 if num_nodes <= torch.iinfo(torch.int32).max else torch.int64
    keys = torch.empty(indices.shape, dtype=key_dtype, device=device)
    keys[:num_edges] = dst
    if reverses:
        keys[num_edges:] = src if forward is None else src[forward]
    counts = torch.bincount(keys, minlength=num_nodes)
    torch.sort(keys, stable=True, out=(torch.empty_like(keys), edge_ids))
    del keys
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64, device=device)
    torch.cumsum(counts, 0, out=indptr[1:])
    if not reverses:
        torch.index_select(src, 0, edge_ids, out=indices)
        return indptr
    for start in range(0, indices.numel(), GATHER_CHUNK):
        ids = edge_ids[start : start + GATHER_CHUNK]
        is_forward = ids < num_edges
        reversed_of = (ids - num_edges).clamp_(min=0)
        if forward is not None:
            reversed_of = forward[reversed_of.clamp_(max=reverses - 1)]
        indices[start : start + ids.numel()] = torch.where(
            is_forward, src[ids.clamp(max=num_edges - 1)], dst[reversed_of]
        )
    return indptr
