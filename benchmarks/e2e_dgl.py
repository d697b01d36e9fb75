"""DGL's training loops of ``bench_end_to_end.py``, each as DGL's users write it.

The documented loop (DGL's examples, e.g. ``examples/pytorch/rgcn``): a graph with DGL's
default formats, ``dgl.dataloading.DataLoader`` over ``NeighborSampler(fanouts)``,
``dgl.nn.SAGEConv`` layers, the rows in ``dgl.nn.NodeEmbedding`` trained by
``dgl.optim.SparseAdam`` -- whose ``zero_grad()`` the examples call every batch. Two
variants beside it:

``rows="torch"``
    the rows in torch's ``nn.Embedding(sparse=True)`` and ``torch.optim.SparseAdam`` (a
    DGL user's loop that avoids DGL's sparse optimizer);
``zero_grad=False``
    the loop of the docstrings of ``dgl.nn.NodeEmbedding`` and ``dgl.optim.SparseAdam``
    (DGL 2.1), which never call ``SparseAdam.zero_grad()``. Then the embedding's trace of
    looked-up rows is never cleared: step ``k`` concatenates the ids and gradients of all
    ``k`` batches so far and applies every earlier batch's gradient again. The step's
    cost grows with every batch (and the model trains on stale gradients).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

from e2e_loops import (
    LR_LAYERS,
    LR_ROWS,
    InOrder,
    init_rows,
    loop_contender,
    phase_spans,
    training_step,
)


def dgl_contender(args, work, name: str, *, rows: str = "dgl", zero_grad: bool = True):
    """DGL's loop on ``work`` (see the module's docstring).

    Parameters
    ----------
    args : namespace
        The benchmark's options (sizes, fanouts, device, dropout).
    work : namespace
        The workload (``e2e_workload.load``): edges, labels, seeds.
    name : str
        The contender's name.
    rows : {"dgl", "torch"}
        Where the learnable rows live: DGL's ``NodeEmbedding`` + ``SparseAdam``, or torch's
        ``nn.Embedding(sparse=True)`` + ``SparseAdam``.
    zero_grad : bool
        Whether the loop calls DGL's ``SparseAdam.zero_grad()`` every batch (DGL's
        examples do; its docstrings do not). Only with ``rows="dgl"``.
    """
    import dgl
    import torch
    import torch.nn.functional as F
    from torch import nn

    device = torch.device(args.device)
    graph = dgl.graph((work.src, work.dst), num_nodes=args.num_nodes).to(device)
    work.src = work.dst = None  # the graph holds the edges now
    labels = work.labels.to(device)
    sampler = dgl.dataloading.NeighborSampler(args.fanouts)
    sizes = [args.dim] + [args.hidden] * (len(args.fanouts) - 1) + [args.classes]
    layers = nn.ModuleList(
        dgl.nn.SAGEConv(sizes[k], sizes[k + 1], "mean") for k in range(len(args.fanouts))
    ).to(device)
    dropout = nn.Dropout(args.dropout)
    dense_opt = torch.optim.Adam(layers.parameters(), lr=LR_LAYERS)
    emb, sparse_opt, held = _rows(args, device, rows, zero_grad)
    held.append(layers)
    phase_span = phase_spans(device)
    seeds = work.seeds.to(device)

    def open_at(i: int):
        return dgl.dataloading.DataLoader(
            graph, seeds[i * args.batch_size :], sampler, batch_size=args.batch_size,
            shuffle=False, drop_last=False,
        )  # fmt: skip

    loader = InOrder(open_at, work.num_batches)

    def forward(input_nodes, blocks):
        h = dropout(emb(input_nodes, device))
        for k, (layer, block) in enumerate(zip(layers, blocks, strict=True)):
            if k:
                h = dropout(F.relu(h))
            h = layer(block, h)
        return h

    def run_batch(i: int, phase) -> None:
        training_step(
            phase or phase_span, lambda: loader.batch(i), forward, labels, sparse_opt, dense_opt
        )

    contender = loop_contender(name, "dgl", args.batch_size, run_batch, held)
    if rows == "dgl":
        contender.ops["trace"] = lambda: {"batches_in_trace": len(held[0].trace)}
    return contender


def _rows(args, device, rows: str, zero_grad: bool):
    """``(lookup, sparse optimizer, objects to hold)`` of the rows: DGL's
    ``NodeEmbedding`` and ``SparseAdam`` (``zero_grad()`` before every step, or never), or
    torch's ``nn.Embedding(sparse=True)`` and ``SparseAdam``."""
    import dgl
    import torch
    from torch import nn

    if rows == "torch":
        table = nn.Embedding(args.num_nodes, args.dim, sparse=True, device=device)
        init_rows(table.weight.data)
        torch_opt = torch.optim.SparseAdam(table.parameters(), lr=LR_ROWS)
        step = SimpleNamespace(step=lambda: (torch_opt.step(), torch_opt.zero_grad()))
        return (lambda ids, _device: table(ids)), step, [table, torch_opt]
    if rows != "dgl":
        raise ValueError(f"rows must be 'dgl' or 'torch', got {rows!r}")
    emb = dgl.nn.NodeEmbedding(args.num_nodes, args.dim, f"e2e-dgl-{os.getpid()}",
                               init_func=init_rows, device=device)  # fmt: skip
    dgl_opt = dgl.optim.SparseAdam([emb], lr=LR_ROWS)

    def step() -> None:
        if zero_grad:  # DGL's examples call it before backward: a flag read by step()
            dgl_opt.zero_grad()
        dgl_opt.step()

    return emb, SimpleNamespace(step=step), [emb, dgl_opt]
