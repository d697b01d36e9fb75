"""Lower bounds of the three phases of a GraphSAGE batch, from what the batch must move
and compute, at rates measured on this machine in the same run.

sparse step
    bytes an Adam update must move / copy bandwidth: per distinct input row, read and
    write the weight and both moments and read the gradient (28 x D bytes, float32;
    ``harness.bandwidth``).
layers (forward + backward)
    the time of the layers' matrix products at the batch's shapes, measured with
    ``torch.mm`` (per layer: two products forward, ``lin_l`` on the aggregated rows and
    ``lin_r`` on the destinations' own; four backward, the inputs' and the weights'
    gradients), plus the bytes the aggregation must move / copy bandwidth: the input rows
    read from the table and written once; per layer and edge, one source row read forward
    and one gradient row read backward (with its 8-byte index); per destination one row
    written forward, per source one gradient row written backward.
sampling
    the random reads a sampler must make, each class at the rate of independent random
    reads measured on a table of its size: per destination node its row pointer and the
    cache lines of its neighbour list that its draws touch (all ``ceil(8 x degree / 64)``
    lines at most, ``min(degree, fanout)`` at most), from a table of the graph's size; per
    sampled edge one read of the node-to-position map that relabels it (4 bytes a node of
    the graph, much of it in cache); plus the sampled edges written (two int64 each) at
    the copy bandwidth.

None of the three counts what a real implementation must add (dropout, activations, the
loss, sorting the ids, allocating outputs), so a phase can approach its bound but not
reach it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ADAM_BYTES_PER_COLUMN = 28  # harness.bandwidth.UPDATE_BYTES_PER_COLUMN["adam"]
FLOAT, INDEX, LINE = 4, 8, 64


def batch_shapes(graph, blocks: Sequence, fanouts: Sequence[int]) -> dict:
    """What one sampled batch moves: per layer ``(src, dst, edges)``, the sampler's random
    cache-line reads of the graph and its relabelling reads (one per sampled edge).

    Parameters
    ----------
    graph : graphemb.graph.Graph
        The graph the blocks were sampled from (its in-degrees).
    blocks : sequence of graphemb.sampling.Block
        The batch's blocks, input layer first.
    fanouts : sequence of int
        The sampler's fanouts, input layer first.
    """
    import torch

    layers, reads, edges = [], 0, 0
    for block, fanout in zip(blocks, fanouts, strict=True):
        layers.append([block.num_src_nodes, block.num_dst_nodes, block.num_edges])
        degrees = graph.in_degrees(block.dst_nodes)
        spanned = (degrees * INDEX + LINE - 1) // LINE
        lines = torch.minimum(spanned, degrees.clamp(max=fanout))
        reads += block.num_dst_nodes + int(lines.sum())
        edges += block.num_edges
    return {"layers": layers, "input_rows": blocks[0].num_src_nodes, "random_reads": reads,
            "relabel_reads": edges}  # fmt: skip


def random_read_rate(mib: int = 512, reads: int = 1 << 22, repeats: int = 5) -> dict:
    """Independent random 8-byte reads per second from a table of ``mib`` MiB (each read a
    cache line of its own): ``index_select`` at random positions, on torch's threads, the
    fastest of ``repeats``."""
    import torch

    table = torch.arange((mib << 20) // INDEX, dtype=torch.int64)
    generator = torch.Generator().manual_seed(0)
    positions = torch.randint(0, table.numel(), (reads,), generator=generator)
    out = torch.empty(reads, dtype=torch.int64)
    best = _fastest(torch.index_select, (table, 0, positions), {"out": out}, repeats)
    return {"reads_per_s": reads / best, "table_mib": mib, "reads": reads, "repeats": repeats}


def mm_ms(shapes: Sequence[tuple[int, int, int]], repeats: int = 5) -> float:
    """Milliseconds of ``torch.mm`` of every ``(m, k, n)`` in ``shapes`` (an (m, k) by a
    (k, n) float32 matrix), each the fastest of ``repeats`` runs after an untimed one, on
    torch's threads or on one thread, whichever is faster (a product too small to split
    runs faster on one)."""
    import torch

    threads = torch.get_num_threads()
    cache: dict[tuple[int, int, int], float] = {}
    try:
        for m, k, n in dict.fromkeys(shapes):
            a, b, out = torch.rand(m, k), torch.rand(k, n), torch.empty(m, n)
            best = math.inf
            for count in dict.fromkeys((threads, 1)):
                torch.set_num_threads(count)
                best = min(best, _fastest(torch.mm, (a, b), {"out": out}, repeats))
            cache[(m, k, n)] = best
    finally:
        torch.set_num_threads(threads)
    return 1e3 * sum(cache[shape] for shape in shapes)


def _fastest(function, args: tuple, kwargs: dict, repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``function(*args, **kwargs)`` after
    an untimed one."""
    import time

    function(*args, **kwargs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return min(times)


def layer_products(layers: Sequence[Sequence[int]], widths: Sequence[int]) -> list[tuple]:
    """The ``(m, k, n)`` of every matrix product of the layers, forward and backward:
    ``layers`` = per layer ``(src, dst, edges)``, ``widths`` the representations' widths
    (input first)."""
    shapes = []
    for (_, dst, _), d_in, d_out in zip(layers, widths[:-1], widths[1:], strict=True):
        shapes += [(dst, d_in, d_out)] * 2  # lin_l(aggregated), lin_r(h_dst)
        shapes += [(dst, d_out, d_in)] * 2  # their inputs' gradients
        shapes += [(d_in, dst, d_out)] * 2  # their weights' gradients
    return shapes


def aggregation_bytes(layers: Sequence[Sequence[int]], widths: Sequence[int], rows: int) -> int:
    """Bytes the aggregations must move, forward and backward, and the input rows' read
    and write (see the module's docstring)."""
    total = 2 * rows * widths[0] * FLOAT
    for (src, dst, edges), d_in in zip(layers, widths[:-1], strict=True):
        row = d_in * FLOAT
        total += edges * (row + INDEX) + dst * (row + INDEX)  # forward
        total += edges * (row + INDEX) + src * (row + INDEX)  # backward (transposed)
    return total


def phase_bounds(shapes: Sequence[dict], widths: Sequence[int], machine: dict) -> dict:
    """The bound of each phase (ms), the median over the batches of ``shapes``.

    Parameters
    ----------
    shapes : sequence of dict
        :func:`batch_shapes` of the profiled batches.
    widths : sequence of int
        Widths of the representations: the embedding's, the hidden ones, the classes.
    machine : dict
        ``bandwidth`` (:func:`harness.bandwidth.copy_bandwidth`), ``random_reads`` and
        ``relabel_reads`` (:func:`random_read_rate` on tables of the graph's and of the
        relabelling map's size) of this run.
    """
    bandwidth = machine["bandwidth"]["bytes_per_s"]
    per_batch: dict[str, list[float]] = {"sampling": [], "layers": [], "sparse step": [],
                                         "layers: products": [], "layers: bytes": []}  # fmt: skip
    for shape in shapes:
        rows = shape["input_rows"]
        products = mm_ms(layer_products(shape["layers"], widths))
        moved = 1e3 * aggregation_bytes(shape["layers"], widths, rows) / bandwidth
        per_batch["layers: products"].append(products)
        per_batch["layers: bytes"].append(moved)
        per_batch["layers"].append(products + moved)
        update = ADAM_BYTES_PER_COLUMN * widths[0] * rows
        per_batch["sparse step"].append(1e3 * update / bandwidth)
        graph_reads = shape["random_reads"] / machine["random_reads"]["reads_per_s"]
        relabel = shape["relabel_reads"] / machine["relabel_reads"]["reads_per_s"]
        written = 2 * INDEX * shape["relabel_reads"] / bandwidth
        per_batch["sampling"].append(1e3 * (graph_reads + relabel + written))
    return {name: _median(values) for name, values in per_batch.items()}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
