"""What the compiled kernel reads of a run's corpus: each node's count and the noise
distribution, read in place from the graph wherever they can be.

word2vec counts its tokens; walks stand in with each node's in-degree (:class:`Corpus`).
On an unweighted graph those counts are the differences of the graph's own ``indptr``, and
the noise distribution ``count ** 0.75`` can be drawn from the graph's neighbour lists (a
node appears in them once per in-edge; ``SlotNoise``), what the rarest nodes lack by
rejection from uniform nodes: then training holds no array of N entries beyond the graph
and the two tables, about 0.5 GiB less at 10M nodes than the keep probabilities, the alias
table and their construction's leftovers. Planning the slots reads the counts a block at a
time, so that no temporary of N entries is left in the allocator's free memory either.
Weighted walks count weights, which no array of the graph holds: their counts and alias
table are built.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import torch

from ..._native.skipgram import Noise, SlotNoise
from ...sampling.negatives import NegativeSampler
from ..corpus import Corpus

__all__ = [
    "ALIAS_COLUMNS_SHARE",
    "FLOOR_CAP",
    "KernelInputs",
    "MAX_UNIFORM_ATTEMPTS",
    "MIN_SLOT_ACCEPTANCE",
    "PLAN_BLOCK",
    "SlotPlan",
    "default_floor",
    "kernel_inputs",
    "lack_bound",
    "slot_plan",
]

MIN_SLOT_ACCEPTANCE = 2 / 3
"""The share of slot draws that must be accepted on average for the noise to be drawn from
the graph's slots. An attempt reads two places in memory (the slot, then its node's count),
an alias draw three at once (its column in three arrays): below two thirds the slots would
cost more reads per draw (graphs whose edges mostly end at a few hubs); the alias table
serves them."""

ALIAS_COLUMNS_SHARE = 1 / 32
"""The floor's quantile: at most this share of the nodes of a positive count lie below the
floor, whose lack is drawn apart (by rejection, or from an alias table of under 1 byte a
node)."""

MAX_UNIFORM_ATTEMPTS = 1 / 4
"""The most uniform nodes a noise draw may try, on average, for the nodes below the floor
to be drawn by rejection (no alias table): each try reads one count, and a slot draw reads
two places per attempt, so a quarter of a try is at most a tenth more reads per draw.
Graphs whose nodes mostly have no in-edge, or whose nodes below the floor lack little,
would try more: an alias table over those nodes serves them."""

PLAN_BLOCK = 1 << 12
"""Nodes whose counts :func:`slot_plan` reads at a time, into a few arrays of this many
entries (32 KiB each) allocated once and freed together, so that they leave nothing
resident in the C heap through training."""

FLOOR_CAP = 1 << 12
"""The count from which :func:`default_floor`'s histogram lumps counts into one bin (a
histogram of 32 KiB). Any floor draws the same distribution; a floor capped here only
accepts fewer slot draws, on graphs where more than 97 % of the nodes have 4096 in-edges or
more."""


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
    noise = SlotNoise(
        slots.contiguous(), plan.floor, graph.num_nodes, plan.alias, plan.share, plan.lack_bound
    )
    return KernelInputs(indptr, sample * total, noise)


@dataclasses.dataclass(frozen=True)
class SlotPlan:
    """How :class:`SlotNoise` draws from a graph's slots: the floor, the expected share of
    slot attempts accepted, the probability of a draw below the floor, and how those draws
    are made (by rejection from uniform nodes, or from an alias table)."""

    floor: float
    acceptance: float  # the expected share of slot attempts accepted
    share: float  # the probability of a draw below the floor
    lack_bound: float  # > 0: draws below the floor by rejection, at most every lack(c)
    alias: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # else their alias table


def slot_plan(
    indptr: torch.Tensor, floor: float | None = None, *, rejection: bool | None = None
) -> SlotPlan:
    """Slots for the counts of ``indptr`` (its differences, some positive): ``floor`` (by
    default the :data:`ALIAS_COLUMNS_SHARE` quantile of the positive counts, see
    :func:`default_floor`), and how what the nodes below it lack,
    ``lack(c) = c ** 0.75 * floor ** 0.25 - c``, is drawn.

    ``rejection``: True draws it by rejection from uniform nodes (no table), False from an
    alias table over the nodes below the floor; None (default) by rejection wherever that
    costs at most :data:`MAX_UNIFORM_ATTEMPTS` expected attempts per noise draw.

    The counts are read :data:`PLAN_BLOCK` nodes at a time: no temporary array of N entries,
    whose freed memory the C allocator would keep (33 MiB at 10M nodes) while the tables
    are allocated beside it.
    """
    floor = default_floor(indptr) if floor is None else floor
    scale = floor**0.25
    # the plan's empty table, made before the blocks' temporaries: made after them, its
    # small allocations would sit among their freed pages and keep them resident
    empty = torch.zeros(0, dtype=torch.int64)
    alias = (empty, torch.zeros(0, dtype=torch.float64), empty)
    accepted, positive, missing = _plan_sums(indptr, floor, scale)
    share = missing / (accepted + missing)
    if missing == 0:
        return SlotPlan(floor, accepted / positive, 0.0, 0.0, alias)
    bound = lack_bound(floor)
    # A uniform node is accepted with probability lack(count) / bound on average over all N.
    attempts = share * (indptr.numel() - 1) * bound / missing
    if rejection or (rejection is None and attempts <= MAX_UNIFORM_ATTEMPTS):
        return SlotPlan(floor, accepted / positive, share, bound, alias)
    nodes, lack = _below_floor(indptr, floor, scale)
    columns, keep, aliases = NegativeSampler(lack, power=1.0).alias_table
    alias = (nodes.index_select(0, columns), keep.contiguous(), nodes.index_select(0, aliases))
    return SlotPlan(floor, accepted / positive, share, 0.0, alias)


def _plan_sums(indptr: torch.Tensor, floor: float, scale: float) -> tuple[float, float, float]:
    """Over the nodes of ``indptr``'s counts ``c``: the slot draws accepted (``c`` at or
    above ``floor``, ``c ** 0.75 * scale`` below), the counts, and what the nodes below the
    floor lack (``c ** 0.75 * scale - c``, 0 for ``c = 0``).

    Each block is computed into arrays allocated once: blocks' temporaries made and freed
    one after another land among the allocator's small blocks, and pages they share stay
    resident through training (44 KiB at 10M nodes)."""
    size = max(1, min(PLAN_BLOCK, indptr.numel() - 1))
    count, weight, term = (torch.empty(size, dtype=torch.float64) for _ in range(3))
    high = torch.empty(size, dtype=torch.bool)
    accepted = positive = missing = 0.0
    for _, block in _count_blocks(indptr):
        n = block.numel()
        c, w, t, h = count[:n].copy_(block), weight[:n], term[:n], high[:n]
        torch.pow(c, 0.75, out=w).mul_(scale)
        torch.ge(c, floor, out=h)
        accepted += float(torch.where(h, w, c, out=t).sum())
        positive += float(c.sum())
        missing += float(torch.sub(w, c, out=t).mul_(h.logical_not_()).sum())
    return accepted, positive, missing


def lack_bound(floor: float) -> float:
    """The largest ``lack(c) = c ** 0.75 * floor ** 0.25 - c`` over the counts ``c`` that can
    lie below ``floor`` (the integers in ``[1, floor)``), computed as the kernel computes
    ``lack`` (``csrc/skipgram/tables.h``)."""
    quarter = floor**0.25
    return max((c**0.75 * quarter - c for c in range(1, math.ceil(floor))), default=0.0)


def default_floor(indptr: torch.Tensor) -> float:
    """The :data:`ALIAS_COLUMNS_SHARE` quantile of the positive counts of ``indptr``: the
    ``k``-th smallest, ``k = max(1, int(positive nodes * ALIAS_COLUMNS_SHARE))``, from a
    histogram of the counts in which counts from :data:`FLOOR_CAP` up share one bin (a floor
    that high is ``FLOOR_CAP``: any floor draws the same distribution)."""
    histogram = torch.zeros(FLOOR_CAP + 1, dtype=torch.int64)
    for _, counts in _count_blocks(indptr):
        block = torch.bincount(counts.clamp_(max=FLOOR_CAP))  # up to the block's largest
        histogram[: block.numel()] += block
    below = histogram[1:].cumsum(0)  # positive nodes of count at most 1, 2, ...
    rank = max(1, int(int(below[-1]) * ALIAS_COLUMNS_SHARE))
    return float(int(torch.searchsorted(below, rank)) + 1)


def _below_floor(
    indptr: torch.Tensor, floor: float, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The nodes of a positive count below ``floor`` (int64) and what each lacks,
    ``count ** 0.75 * scale - count`` (float64), counted, then written block by block into
    arrays allocated once: pieces kept from each block, between the blocks' freed
    temporaries, would leave the allocator's heap fragmented (24 MiB at 10M nodes)."""
    size = sum(int(((counts > 0) & (counts < floor)).sum()) for _, counts in _count_blocks(indptr))
    nodes = torch.empty(size, dtype=torch.int64)
    lack = torch.empty(size, dtype=torch.float64)
    at = 0
    for start, counts in _count_blocks(indptr):
        found = torch.nonzero((counts > 0) & (counts < floor)).view(-1)
        low = counts.index_select(0, found).to(torch.float64)
        nodes[at : at + found.numel()] = found.add_(start)
        lack[at : at + found.numel()] = low.pow(0.75).mul_(scale).sub_(low)
        at += found.numel()
    return nodes, lack


def _count_blocks(indptr: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
    """``(first node, counts)`` of :data:`PLAN_BLOCK` nodes at a time (int64), each block
    computed into one array allocated once: a block is a view of it, valid until the next
    block is drawn."""
    num_nodes = indptr.numel() - 1
    buffer = torch.empty(max(0, min(PLAN_BLOCK, num_nodes)), dtype=torch.int64)
    for start in range(0, num_nodes, PLAN_BLOCK):
        stop = min(start + PLAN_BLOCK, num_nodes)
        yield (
            start,
            torch.sub(indptr[start + 1 : stop + 1], indptr[start:stop], out=buffer[: stop - start]),
        )


def _alias(corpus: Corpus) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    nodes, keep, alias = corpus.noise.alias_table
    return nodes.cpu().contiguous(), keep.cpu().contiguous(), alias.cpu().contiguous()
