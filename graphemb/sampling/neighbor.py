"""Uniform neighbour sampling without replacement, and multi-layer sampling into blocks.

On CPU, where ``graphemb_kernels`` is built with its sampler (csrc/graphemb_kernels/
sampler.cpp) and ``GRAPHEMB_DISABLE_KERNELS`` is not set, one compiled call draws and
relabels every layer: Floyd's algorithm per seed on the seed's own random stream (seeded
from one number drawn from ``generator``, so a sample does not depend on the thread
count), and a marker array of graph size, kept by the sampler between batches, for the
relabelling. What follows describes the pure-torch path, used on GPUs and otherwise; both
draw from the same distribution.

Everything is tensor code over all seeds at once -- no Python loop over seeds or edges --
and runs unchanged on CPU and CUDA graphs. Randomness comes only from the ``generator``
argument (or torch's default generator of the graph's device), so a seeded generator
reproduces a sample exactly.

How a seed's edges are drawn: every seed gets ``fanout`` slots. A seed of in-degree
``d > fanout`` fills them with ``fanout`` distinct offsets in ``[0, d)`` from Robert Floyd's
algorithm, vectorised over the seeds: ``fanout`` rounds, each one draw per seed plus a
check against the offsets taken so far (the bits of one int64 when ``d <= 64``, else
comparisons with the earlier rounds). The cost per seed is ``O(fanout)`` random numbers
whatever ``d`` is, so a hub with a million in-edges costs what a node with ``fanout + 1``
does and its other edges are never read. A seed with ``d <= fanout`` takes its whole
segment of the CSC arrays (drawn as a permutation of the slots, the invalid ones dropped).

Seeds of degree ``<= fanout`` draw nothing: unless nearly every seed is above the fanout,
output slots are laid out by segment and only the seeds above it are drawn and patched in.

Relabelling (the sampled sources to block-local ids, destination nodes first) marks the
sources in a byte per node and scans it, or sorts them when they are far fewer than the
nodes; a second array maps node ids to local ids. Both arrays are allocated once per
sampler and thread and cleaned after each layer.

On CPU no pass is split over torch's intra-op threads (each split ends in a barrier, and
under load every barrier waits for the scheduler): large passes run in pieces below
torch's grain size, spread over a few worker threads of the sampler's own.

Example
-------
>>> import torch
>>> from graphemb.graph import Graph
>>> from graphemb.sampling import NeighborSampler
>>> g = Graph.from_edges(torch.tensor([1, 2, 3, 3]), torch.tensor([0, 0, 0, 1]), num_nodes=4)
>>> gen = torch.Generator().manual_seed(0)
>>> input_nodes, output_nodes, blocks = NeighborSampler([2, 2]).sample_blocks(
...     g, torch.tensor([0]), generator=gen)
>>> [block.num_dst_nodes for block in blocks], blocks[-1].num_edges
([3, 1], 2)
>>> bool((blocks[0].dst_nodes == blocks[1].src_nodes).all())
True
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch

from .._checks import check_fanout, check_generator, check_seeds
from ..graph import Graph
from ._floyd import distinct_offsets
from ._kernels import compiled_sampling, draw_key
from ._pieces import (
    Scratch,
    copy,
    flatnonzero,
    gather,
    relabel,
    repeat_counts,
    repeat_each,
    run_pieces,
)
from .block import Block

__all__ = ["NeighborSampler", "sample_neighbors"]

# Relabelling finds the new source nodes of a layer either by marking them in a boolean
# array of one byte per node and scanning it (O(num_nodes), no sort) or by sorting them
# (torch.unique, O(n log n)). The scan wins unless the sampled edges are far fewer than the
# nodes (measured, 1M nodes: 61k edges 2.4 ms scanning, 2.9 ms sorting).
_SCAN_FRACTION = 64


def sample_neighbors(
    graph: Graph,
    seeds: torch.Tensor,
    fanout: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample up to ``fanout`` distinct in-edges of every seed, uniformly without replacement.

    A seed with in-degree ``d`` gets ``min(fanout, d)`` of its in-edges, each ``fanout``-
    subset equally likely; ``fanout=-1`` takes every in-edge. Parallel edges are distinct
    edges (distinct edge ids), so a seed may get the same source node twice.

    Parameters
    ----------
    graph : Graph
        The graph; sampling runs on its device.
    seeds : Tensor of integers, shape (B,)
        Node ids on the graph's device. Repeated seeds are sampled independently.
    fanout : int
        Number of in-edges per seed, ``>= 0``, or ``-1`` for all of them.
    generator : torch.Generator, optional
        Source of randomness, on the graph's device. Default: torch's default generator.

    Returns
    -------
    src, dst, edge_ids : Tensor of int64, shape (E,)
        Global ids of the sampled edges ``src -> dst`` and their edge ids, grouped by seed
        in the order of ``seeds`` (``dst`` is non-decreasing in seed position).

    Raises
    ------
    TypeError
        ``seeds`` is not an integer tensor, or ``fanout`` is not an integer.
    ValueError
        ``seeds`` is not 1-D, lies on another device than the graph or holds an id outside
        ``[0, num_nodes)``; ``fanout < -1``; ``generator`` lies on another device.

    Examples
    --------
    >>> import torch
    >>> from graphemb.graph import Graph
    >>> g = Graph.from_edges(torch.tensor([1, 2, 3, 0]), torch.tensor([0, 0, 0, 1]))
    >>> src, dst, eids = sample_neighbors(g, torch.tensor([1, 0]), 2,
    ...                                   generator=torch.Generator().manual_seed(0))
    >>> dst.tolist(), src.numel()
    ([1, 0, 0], 3)
    >>> sample_neighbors(g, torch.tensor([1, 0]), -1)[0].tolist()
    [0, 1, 2, 3]
    """
    fanout = check_fanout("fanout", fanout)
    check_graph(graph)
    seeds = check_seeds(seeds, graph.num_nodes, graph.device)
    check_generator(generator, graph.device)
    module = compiled_sampling(graph, "sample_blocks")
    if module is not None:
        src, seed_position, positions = module.sample_layer(
            graph.indptr.contiguous(),
            graph.indices.contiguous(),
            seeds,
            fanout,
            draw_key(generator),
        )
    else:
        src, seed_position, positions = _sample_edges(graph, seeds, fanout, generator)
    return src, seeds.index_select(0, seed_position), graph.edge_ids.index_select(0, positions)


class NeighborSampler:
    """Multi-layer neighbour sampling into blocks, as DGL's ``NeighborSampler``.

    Parameters
    ----------
    fanouts : sequence of int
        In-edges sampled per node for each layer, input layer first (DGL's order):
        ``fanouts[i]`` is used for ``blocks[i]``. Each is ``>= 0`` or ``-1`` (all in-edges);
        ``0`` gives a layer without edges. At least one layer.

    Raises
    ------
    ValueError, TypeError
        A fanout is not an integer, or is below ``-1`` (the message names it), or
        ``fanouts`` is empty.

    Examples
    --------
    >>> import torch
    >>> from graphemb.graph import Graph
    >>> g = Graph.from_edges(torch.tensor([1, 2, 2]), torch.tensor([0, 1, 0]))
    >>> _, _, blocks = NeighborSampler([-1]).sample_blocks(g, torch.tensor([0]))
    >>> blocks[0].src_nodes.tolist(), blocks[0].edge_index.tolist()
    ([0, 1, 2], [[1, 2], [0, 0]])
    """

    def __init__(self, fanouts: Sequence[int]) -> None:
        if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence):
            raise TypeError(f"fanouts must be a sequence of integers, got {fanouts!r}")
        if len(fanouts) == 0:
            raise ValueError("fanouts must name at least one layer, got an empty sequence")
        self.fanouts = [check_fanout(f"fanouts[{i}]", f) for i, f in enumerate(fanouts)]
        # Per-thread scratch arrays of graph size (a prefetching thread has its own).
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"NeighborSampler(fanouts={self.fanouts})"

    def __getstate__(self) -> dict[str, Any]:  # picklable for DataLoader workers
        return {"fanouts": self.fanouts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.fanouts = state["fanouts"]
        self._local = threading.local()

    def sample_blocks(
        self,
        graph: Graph,
        seeds: torch.Tensor,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, list[Block]]:
        """Sample one block per layer, from the seeds outwards.

        Parameters
        ----------
        graph : Graph
            The graph; sampling runs on its device.
        seeds : Tensor of integers, shape (B,)
            Distinct node ids on the graph's device: the output nodes.
        generator : torch.Generator, optional
            Source of randomness, on the graph's device. Default: torch's default generator.

        Returns
        -------
        input_nodes : Tensor of int64, shape (S_0,)
            ``blocks[0].src_nodes``: the nodes whose input features the model reads.
        output_nodes : Tensor of int64, shape (B,)
            The seeds, ``blocks[-1].dst_nodes``.
        blocks : list of Block
            Innermost last. Layer ``i``'s destination nodes are the source nodes of block
            ``i + 1`` (``blocks[i].dst_nodes == blocks[i + 1].src_nodes``), and in each
            block the destination nodes come first among the sources, followed by the new
            source nodes in increasing id order. Edges are sorted by destination.

        Raises
        ------
        TypeError, ValueError
            Bad ``seeds`` (not integer, not 1-D, wrong device, out of range, repeated: the
            message names the bad id) or ``generator`` on another device. Nothing is drawn
            from the generator then.
        """
        check_graph(graph)
        seeds = check_seeds(seeds, graph.num_nodes, graph.device)
        check_generator(generator, graph.device)
        module = compiled_sampling(graph, "sample_blocks")
        if module is not None:
            return self._sample_compiled(module, graph, seeds, generator)
        scratch = self._scratch(graph)
        try:
            _check_distinct(seeds, scratch.local_id)
            blocks: list[Block] = []
            frontier = seeds
            for fanout in reversed(self.fanouts):
                src, dst_local, positions = _sample_edges(graph, frontier, fanout, generator)
                edge_index = torch.empty((2, src.numel()), dtype=torch.int64, device=src.device)
                src_nodes = relabel(frontier, src, scratch, edge_index[0], _SCAN_FRACTION)
                copy(edge_index[1], dst_local)
                block = Block._with_edge_positions(
                    src_nodes, frontier.numel(), edge_index, graph.edge_ids, positions
                )
                blocks.insert(0, block)
                frontier = src_nodes
        except BaseException:
            self._local.scratch = None  # may be left dirty: rebuild on the next call
            raise
        return blocks[0].src_nodes, seeds, blocks

    def _sample_compiled(
        self,
        module: Any,
        graph: Graph,
        seeds: torch.Tensor,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor, list[Block]]:
        """``sample_blocks`` by ``graphemb_kernels.sample_blocks``: all layers in one call,
        relabelled with a marker array of graph size (scratch space: whatever the last call
        left in it)."""
        marker = getattr(self._local, "marker", None)
        if marker is None or marker.numel() != graph.num_nodes:
            dtype = torch.int32 if graph.num_nodes < 2**31 else torch.int64
            marker = torch.empty((graph.num_nodes,), dtype=dtype)
            self._local.marker = marker
        _check_distinct(seeds, marker)
        layers = module.sample_blocks(
            graph.indptr.contiguous(),
            graph.indices.contiguous(),
            seeds,
            list(reversed(self.fanouts)),
            draw_key(generator),
            marker,
            _SCAN_FRACTION,
        )
        blocks: list[Block] = []
        num_dst = seeds.numel()
        for src_nodes, edge_index, positions, row_pointers in layers:
            block = Block._with_edge_positions(
                src_nodes, num_dst, edge_index, graph.edge_ids, positions, row_pointers
            )
            blocks.insert(0, block)
            num_dst = src_nodes.numel()
        return blocks[0].src_nodes, seeds, blocks

    def _scratch(self, graph: Graph) -> Scratch:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None or not scratch.fits(graph.num_nodes, graph.device):
            scratch = Scratch(graph.num_nodes, graph.device)
            self._local.scratch = scratch
        return scratch


def _sample_edges(
    graph: Graph, seeds: torch.Tensor, fanout: int, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(src, seed_position, position)`` of the sampled in-edges, grouped by seed:
    ``position`` indexes the graph's CSC arrays (``graph.edge_ids[position]`` are the ids)."""
    device = seeds.device
    num_seeds = seeds.numel()
    # Row v of this view is (indptr[v], indptr[v + 1]): both ends in one gather.
    bounds = torch.as_strided(graph.indptr, (graph.num_nodes, 2), (1, 1))
    ends = torch.empty((num_seeds, 2), dtype=torch.int64, device=device)
    degree, counts = torch.empty_like(seeds), torch.empty_like(seeds)
    totals = []

    def read_degrees(rows: slice) -> None:
        torch.index_select(bounds, 0, seeds[rows], out=ends[rows])
        torch.sub(ends[rows, 1], ends[rows, 0], out=degree[rows])
        if fanout >= 0:
            torch.clamp(degree[rows], max=fanout, out=counts[rows])
        else:
            counts[rows] = degree[rows]
        totals.append(counts[rows].sum())

    run_pieces(read_degrees, num_seeds, device, row_size=2)
    start = ends[:, 0]
    total = int(sum(totals)) if totals else 0
    if total == 0:
        empty = seeds.new_empty(0)
        return empty, empty, empty
    if fanout >= 0 and num_seeds * fanout <= _DENSE_SLACK * total:
        position, seed_position = _dense_slots(degree, ends, fanout, total, generator)
    else:
        position, seed_position = _segment_slots(
            seeds, degree, counts, start, fanout, total, generator
        )
    return gather(graph.indices, position), seed_position, position


def _dense_slots(
    degree: torch.Tensor,
    ends: torch.Tensor,
    fanout: int,
    total: int,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_sample_edges`' ``(position, seed_position)`` in the dense layout."""
    num_seeds, device, start = degree.numel(), degree.device, ends[:, 0]
    # Dense layout: `fanout` slots per seed. A seed of degree d <= fanout draws a
    # permutation of the slots and keeps those below d: its whole segment, with no
    # separate code path (and no pass to pick rows) for the two cases.
    wide = torch.empty_like(degree)
    run_pieces(
        lambda rows: torch.clamp(degree[rows], min=fanout, out=wide[rows]), num_seeds, device
    )
    position = distinct_offsets(wide, fanout, generator, start)
    if total == num_seeds * fanout:  # every seed has >= fanout in-edges
        position = position.view(-1)
        seed_position = repeat_each(num_seeds, fanout, device)
    else:
        keep = torch.empty((num_seeds, fanout), dtype=torch.bool, device=device)
        run_pieces(
            lambda rows: torch.lt(position[rows], ends[rows, 1:], out=keep[rows]),
            num_seeds,
            device,
            row_size=fanout,
        )  # slot offset < degree
        # (masked_select makes extra copies on CPU: ~2x slower than this)
        kept = flatnonzero(keep.view(-1))
        position = gather(position.view(-1), kept)
        seed_position = torch.empty_like(kept)
        run_pieces(
            lambda part: torch.div(
                kept[part], fanout, rounding_mode="floor", out=seed_position[part]
            ),
            kept.numel(),
            device,
        )
    return position, seed_position


def _segment_slots(
    seeds: torch.Tensor,
    degree: torch.Tensor,
    counts: torch.Tensor,
    start: torch.Tensor,
    fanout: int,
    total: int,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_sample_edges`' ``(position, seed_position)`` in the segment layout."""
    num_seeds, device = seeds.numel(), seeds.device
    # Segment layout (fanout -1, or fanouts far above the degrees): output slot q of
    # seed s reads edge start[s] + (q - out_start[s]), then the drawn seeds are patched.
    out_start = torch.cumsum(counts, 0)  # (a serial pass in torch)
    shift = torch.empty_like(counts)

    def shifts(rows: slice) -> None:
        out_start[rows] -= counts[rows]
        torch.sub(start[rows], out_start[rows], out=shift[rows])

    run_pieces(shifts, num_seeds, device)
    seed_position = repeat_counts(counts, out_start, total, fanout)  # seed of each slot
    position = torch.empty(total, dtype=torch.int64, device=device)

    def read_segments(slots: slice) -> None:
        torch.index_select(shift, 0, seed_position[slots], out=position[slots])
        position[slots] += torch.arange(
            slots.start, slots.start + position[slots].numel(), device=device
        )

    run_pieces(read_segments, total, device)
    over = seeds[:0]
    if fanout > 0:
        above = torch.empty(num_seeds, dtype=torch.bool, device=device)
        run_pieces(lambda rows: torch.gt(degree[rows], fanout, out=above[rows]), num_seeds, device)
        over = flatnonzero(above)
    if over.numel():
        drawn = distinct_offsets(gather(degree, over), fanout, generator, gather(start, over))
        columns = torch.arange(fanout, device=device)

        def patch(rows: slice) -> None:
            slots = out_start.index_select(0, over[rows]).unsqueeze(1) + columns
            position.index_copy_(0, slots.view(-1), drawn[rows].reshape(-1))

        run_pieces(patch, over.numel(), device, row_size=fanout)
    return position, seed_position


# The dense layout gives every seed `fanout` slots and runs Floyd's rounds on all of them,
# also on seeds of degree <= fanout (a permutation of the slots, then the empty ones
# dropped). Worth it only while the slots are at most this many times the sampled edges:
# else the segment layout, which draws only for the seeds above the fanout, wins (measured
# on power-law graphs, where most nodes have few in-edges: 1.5 slots per edge, blocks
# 15,10,5 ~25% faster; on a uniform graph, 1.02 slots per edge, the dense layout is ahead).
_DENSE_SLACK = 1.1


# ---------------------------------------------------------------------------- validation
def _check_distinct(seeds: torch.Tensor, table: torch.Tensor) -> None:
    """Repeated seeds are found in O(B) without sorting: after scattering every position
    to its node's slot of ``table`` (graph size), a repeated node's slot holds only one
    of its positions."""
    positions = torch.arange(seeds.numel(), device=seeds.device, dtype=table.dtype)
    table.index_copy_(0, seeds, positions)
    clash = table.index_select(0, seeds) != positions
    if bool(clash.any()):
        repeated = int(seeds[clash][0])
        raise ValueError(f"seeds must be distinct, but node {repeated} appears more than once")


def check_graph(graph: object) -> None:
    """``TypeError`` unless ``graph`` is a graphemb :class:`~graphemb.graph.Graph`."""
    if not isinstance(graph, Graph):
        raise TypeError(f"expected a graphemb Graph, got {type(graph).__name__}")
