"""Out-neighbour arrays in the form random walks read them (:class:`OutAdjacency`): CSR rows,
sorted where a walk asks "is ``x`` a neighbour of ``t``?" (node2vec bisects a row), and for
weighted walks the prefix sums of the weights that an inverse-CDF draw searches.

:meth:`graphemb.graph.Graph.out_adjacency` builds it from the graph's CSR arrays.
"""

from __future__ import annotations

import dataclasses

import torch

__all__ = ["OutAdjacency", "build_out_adjacency"]


@dataclasses.dataclass(frozen=True)
class OutAdjacency:
    """A graph's out-edges, per node.

    Attributes
    ----------
    indptr : Tensor of int64 (N + 1,)
    indices : Tensor of int64 (E,)
        Node ``v``'s out-neighbours are ``indices[indptr[v]:indptr[v + 1]]`` (each row
        sorted when built with ``sort_rows``).
    cumulative : Tensor of float64 (E + 1,) or None
        Prefix sums of the weights in the order of ``indices``, with a leading 0: row
        ``v``'s edge ``e`` spans ``[cumulative[e], cumulative[e + 1])``. None if unweighted.
    last : Tensor of int64 (N,) or None
        Per node, the position in ``indices`` of its last edge of positive weight
        (``indptr[v] - 1`` where there is none). None if unweighted.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    cumulative: torch.Tensor | None = None
    last: torch.Tensor | None = None

    @property
    def degrees(self) -> torch.Tensor:
        """Out-edges a walk can follow from each node: int64 (N,), its out-degree, or 0
        where every out-edge weighs 0 (weighted). Computed on each access from
        :attr:`indptr` (and :attr:`last`): nothing per node is stored for it."""
        degrees = self.indptr[1:] - self.indptr[:-1]
        if self.last is None:
            return degrees
        return torch.where(self.last >= self.indptr[:-1], degrees, 0)


def build_out_adjacency(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    weight: torch.Tensor | None,
    *,
    sort_rows: bool,
) -> OutAdjacency:
    """:class:`OutAdjacency` of CSR arrays ``indptr`` (N + 1,), ``indices`` (E,) and
    ``weight`` (E,) or None; rows sorted if ``sort_rows`` (the weights permuted alike)."""
    if not sort_rows and weight is None:
        return OutAdjacency(indptr, indices)
    degrees = indptr[1:] - indptr[:-1]
    # the row of every edge, which both the sort and the last positive edge need
    rows = torch.repeat_interleave(torch.arange(degrees.numel(), device=indices.device), degrees)
    if sort_rows:
        indices, weight = _rows_sorted(indices, rows, degrees.numel(), weight)
    if weight is None:
        return OutAdjacency(indptr, indices)
    cumulative = torch.zeros(weight.numel() + 1, dtype=torch.float64, device=weight.device)
    torch.cumsum(weight.to(torch.float64), 0, out=cumulative[1:])
    positions = torch.arange(weight.numel(), device=weight.device)
    positive = weight > 0
    last = (indptr[:-1] - 1).scatter_reduce(0, rows[positive], positions[positive], reduce="amax")
    # Walks stop at nodes whose out-edges all weigh 0 (last < indptr): their "degree" is 0.
    return OutAdjacency(indptr, indices, cumulative, last)


def _rows_sorted(
    indices: torch.Tensor, rows: torch.Tensor, num_nodes: int, weight: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``indices`` with every CSR row sorted (``indices`` itself when they already are),
    and ``weight`` permuted alike; ``rows`` (E,) is the row of every edge."""
    if indices.numel() < 2:
        return indices, weight
    keys = rows * num_nodes + indices  # row-major order of (row, neighbour)
    if bool((keys[1:] >= keys[:-1]).all()):
        return indices, weight
    if weight is None:  # no permutation needed: half the sort's memory
        return torch.sort(keys).values - rows * num_nodes, None
    order = torch.argsort(keys, stable=True)
    return indices[order], weight[order]
