"""node2vec's step drawn from its exact distribution, for the walkers of
:class:`~graphemb.sampling.RandomWalker`'s pure-torch path whose proposals kept being
rejected.

Rejection sampling proposes a first-order step and accepts it with probability
``bias / max(1/p, 1, 1/q)``. Where every out-edge of a walker's node has a bias far below
that envelope (``p`` or ``q`` tiny, and no return or no far node to take), a step could
take millions of proposals. After a fixed number of them the walker draws instead from
the step's distribution itself: each out-edge ``e`` of ``v`` weighed by ``bias(x_e)``
(times ``w_e``, weighted). Either way the step's distribution is exact: rejection
sampling's accepted proposal follows it, whenever it stops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

__all__ = ["Node2vecRows", "exact_node2vec_step"]

#: Candidate edges weighed at once: the walkers are taken in groups whose rows hold at most
#: this many edges (a walker on a larger row alone).
_CANDIDATES = 1 << 22


class Node2vecRows(NamedTuple):
    """What an exact step reads of the walker's graph and parameters.

    Attributes
    ----------
    indptr, indices : Tensor of int64
        The CSR graph of the out-edges, rows sorted.
    cumulative : Tensor of float64 (E + 1,) or None
        Weighted walks: the prefix sums of the edge weights, with a leading 0.
    biases : (float, float, float)
        ``(1/p, 1, 1/q)``: the weights of a return, of a node at distance 1 from the
        previous node, and of one further away.
    is_edge : callable
        ``is_edge(src, dst)``: bool, whether each ``src[i] -> dst[i]`` is an edge.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    cumulative: torch.Tensor | None
    biases: tuple[float, float, float]
    is_edge: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def exact_node2vec_step(
    rows: Node2vecRows,
    came_from: torch.Tensor,
    here: torch.Tensor,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """The next node of each walker that came ``came_from[i] -> here[i]``.

    Parameters
    ----------
    rows : Node2vecRows
        The graph and the biases.
    came_from, here : Tensor of int64 (W,)
        Each walker's previous and current node; ``here[i]`` has an out-edge (of positive
        weight, weighted).
    generator : torch.Generator, optional
        Source of the uniform draws.

    Returns
    -------
    Tensor of int64 (W,)
    """
    begin, end = rows.indptr.index_select(0, here), rows.indptr.index_select(0, here + 1)
    degree = end - begin
    chosen = torch.empty_like(here)
    # groups of walkers whose rows hold at most _CANDIDATES edges (a hub's walker alone)
    group_of = torch.div(degree.cumsum(0) - degree, _CANDIDATES, rounding_mode="floor")
    for group in torch.unique(group_of).tolist():
        members = torch.nonzero(group_of == group).squeeze(1)
        chosen[members] = _draw(
            rows, came_from.index_select(0, members), begin.index_select(0, members),
            degree.index_select(0, members), generator,
        )  # fmt: skip
    return chosen


def _draw(
    rows: Node2vecRows,
    came_from: torch.Tensor,
    begin: torch.Tensor,
    degree: torch.Tensor,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """One group of walkers: every candidate edge weighed, each row's weights normalised
    to sum 1 (so that a running sum over all rows loses no row to the others' magnitude),
    then a uniform point of each row located among them."""
    device = begin.device
    walkers = begin.numel()
    owner = torch.repeat_interleave(torch.arange(walkers, device=device), degree)
    first = degree.cumsum(0) - degree  # each walker's first candidate
    position = torch.arange(owner.numel(), device=device)
    edge = begin.index_select(0, owner) + position - first.index_select(0, owner)
    candidate = rows.indices.index_select(0, edge)
    previous = came_from.index_select(0, owner)
    back, near, away = rows.biases
    weight = torch.where(rows.is_edge(previous, candidate), near, away).to(torch.float64)
    weight = torch.where(candidate == previous, back, weight)
    cumulative = rows.cumulative
    if cumulative is not None:
        weight = weight * (cumulative.index_select(0, edge + 1) - cumulative.index_select(0, edge))
    total = torch.zeros(walkers, dtype=torch.float64, device=device)
    total.index_add_(0, owner, weight)
    running = (weight / total.index_select(0, owner)).cumsum(0)
    uniform = torch.rand(walkers, dtype=torch.float64, device=device, generator=generator)
    point = first.to(torch.float64).zero_()
    has_before = first > 0
    point[has_before] = running.index_select(0, first[has_before] - 1)
    # the first candidate whose running sum passes the point, not past the row's last
    # candidate of positive weight (rounding may carry the point there)
    found = torch.searchsorted(running, point + uniform, right=True)
    positive = torch.where(weight > 0, position, -1)
    last = torch.full((walkers,), -1, dtype=torch.int64, device=device)
    last.scatter_reduce_(0, owner, positive, "amax")
    return candidate.index_select(0, torch.minimum(found, last))
