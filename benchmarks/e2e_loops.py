"""The training loops of ``bench_end_to_end.py``: one iteration's phases, the harness
contender that runs it, the batches of a loader in order, and graphemb's loop (and its
no-exchange yardstick). DGL's loops are in ``e2e_dgl.py``.

Every loop iterates its library's own loader over the same seeds in the same order --
graphemb's ``SeedLoader``, DGL's ``DataLoader`` -- batch ``i`` holding the seeds
``seeds[i * B:(i + 1) * B]`` of the workload (``e2e_workload.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

LR_ROWS, LR_LAYERS = 0.01, 0.003


def init_rows(table):
    """``uniform(-0.1, 0.1)`` in place: every contender's table starts alike."""
    table.uniform_(-0.1, 0.1)
    return table


def phase_spans(device):
    """``phase(name)``: a ``record_function`` span that also holds the device's work."""
    import torch
    from harness.phases import PHASE_SPANS
    from torch.profiler import record_function

    class phase:
        def __init__(self, name: str) -> None:
            self.span = record_function(PHASE_SPANS[name])

        def __enter__(self):
            self.span.__enter__()

        def __exit__(self, *exc):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            self.span.__exit__(*exc)

    return phase


def loop_contender(name, family, rows, run_batch, objects):
    """A harness Contender whose ``step``/``profile`` run one whole training iteration;
    its operation ``clocked(i)`` runs batch ``i`` with a wall clock around every phase
    (no profiler) and answers the milliseconds, the whole batch's under ``"batch"``."""
    import time

    from harness.peers import Contender

    contender = Contender(
        name,
        family,
        "adam",
        rows,
        step=lambda i: run_batch(i, nullcontext_phase),
        profile=lambda i: run_batch(i, None),
        objects=objects,
    )

    def clocked(i: int) -> dict:
        spans: dict[str, float] = {}

        class clock:
            def __init__(self, phase: str) -> None:
                self.phase = phase

            def __enter__(self) -> None:
                self.start = time.perf_counter()

            def __exit__(self, *exc) -> None:
                spans[self.phase] = 1e3 * (time.perf_counter() - self.start)

        start = time.perf_counter()
        run_batch(i, clock)
        return {"batch": 1e3 * (time.perf_counter() - start), **spans}

    contender.ops["clocked"] = clocked
    return contender


def nullcontext_phase(name: str):
    return nullcontext()


def training_step(phase, sample, forward, labels, sparse_opt, dense_opt) -> None:
    """One training iteration of every contender, each phase inside ``phase(name)``:
    ``sample()`` gives ``(input_nodes, output_nodes, blocks)``, ``forward(input_nodes,
    blocks)`` the logits of the output nodes."""
    import torch.nn.functional as F

    with phase("sample"):
        input_nodes, output_nodes, blocks = sample()
    with phase("forward"):
        loss = F.cross_entropy(forward(input_nodes, blocks), labels[output_nodes])
    with phase("backward"):
        loss.backward()
    with phase("sparse_step"):
        sparse_opt.step()
    with phase("dense_step"):
        dense_opt.step()
        dense_opt.zero_grad()


class InOrder:
    """Batch ``i`` of a loader, for ``i`` asked for in increasing steps of one.

    Parameters
    ----------
    open_at : callable
        ``open_at(i)`` returns a loader (any iterable) whose first batch is batch ``i``.
    count : int
        Batches in the workload: batch ``i`` is batch ``i % count``.
    """

    def __init__(self, open_at: Callable[[int], Any], count: int) -> None:
        self.open_at = open_at
        self.count = count
        self.position = -1
        self.iterator: Iterator | None = None

    def batch(self, i: int):
        """The loader's batch ``i`` (a new iterator from ``i`` where the last was not
        ``i - 1``: the timed blocks ask for consecutive batches)."""
        i %= self.count
        if self.iterator is None or i != self.position + 1:
            self.iterator = iter(self.open_at(i))
        self.position = i
        return next(self.iterator)


def graphemb_contender(
    args,
    work,
    name: str,
    *,
    rank: int = 0,
    world_size: int = 1,
    pyg_aggregation: bool = False,
    exchange: bool = True,
):
    """graphemb's loop (its ``SeedLoader``); with a process group: its share of every
    batch, DDP on the layers.

    ``exchange=False`` (the no-exchange yardstick): the rank's share of every batch on an
    embedding in the process's own memory and on layers of its own, without DDP.

    ``pyg_aggregation``: the layers aggregate as PyG's ``SAGEConv`` does on the block's
    ``adj_t`` (autograd of torch's CSR product, slicing ``h[:D]``): the model as it was
    before its own aggregation, for a before/after of the layers.
    """
    import torch

    from graphemb import NodeEmbedding
    from graphemb.graph import Graph
    from graphemb.optim import SparseAdam
    from graphemb.sampling import NeighborSampler, SeedLoader

    device = torch.device("cuda", rank) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":  # one GPU per rank (NCCL refuses two ranks on one device)
        torch.cuda.set_device(device)
    if getattr(work, "graph", None) is None:  # one graph for every graphemb contender
        work.graph = Graph.from_edges(work.src, work.dst, args.num_nodes).to(device)
    graph = work.graph
    labels = work.labels.to(device)
    sampler = NeighborSampler(args.fanouts)
    table_name = f"e2e-{os.getppid()}-{name}".replace(" ", "-").replace(",", "")
    with nullcontext() if exchange else private_rows():
        emb = NodeEmbedding(args.num_nodes, args.dim, table_name, init_func=init_rows,
                            device=device)  # fmt: skip
    model = _graphemb_model(args, emb, pyg_aggregation).to(device)
    trained = model
    if world_size > 1 and exchange:
        from torch.nn.parallel import DistributedDataParallel

        trained = DistributedDataParallel(model)
    dense_opt = torch.optim.Adam(trained.parameters(), lr=LR_LAYERS)
    sparse_opt = SparseAdam([emb], lr=LR_ROWS)
    phase_span = phase_spans(device)
    batch, share = args.batch_size, args.batch_size // world_size
    seeds = work.seeds.to(device)

    def open_at(i: int) -> SeedLoader:
        mine = seeds[i * batch :].view(-1, batch)[:, rank * share : (rank + 1) * share]
        return SeedLoader(
            graph, mine.reshape(-1), sampler, share, seed=args.seed + 2 + rank, rank=0, world_size=1
        )  # fmt: skip (the rank's share is cut here)

    loader = InOrder(open_at, work.num_batches)

    def run_batch(i: int, phase) -> None:
        training_step(
            phase or phase_span,
            lambda: loader.batch(i),
            lambda _, blocks: trained(blocks),
            labels,
            sparse_opt,
            dense_opt,
        )

    held = [emb, model, sparse_opt, dense_opt]
    contender = loop_contender(name, "graphemb", share, run_batch, held)
    contender.ops["shapes"] = lambda start, count: batch_shapes(args, graph, loader, start, count)
    if world_size == 1:
        contender.ops["frontier_shares"] = lambda procs: frontier_shares(
            graph, sampler, work, batch, procs
        )
    return contender


def batch_shapes(args, graph, loader: InOrder, start: int, count: int) -> list[dict]:
    """What batches ``start``... of ``loader`` move, for the phases' bounds (e2e_bounds.py)."""
    import e2e_bounds

    batches = [loader.batch(i) for i in range(start, start + count)]
    return [e2e_bounds.batch_shapes(graph, blocks, args.fanouts) for _, _, blocks in batches]


def frontier_shares(graph, sampler, work, batch: int, procs: list, batches: int = 3) -> dict:
    """How much of the whole batch's work a rank of each count in ``procs`` gets: its share
    of the seeds' input rows (the rows it gathers, pushes and has updated) and of the first
    layer's edges, against the whole batch's, means over the first ``batches`` batches
    (each share sampled anew, as the ranks do). The ranks' frontiers overlap at the hubs."""
    import torch

    generator = torch.Generator().manual_seed(0)
    shares = {}
    for count in procs:
        rows, edges = [], []
        for i in range(batches):
            seeds = work.seeds[i * batch : (i + 1) * batch]
            whole = sampler.sample_blocks(graph, seeds, generator)
            for part in seeds.chunk(count):
                share = sampler.sample_blocks(graph, part, generator)
                rows.append(share[0].numel() / whole[0].numel())
                edges.append(share[2][0].num_edges / whole[2][0].num_edges)
        shares[count] = {"input_rows": sum(rows) / len(rows),
                         "first_layer_edges": sum(edges) / len(edges)}  # fmt: skip
        print(f"# a rank of {count}: {shares[count]['input_rows']:.0%} of the whole batch's "
              f"input rows, {shares[count]['first_layer_edges']:.0%} of its first layer's "
              f"edges (1/{count} would split the work without overlap)")  # fmt: skip
    return shares


def _graphemb_model(args, emb, pyg_aggregation: bool):
    """graphemb's GraphSAGE on ``emb`` (with ``pyg_aggregation``, its layers aggregating
    as PyG's ``SAGEConv`` does on ``block.adj_t``)."""
    from graphemb.nn import GraphSAGE
    from graphemb.nn.stack import BlockGNN

    model_class = GraphSAGE
    if pyg_aggregation:

        class PygAggregation(GraphSAGE):
            # every layer on looked-up rows, through the activation, the dropout, then
            # SAGEConv itself: none of graphemb's fused paths
            first_layer = BlockGNN.first_layer
            convolve_dropped = BlockGNN.convolve_dropped

            def convolve(self, layer, block, h):
                return layer((h, h[: block.num_dst_nodes]), block.adj_t)

        model_class = PygAggregation
    return model_class(emb, 0, args.hidden, args.classes, len(args.fanouts),
                       dropout=args.dropout)  # fmt: skip


def private_rows():
    """Within it, a ``NodeEmbedding`` keeps its rows in this process's own memory even
    under a process group (the no-exchange yardstick only: no rank sees another's rows)."""
    from unittest import mock

    from graphemb.storage import LocalStorage

    def local(name, num_embeddings, device, *_args, **_options):
        return LocalStorage(name, num_embeddings, device)

    return mock.patch("graphemb.embedding.create_storage", local)


_NO_EXCHANGE = ", no exchange"


def no_exchange(name: str) -> str:
    """The name of the no-exchange yardstick of the pool contender ``name``."""
    return f"{name}{_NO_EXCHANGE}"


def pool_contenders(name: str) -> tuple[str, str]:
    """What the process pool ``name`` runs: its ranks, then their no-exchange yardstick."""
    return name, no_exchange(name)


def is_yardstick(name: str) -> bool:
    """Whether ``name`` is a no-exchange yardstick (:func:`no_exchange`)."""
    return name.endswith(_NO_EXCHANGE)
