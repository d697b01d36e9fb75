"""What the compiled kernel reads of a run's corpus: each node's count and the noise
distribution, read in place from the graph wherever they can be.

word2vec counts its tokens; walks stand in with each node's in-degree (:class:`Corpus`).
On an unweighted graph those counts are the differences of the graph's own ``indptr``, and
the noise distribution ``count ** 0.75`` can be drawn from the graph's neighbour lists (a
node appears in them once per in-edge; ``SlotNoise``): then training holds no array of N
entries beyond the graph and the two tables, about 0.5 GiB less at 10M nodes than the keep
probabilities, the alias table and their construction's leftovers. Weighted walks count
weights, which no array of the graph holds: their counts and alias table are built.
"""

from __future__ import annotations

import dataclasses

import torch

from ..._native.skipgram import Noise, SlotNoise
from ...sampling.negatives import NegativeSampler
from ..corpus import Corpus

__all__ = [
    "ALIAS_COLUMNS_SHARE",
    "KernelInputs",
    "SlotPlan",
    "MIN_SLOT_ACCEPTANCE",
    "kernel_inputs",
    "slot_plan",
]

MIN_SLOT_ACCEPTANCE = 2 / 3
"""The share of slot draws that must be accepted on average for the noise to be drawn from
the graph's slots. An attempt reads two places in memory (the slot, then its node's count),
an alias draw three at once (its column in three arrays): below two thirds the slots would
cost more reads per draw (graphs whose edges mostly end at a few hubs); the alias table
serves them."""

ALIAS_COLUMNS_SHARE = 1 / 32
"""The most nodes (as a share of the graph's) whose lack the slots' alias table makes up:
the floor is the count below which fewer nodes than that lie, so that the table holds
under 1 byte a node."""


@dataclasses.dataclass(frozen=True)
class KernelInputs:
    """The kernel's arguments that describe the corpus.

    Attributes
    ----------
    counts : Tensor of int64 (N + 1,) or of float64 (N,)
        The graph's indptr (the counts are its differences) or the counts.
    subsample_threshold : float
        ``sample`` times the counts' total (0: no subsampling).
    noise : SlotNoise or (Tensor, Tensor, Tensor)
        The noise distribution: slots, or an alias table.
    """

    counts: torch.Tensor
    subsample_threshold: float
    noise: Noise


def kernel_inputs(corpus: Corpus, *, pooled: bool = True) -> KernelInputs:
    """The counts and the noise of ``corpus`` as the kernel reads them (see the module's
    docstring); the same distributions as ``corpus.keep`` and ``corpus.noise``.

    ``pooled``: whether the kernel keeps a pool of noise draws (``noise_pool > 0``), which
    resolves each draw in steps between other draws. Without one a draw is resolved where it
    is needed, and a slot's two dependent reads (the slot, then its node's count) cost more
    than the alias table's three side by side (0.85x the tokens/s on a 10k-node graph whose
    tables are in the cache); so the alias table serves, at most 24 bytes a node on tables
    small enough to be trained without a pool.
    """
    graph, sample = corpus.graph.to("cpu"), corpus.options.sample
    if corpus.options.weighted:
        counts = corpus.token_counts.contiguous()
        return KernelInputs(counts, sample * float(counts.sum()), _alias(corpus))
    indptr = graph.indptr.contiguous()
    total = int(indptr[-1] - indptr[0])
    plan = slot_plan(indptr) if total and pooled else None
    if plan is None or plan.acceptance < MIN_SLOT_ACCEPTANCE:
        return KernelInputs(indptr, sample * total, _alias(corpus))
    slots = graph.indices if graph.symmetric else graph.csr()[1]
    noise = SlotNoise(slots.contiguous(), plan.floor, graph.num_nodes, plan.alias, plan.share)
    return KernelInputs(indptr, sample * total, noise)


@dataclasses.dataclass(frozen=True)
class SlotPlan:
    """How :class:`SlotNoise` draws from a graph's slots: the floor, the expected share of
    slot attempts accepted, the alias table of what the nodes below the floor lack, and its
    probability."""

    floor: float
    acceptance: float  # the expected share of slot attempts accepted
    alias: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # what nodes below the floor lack
    share: float  # the alias table's probability


def slot_plan(indptr: torch.Tensor, floor: float | None = None) -> SlotPlan:
    """Slots for the counts of ``indptr`` (its differences, some positive): ``floor`` (by
    default the :data:`ALIAS_COLUMNS_SHARE` quantile of the positive counts), and the alias
    table of ``count ** 0.75 * floor ** 0.25 - count`` over the nodes below it."""
    counts = (indptr[1:] - indptr[:-1]).to(torch.float64)
    positive = counts[counts > 0]
    if floor is None:
        rank = max(1, int(positive.numel() * ALIAS_COLUMNS_SHARE))
        floor = float(positive.kthvalue(rank).values)
    scale = floor**0.25
    accepted = float(torch.where(positive >= floor, positive.pow(0.75) * scale, positive).sum())
    lack = torch.where((counts > 0) & (counts < floor), counts.pow(0.75) * scale - counts, 0.0)
    missing = float(lack.sum())
    empty = torch.zeros(0, dtype=torch.int64)
    alias = (empty, torch.zeros(0, dtype=torch.float64), empty)
    if missing > 0:
        nodes, keep, aliases = NegativeSampler(lack, power=1.0).alias_table
        alias = (nodes.contiguous(), keep.contiguous(), aliases.contiguous())
    share = missing / (accepted + missing)
    return SlotPlan(floor, accepted / float(positive.sum()), alias, share)


def _alias(corpus: Corpus) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    nodes, keep, alias = corpus.noise.alias_table
    return nodes.cpu().contiguous(), keep.cpu().contiguous(), alias.cpu().contiguous()
