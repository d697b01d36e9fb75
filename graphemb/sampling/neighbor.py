"""Uniform neighbour sampling without replacement, and multi-layer sampling into blocks.

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

import numbers
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from .._checks import check_node_id_vector, check_node_ids
from ..graph import Graph
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
    fanout = _check_fanout("fanout", fanout)
    _check_graph(graph)
    seeds = _check_seeds(graph, seeds)
    _check_generator(graph, generator)
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
        self.fanouts = [_check_fanout(f"fanouts[{i}]", f) for i, f in enumerate(fanouts)]
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
        _check_graph(graph)
        seeds = _check_seeds(graph, seeds)
        _check_generator(graph, generator)
        scratch = self._scratch(graph)
        try:
            _check_distinct(seeds, scratch)
            blocks: list[Block] = []
            frontier = seeds
            for fanout in reversed(self.fanouts):
                src, dst_local, positions = _sample_edges(graph, frontier, fanout, generator)
                edge_index = torch.empty((2, src.numel()), dtype=torch.int64, device=src.device)
                src_nodes = _relabel(frontier, src, scratch, edge_index[0])
                _copy(edge_index[1], dst_local)
                block = Block._with_edge_positions(
                    src_nodes, frontier.numel(), edge_index, graph.edge_ids, positions
                )
                blocks.insert(0, block)
                frontier = src_nodes
        except BaseException:
            self._local.scratch = None  # may be left dirty: rebuild on the next call
            raise
        return blocks[0].src_nodes, seeds, blocks

    def _scratch(self, graph: Graph) -> _Scratch:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None or not scratch.fits(graph):
            scratch = _Scratch(graph.num_nodes, graph.device)
            self._local.scratch = scratch
        return scratch


class _Scratch:
    """Arrays of graph size reused across calls (allocating them per layer would cost
    O(num_nodes) each time): ``marks`` is all False between uses, ``local_id`` holds
    garbage outside the entries a call writes before it reads them."""

    def __init__(self, num_nodes: int, device: torch.device) -> None:
        self.marks = torch.zeros(num_nodes, dtype=torch.bool, device=device)
        # int32 where it fits: the relabel's random reads then touch half the memory
        # (measured ~1.5x faster gathers, the cast to int64 included)
        dtype = torch.int32 if num_nodes < 2**31 else torch.int64
        self.local_id = torch.empty(num_nodes, dtype=dtype, device=device)

    def fits(self, graph: Graph) -> bool:
        return self.marks.numel() == graph.num_nodes and self.marks.device == graph.device


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

    _run_pieces(read_degrees, num_seeds, device, row_size=2)
    start = ends[:, 0]
    total = int(sum(totals)) if totals else 0
    if total == 0:
        empty = seeds.new_empty(0)
        return empty, empty, empty
    if fanout >= 0 and num_seeds * fanout <= _DENSE_SLACK * total:
        # Dense layout: `fanout` slots per seed. A seed of degree d <= fanout draws a
        # permutation of the slots and keeps those below d: its whole segment, with no
        # separate code path (and no pass to pick rows) for the two cases.
        wide = torch.empty_like(degree)
        _run_pieces(
            lambda rows: torch.clamp(degree[rows], min=fanout, out=wide[rows]), num_seeds, device
        )
        position = _distinct_offsets(wide, fanout, generator, start)
        if total == num_seeds * fanout:  # every seed has >= fanout in-edges
            position = position.view(-1)
            seed_position = _repeat_each(num_seeds, fanout, device)
        else:
            keep = torch.empty((num_seeds, fanout), dtype=torch.bool, device=device)
            _run_pieces(
                lambda rows: torch.lt(position[rows], ends[rows, 1:], out=keep[rows]),
                num_seeds,
                device,
                row_size=fanout,
            )  # slot offset < degree
            # (masked_select makes extra copies on CPU: ~2x slower than this)
            kept = _flatnonzero(keep.view(-1))
            position = _gather(position.view(-1), kept)
            seed_position = torch.empty_like(kept)
            _run_pieces(
                lambda part: torch.div(
                    kept[part], fanout, rounding_mode="floor", out=seed_position[part]
                ),
                kept.numel(),
                device,
            )
    else:
        # Segment layout (fanout -1, or fanouts far above the degrees): output slot q of
        # seed s reads edge start[s] + (q - out_start[s]), then the drawn seeds are patched.
        out_start = torch.cumsum(counts, 0)  # (a serial pass in torch)
        shift = torch.empty_like(counts)

        def shifts(rows: slice) -> None:
            out_start[rows] -= counts[rows]
            torch.sub(start[rows], out_start[rows], out=shift[rows])

        _run_pieces(shifts, num_seeds, device)
        seed_position = _repeat_counts(counts, out_start, total, fanout)  # seed of each slot
        position = torch.empty(total, dtype=torch.int64, device=device)

        def read_segments(slots: slice) -> None:
            torch.index_select(shift, 0, seed_position[slots], out=position[slots])
            position[slots] += torch.arange(
                slots.start, slots.start + position[slots].numel(), device=device
            )

        _run_pieces(read_segments, total, device)
        over = seeds[:0]
        if fanout > 0:
            above = torch.empty(num_seeds, dtype=torch.bool, device=device)
            _run_pieces(
                lambda rows: torch.gt(degree[rows], fanout, out=above[rows]), num_seeds, device
            )
            over = _flatnonzero(above)
        if over.numel():
            drawn = _distinct_offsets(
                _gather(degree, over), fanout, generator, _gather(start, over)
            )
            columns = torch.arange(fanout, device=device)

            def patch(rows: slice) -> None:
                slots = out_start.index_select(0, over[rows]).unsqueeze(1) + columns
                position.index_copy_(0, slots.view(-1), drawn[rows].reshape(-1))

            _run_pieces(patch, over.numel(), device, row_size=fanout)
    return _gather(graph.indices, position), seed_position, position


# The dense layout gives every seed `fanout` slots and runs Floyd's rounds on all of them,
# also on seeds of degree <= fanout (a permutation of the slots, then the empty ones
# dropped). Worth it only while the slots are at most this many times the sampled edges:
# else the segment layout, which draws only for the seeds above the fanout, wins (measured
# on power-law graphs, where most nodes have few in-edges: 1.5 slots per edge, blocks
# 15,10,5 ~25% faster; on a uniform graph, 1.02 slots per edge, the dense layout is ahead).
_DENSE_SLACK = 1.1

# A row's taken offsets fit in the bits of one int64 while its degree is at most 64.
_BITSET_DEGREE = 64


def _distinct_offsets(
    degree: torch.Tensor, k: int, generator: torch.Generator | None, base: torch.Tensor
) -> torch.Tensor:
    """``base[r] + o`` for ``k`` distinct uniform offsets ``o`` in ``[0, degree[r])`` of
    every row ``r`` (all ``degree >= k``), shape (R, k), row-major.

    Floyd's algorithm: in round ``i``, for ``j = d - k + i``, draw ``t`` uniform in
    ``[0, j]`` and take ``t`` unless it was taken already, else ``j`` (which cannot have
    been). Every k-subset comes out with probability ``1 / C(d, k)``; the order within a
    row is not uniform. Rows of degree <= 64 keep their taken set as the bits of an int64
    (O(k) per row); larger degrees compare with the earlier rounds (O(k**2) per row).
    """
    rows = degree.numel()
    device = degree.device
    out = torch.empty((rows, k), dtype=torch.int64, device=device)
    for columns in _serial_chunks(rows, device):
        part_degree = degree[columns]
        chosen = torch.empty((k, part_degree.numel()), dtype=torch.int64, device=device)
        low, high = (int(v) for v in torch.aminmax(part_degree))
        if high <= _BITSET_DEGREE:
            _floyd_bitset(chosen, part_degree, generator)
        elif low > _BITSET_DEGREE:
            _floyd_compare(chosen, part_degree, generator)
        else:
            small = part_degree <= _BITSET_DEGREE
            for rows_of, floyd in ((small, _floyd_bitset), (~small, _floyd_compare)):
                index = _flatnonzero(rows_of)
                some = torch.empty((k, index.numel()), dtype=torch.int64, device=device)
                floyd(some, part_degree.index_select(0, index), generator)
                chosen.index_copy_(1, index, some)
        # transpose to row-major while the chunk is still in cache
        _add_column(out[columns], chosen.t(), base[columns])
    return out


def _floyd_bitset(
    chosen: torch.Tensor, degree: torch.Tensor, generator: torch.Generator | None
) -> None:
    """Floyd's rounds into ``chosen`` (k, R) for degrees <= 64, the taken set as the bits
    of an int64 per row."""
    k, rows = chosen.shape
    # Three rounds per random float64: a round's draw floor(u * (j + 1)) uses at most 6 of
    # u's 53 random bits, and frac(u * (j + 1)) is again uniform on [0, 1), to 2**-47; the
    # third draw is uniform to ~2**-35. (The generator is the slowest step on CPU.)
    draws = torch.rand(
        (-(-k // 3), rows), dtype=torch.float64, device=chosen.device, generator=generator
    )
    one = torch.ones((), dtype=torch.int64, device=chosen.device)
    taken = torch.zeros(rows, dtype=torch.int64, device=chosen.device)
    size = degree.to(torch.float64)
    for i in range(k):
        u = draws[i // 3]
        t = _floyd_draw(chosen, u, size, i)
        if i % 3 != 2:
            u.frac_()
        if i:
            clash = torch.bitwise_right_shift(taken, t).bitwise_and_(1).bool()
            torch.where(clash, degree + (i - k), t, out=t)
        if i < k - 1:
            taken.bitwise_or_(torch.bitwise_left_shift(one, t))


def _floyd_compare(
    chosen: torch.Tensor, degree: torch.Tensor, generator: torch.Generator | None
) -> None:
    """Floyd's rounds into ``chosen`` (k, R) for any degree, comparing with the earlier
    rounds; one random float64 per round (53 bits: uniform to ~2**-40 for any degree)."""
    k, rows = chosen.shape
    draws = torch.rand((k, rows), dtype=torch.float64, device=chosen.device, generator=generator)
    size = degree.to(torch.float64)
    for i in range(k):
        t = _floyd_draw(chosen, draws[i], size, i)
        if i:
            clash = (chosen[:i] == t).any(0)
            torch.where(clash, degree + (i - k), t, out=t)


def _floyd_draw(chosen: torch.Tensor, u: torch.Tensor, size: torch.Tensor, i: int) -> torch.Tensor:
    """Round ``i``'s draw, ``floor(u * (j + 1))`` uniform in ``[0, j]``, written to
    ``chosen[i]`` and returned; ``u`` becomes ``u * (j + 1)``."""
    t = chosen[i]
    # u < 1, so u * (j + 1) < j + 1 exactly; the cast truncates (floor for u >= 0)
    t.copy_(u.mul_(size + (i - chosen.shape[0] + 1)))
    return t


# Floyd's rounds are many light passes over the rows. On CPU they run on chunks small
# enough for torch to keep each pass on the calling thread: a pass split over threads ends
# in a barrier, and when another process holds a core every barrier waits for the
# scheduler (measured: ~10x slower per pass on 2 busy cores). GPUs take all rows at once.
_SERIAL_ROWS = 16384


def _serial_chunks(rows: int, device: torch.device) -> list[slice]:
    step = rows if device.type == "cuda" else _SERIAL_ROWS
    return [slice(begin, begin + step) for begin in range(0, rows, max(step, 1))]


def _flatnonzero(mask: torch.Tensor) -> torch.Tensor:
    """Positions of the True entries of a 1-D bool tensor, increasing, int64.

    On CPU numpy's ``flatnonzero`` (vectorised) is 3-20x faster than ``torch.nonzero``
    (measured on 1M entries: 0.35-2.2 ms against 6-7 ms, torch 2.2 and 2.13); relabelling
    scans a byte per graph node with it every layer.
    """
    if mask.device.type != "cpu":
        return torch.nonzero(mask).squeeze(1)
    return torch.from_numpy(np.flatnonzero(mask.numpy()))


def _relabel(
    dst_nodes: torch.Tensor, src: torch.Tensor, scratch: _Scratch, src_local: torch.Tensor
) -> torch.Tensor:
    """``src_nodes``: the destination nodes then the other sources in increasing id order;
    the local id of every entry of ``src`` is written to ``src_local``."""
    marks, local_id = scratch.marks, scratch.local_id
    num_dst = dst_nodes.numel()
    if src.numel() * _SCAN_FRACTION >= marks.numel():
        _fill(marks, src, True)
        _fill(marks, dst_nodes, False)
        new = _flatnonzero(marks)  # sorted, without the dst nodes
        if new.numel() * 8 > marks.numel():  # all False again: a memset beats scattered writes
            _run_pieces(lambda part: marks[part].zero_(), marks.numel(), marks.device)
        else:
            _fill(marks, new, False)
    else:
        candidates = torch.unique(src)  # sorted
        marks.index_fill_(0, dst_nodes, True)
        new = candidates[~marks.index_select(0, candidates)]
        marks.index_fill_(0, dst_nodes, False)
    _number(local_id, dst_nodes, 0)
    _number(local_id, new, num_dst)
    _gather(local_id, src, out=src_local)
    src_nodes = torch.empty(num_dst + new.numel(), dtype=torch.int64, device=src.device)
    _copy(src_nodes[:num_dst], dst_nodes)
    _copy(src_nodes[num_dst:], new)
    return src_nodes


# ---------------------------------------------------------------------------- serial passes
# Every pass over a CPU tensor of more than 32768 elements (torch's grain size) is split
# by torch over its intra-op threads and ends in a barrier; when other processes hold
# the cores, each barrier waits for the scheduler (measured on 2 cores under load: the
# whole sampler ~8x slower with 2 threads than with 1). So the sampler cuts its large
# passes into pieces below that size, which torch runs on the calling thread, and spreads
# the pieces over a few worker threads of its own: torch releases the GIL inside a pass,
# and waiting for the workers blocks instead of spinning.
_PIECE_SIZE = 16384  # elements
_POOL: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, workers, pool)
_POOL_LOCK = threading.Lock()


def _run_pieces(
    work: Callable[[slice], object], size: int, device: torch.device, row_size: int = 1
) -> None:
    """``work(piece)`` for slices covering ``range(size)``, each below torch's grain size
    (``row_size`` elements per index); spread over ``torch.get_num_threads()`` threads on
    CPU; one slice on a GPU or with one thread (torch splits nothing then). The pieces
    must write disjoint memory."""
    if device.type == "cuda" or torch.get_num_threads() == 1:  # no barrier to avoid
        if size:
            work(slice(0, size))
        return
    step = max(_PIECE_SIZE // row_size, 1)
    pieces = [slice(begin, begin + step) for begin in range(0, size, step)]
    threads = min(torch.get_num_threads(), len(pieces))
    if threads <= 1:
        for piece in pieces:
            work(piece)
        return
    pool = _worker_pool(threads - 1)
    shares = [pieces[first::threads] for first in range(threads)]
    futures = [pool.submit(_run_all, work, share) for share in shares[1:]]
    _run_all(work, shares[0])  # the calling thread takes a share too
    for future in futures:
        future.result()  # re-raises a worker's error


def _run_all(work: Callable[[slice], object], pieces: list[slice]) -> None:
    for piece in pieces:
        work(piece)


def _worker_pool(workers: int) -> ThreadPoolExecutor:
    """A pool of at least ``workers`` threads, made anew in a forked child (DataLoader
    workers): a parent's threads do not survive ``fork``."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid() or _POOL[1] < workers:
            _POOL = (
                os.getpid(),
                workers,
                ThreadPoolExecutor(max_workers=workers, thread_name_prefix="graphemb-sampler"),
            )
        return _POOL[2]


def _gather(
    table: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``table[index]`` for 1-D tensors, in pieces; into ``out`` (any dtype) if given."""
    if out is None:
        out = torch.empty(index.shape, dtype=table.dtype, device=index.device)
    target = out

    def gather(part: slice) -> None:
        if target.dtype == table.dtype:
            torch.index_select(table, 0, index[part], out=target[part])
        else:
            target[part] = table.index_select(0, index[part])

    _run_pieces(gather, index.numel(), index.device)
    return out


def _fill(array: torch.Tensor, index: torch.Tensor, value: bool) -> None:
    """``array[index] = value`` in pieces (a repeated index writes the same value)."""
    _run_pieces(lambda part: array.index_fill_(0, index[part], value), index.numel(), index.device)


def _number(array: torch.Tensor, index: torch.Tensor, first: int) -> None:
    """``array[index] = arange(first, first + len(index))`` in pieces (distinct indices)."""

    def number(part: slice) -> None:
        some = index[part]
        begin = first + part.start
        values = torch.arange(begin, begin + some.numel(), dtype=array.dtype, device=some.device)
        array.index_copy_(0, some, values)

    _run_pieces(number, index.numel(), index.device)


def _copy(target: torch.Tensor, source: torch.Tensor) -> None:
    """``target[:] = source`` for 1-D tensors, in pieces."""
    _run_pieces(lambda part: target[part].copy_(source[part]), source.numel(), source.device)


def _add_column(out: torch.Tensor, matrix: torch.Tensor, column: torch.Tensor) -> None:
    """``out = matrix + column[:, None]`` for (R, k) ``matrix``, in pieces of rows."""
    _run_pieces(
        lambda rows: torch.add(matrix[rows], column[rows].unsqueeze(1), out=out[rows]),
        out.shape[0],
        out.device,
        row_size=max(out.shape[1], 1),
    )


def _repeat_counts(
    counts: torch.Tensor, out_start: torch.Tensor, total: int, fanout: int
) -> torch.Tensor:
    """``arange(len(counts)).repeat_interleave(counts)`` in pieces; ``out_start`` holds
    the exclusive prefix sums of ``counts`` (at most ``fanout`` each unless -1)."""
    out = torch.empty(total, dtype=torch.int64, device=counts.device)
    num_rows = counts.numel()

    def repeat(rows: slice) -> None:
        stop = min(rows.stop, num_rows)
        first = 0 if rows.start == 0 else int(out_start[rows.start])
        last = total if stop == num_rows else int(out_start[stop])
        out[first:last] = torch.repeat_interleave(
            torch.arange(rows.start, stop, device=counts.device),
            counts[rows.start : stop],
            output_size=last - first,
        )

    _run_pieces(repeat, num_rows, counts.device, row_size=max(fanout, 1))
    return out


def _repeat_each(count: int, times: int, device: torch.device) -> torch.Tensor:
    """``arange(count).repeat_interleave(times)``, in pieces."""
    out = torch.empty((count, times), dtype=torch.int64, device=device)

    def repeat(rows: slice) -> None:
        part = out[rows]
        begin = rows.start
        part.copy_(torch.arange(begin, begin + part.shape[0], device=device).unsqueeze(1))

    _run_pieces(repeat, count, device, row_size=max(times, 1))
    return out.view(-1)


# ---------------------------------------------------------------------------- validation
def _check_fanout(name: str, fanout: object) -> int:
    if isinstance(fanout, bool) or not isinstance(fanout, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer (-1 for all neighbours), got {fanout!r} "
            f"({type(fanout).__name__})"
        )
    value = int(fanout)
    if value < -1:
        raise ValueError(f"{name} = {value}: a fanout is -1 (all neighbours) or >= 0")
    return value


def _check_graph(graph: object) -> None:
    if not isinstance(graph, Graph):
        raise TypeError(f"expected a graphemb Graph, got {type(graph).__name__}")


def _check_seeds(graph: Graph, seeds: object) -> torch.Tensor:
    seeds = check_node_id_vector("seeds", seeds)
    if seeds.device != graph.device:
        raise ValueError(
            f"seeds are on {seeds.device} but the graph is on {graph.device}; move them with "
            f"seeds.to({str(graph.device)!r})"
        )
    check_node_ids(seeds, graph.num_nodes, "seeds")
    return seeds.to(torch.int64)


def _check_generator(graph: Graph, generator: torch.Generator | None) -> None:
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    device = torch.device(generator.device)
    if device.type != graph.device.type or (
        device.index is not None
        and graph.device.index is not None
        and device.index != graph.device.index
    ):
        raise ValueError(
            f"generator is on {generator.device} but the graph is on {graph.device}; "
            f"use torch.Generator(device={str(graph.device)!r})"
        )


def _check_distinct(seeds: torch.Tensor, scratch: _Scratch) -> None:
    """Repeated seeds are found in O(B) without sorting: after scattering every position
    to its node's slot, a repeated node's slot holds only one of its positions."""
    positions = torch.arange(seeds.numel(), device=seeds.device, dtype=scratch.local_id.dtype)
    scratch.local_id.index_copy_(0, seeds, positions)
    clash = scratch.local_id.index_select(0, seeds) != positions
    if bool(clash.any()):
        repeated = int(seeds[clash][0])
        raise ValueError(f"seeds must be distinct, but node {repeated} appears more than once")
