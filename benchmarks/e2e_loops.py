"""The training loops of ``bench_end_to_end.py``: one iteration's phases, the harness
contender that runs it, graphemb's loop (and its no-exchange yardstick), and DGL's two loops
(its own sparse optimizer, and torch's ``SparseAdam`` on ``nn.Embedding(sparse=True)``)."""

from __future__ import annotations

import os
from contextlib import nullcontext
from types import SimpleNamespace

LR_ROWS, LR_LAYERS = 0.01, 0.003


def init_rows(table):
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
    """A harness Contender whose ``step``/``profile`` run one whole training iteration."""
    from harness.peers import Contender

    return Contender(
        name,
        family,
        "adam",
        rows,
        step=lambda i: run_batch(i, nullcontext_phase),
        profile=lambda i: run_batch(i, None),
        objects=objects,
    )


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
    """graphemb's loop; with a process group: its share of every batch, DDP on the layers.

    ``exchange=False`` (the no-exchange yardstick): the rank's share of every batch on an
    embedding in the process's own memory and on layers of its own, without DDP.

    ``pyg_aggregation``: the layers aggregate as PyG's ``SAGEConv`` does on the block's
    ``adj_t`` (autograd of torch's CSR product, slicing ``h[:D]``): the model as it was
    before its own aggregation, for a before/after of the layers in the same run.
    """
    import torch

    from graphemb import NodeEmbedding
    from graphemb.graph import Graph
    from graphemb.nn import GraphSAGE
    from graphemb.optim import SparseAdam
    from graphemb.sampling import NeighborSampler

    # one GPU per rank (NCCL refuses two ranks on one device)
    device = torch.device("cuda", rank) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if getattr(work, "graph", None) is None:  # one graph for every graphemb contender
        work.graph = Graph.from_edges(work.src, work.dst, args.num_nodes).to(device)
    graph = work.graph
    labels = work.labels.to(device)
    sampler = NeighborSampler(args.fanouts)
    generator = torch.Generator(device=device).manual_seed(args.seed + 2 + rank)
    table_name = f"e2e-{os.getppid()}-{name}".replace(" ", "-").replace(",", "")
    with nullcontext() if exchange else private_rows():
        emb = NodeEmbedding(args.num_nodes, args.dim, table_name, init_func=init_rows,
                            device=device)  # fmt: skip
    model_class = GraphSAGE
    if pyg_aggregation:

        class PygAggregation(GraphSAGE):
            def convolve(self, layer, block, h):
                return layer((h, h[: block.num_dst_nodes]), block.adj_t)

        model_class = PygAggregation
    model = model_class(emb, 0, args.hidden, args.classes, len(args.fanouts),
                        dropout=args.dropout).to(device)  # fmt: skip
    trained = model
    if world_size > 1 and exchange:
        from torch.nn.parallel import DistributedDataParallel

        trained = DistributedDataParallel(model)
    dense_opt = torch.optim.Adam(trained.parameters(), lr=LR_LAYERS)
    sparse_opt = SparseAdam([emb], lr=LR_ROWS)
    phase_span = phase_spans(device)
    share = args.batch_size // world_size

    def run_batch(i: int, phase) -> None:
        seeds = work.batches[i % len(work.batches)][rank * share : (rank + 1) * share]
        training_step(
            phase or phase_span,
            lambda: sampler.sample_blocks(graph, seeds.to(device), generator),
            lambda _, blocks: trained(blocks),
            labels,
            sparse_opt,
            dense_opt,
        )

    return loop_contender(name, "graphemb", share, run_batch, [emb, model, sparse_opt, dense_opt])


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


def dgl_contender(args, work, name: str, torch_rows: bool = False):
    """DGL's own loop: its sampler, SAGEConv layers, NodeEmbedding and SparseAdam; with
    ``torch_rows``, the rows in torch's ``nn.Embedding(sparse=True)`` and ``SparseAdam``
    instead (a DGL user's loop that avoids DGL's sparse optimizer)."""
    import dgl
    import torch
    import torch.nn.functional as F
    from torch import nn

    device = torch.device(args.device)
    # In-neighbour sampling reads the CSC form only: the other two formats would double the
    # memory of the benchmark without changing DGL's speed.
    graph = dgl.graph((work.src, work.dst), num_nodes=args.num_nodes).formats("csc")
    graph.create_formats_()
    graph = graph.to(device)
    labels = work.labels.to(device)
    sampler = dgl.dataloading.NeighborSampler(args.fanouts)
    sizes = [args.dim] + [args.hidden] * (len(args.fanouts) - 1) + [args.classes]
    layers = nn.ModuleList(
        dgl.nn.SAGEConv(sizes[k], sizes[k + 1], "mean") for k in range(len(args.fanouts))
    ).to(device)
    dropout = nn.Dropout(args.dropout)
    dense_opt = torch.optim.Adam(layers.parameters(), lr=LR_LAYERS)
    if torch_rows:
        rows = nn.Embedding(args.num_nodes, args.dim, sparse=True, device=device)
        init_rows(rows.weight.data)
        torch_opt = torch.optim.SparseAdam(rows.parameters(), lr=LR_ROWS)
        sparse_opt = SimpleNamespace(step=lambda: (torch_opt.step(), torch_opt.zero_grad()))
        emb = lambda ids, _device: rows(ids)  # noqa: E731 (DGL's NodeEmbedding call)
        held = [rows, layers, torch_opt]
    else:
        emb = dgl.nn.NodeEmbedding(args.num_nodes, args.dim, f"e2e-dgl-{os.getpid()}",
                                   init_func=init_rows, device=device)  # fmt: skip
        sparse_opt = dgl.optim.SparseAdam([emb], lr=LR_ROWS)
        held = [emb, layers, sparse_opt]
    phase_span = phase_spans(device)

    def forward(input_nodes, blocks):
        h = dropout(emb(input_nodes, device))
        for k, (layer, block) in enumerate(zip(layers, blocks, strict=True)):
            if k:
                h = dropout(F.relu(h))
            h = layer(block, h)
        return h

    def run_batch(i: int, phase) -> None:
        seeds = work.batches[i % len(work.batches)].to(device)
        training_step(
            phase or phase_span,
            lambda: sampler.sample_blocks(graph, seeds),
            forward,
            labels,
            sparse_opt,
            dense_opt,
        )

    return loop_contender(name, "dgl", args.batch_size, run_batch, held)
