#!/usr/bin/env python
"""What a change of GraphSAGE's layers gains: the same batches through two models in one
process, alternating batch by batch.

``--compare paired`` (the default):
 ``GraphSAGE`` aggregates each destination's sources and
writes its own row beside the aggregate, reading the rows through the ReLU of the layer
below and the dropout; then one product of width ``2F`` (``lin_l`` and ``lin_r`` side by
side) gives the layer's output (``graphemb/nn/aggregation.py``, ``csrc/nn/aggregate.cpp``).
The reference is the layer as it was before (issue 45): the ReLU a pass of its own, the
aggregate alone, the destinations' dropped rows a copy, ``lin_l`` then ``lin_r`` added
into its output (``addmm_``), and in the backward two products for the inputs' gradients.

``--compare table-reads``: ``GraphSAGE``'s first layer reads the embedding's rows from the
table as it aggregates them (``aggregate_embedding_rows``). The reference looks the batch's
input rows up first (a copy of 290k rows at 1M nodes) and aggregates the copy.

``--compare recycled``: the layers' aggregates (``D x 2F``), outputs (``D x H``) and their
inputs' gradients are written into recycled memory (``graphemb/nn/recycled_linear.py``,
``RecycledBlocks``). The reference is the same model with those three pools handing out
fresh tensors, as torch's allocator does for ``F.linear``. glibc serves a freed block of up
to 32 MiB again from its heap, so the difference shows on larger results
(``--batch-size``).

Both models start from the same weights and the same table, are trained by
``SparseAdam`` and draw the same dropout keys; forward and backward of each batch are timed
(the sparse step is not). Prints the median per model and the median of the per-batch
ratios (reference / candidate); the last line is ``BENCH_SUMMARY {json}``.

Needs the compiled kernels (CPU).
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from bench_sampler import build_graph
from harness import cli, report

from graphemb import NodeEmbedding
from graphemb._compiled import float_kernel
from graphemb.distributed.huge_pages import empty_rows
from graphemb.distributed.recycling import RecycledBlocks
from graphemb.graph import Graph
from graphemb.nn import GraphSAGE, aggregation, recycled_linear
from graphemb.nn.stack import BlockGNN
from graphemb.optim import SparseAdam
from graphemb.sampling import NeighborSampler

# the sources' gradients in recycled memory, as the model's own aggregation writes them
_GRADIENTS = RecycledBlocks(blocks=4)


class _SeparateAggregation(torch.autograd.Function):
    """``(A h, dropout(h[:D]))`` as two tensors, the backward adding the second's gradient."""

    @staticmethod
    def forward(ctx, h, block, mask):  # type: ignore[override]
        ctx.block, ctx.mask = block, mask
        adj_t = block.adj_t
        aggregate = float_kernel("csr_aggregate", h)
        aggregated = aggregate(adj_t.crow_indices(), adj_t.col_indices(), None, h, True, mask)
        own = h.narrow(0, 0, block.num_dst_nodes).contiguous()
        if mask is not None:
            own = float_kernel("dropout_masked_scale", h)(own, *mask)
        return aggregated, own

    @staticmethod
    def backward(ctx, grad_aggregated, grad_own):  # type: ignore[override]
        block, adj_t = ctx.block, ctx.block.adj_t
        transposed = float_kernel("csr_aggregate_transposed", grad_aggregated)
        grad = transposed(
            adj_t.crow_indices(), adj_t.col_indices(), grad_aggregated.contiguous(), True,
            block.num_src_nodes, grad_own.contiguous(), ctx.mask,
            out=_GRADIENTS.empty((block.num_src_nodes, grad_own.shape[1]), grad_own.dtype,
                                 grad_own.device),
        )  # fmt: skip
        return grad, None, None


class LookedUp(GraphSAGE):
    """GraphSAGE whose first layer aggregates a lookup's copy of the rows."""

    def first_layer(self, block, features):
        return BlockGNN.first_layer(self, block, features)


class TwoProducts(LookedUp):
    """GraphSAGE with the layer as it was before the paired product (and the lookup)."""

    def convolve_dropped(self, layer, block, h, dropout, activate=False):
        if activate:
            h = self.activation(h)
        mask = dropout.hashed_mask(h)
        aggregated, own = _SeparateAggregation.apply(h.contiguous(), block, mask)
        return layer.lin_l(aggregated).addmm_(own, layer.lin_r.weight.t())


@contextmanager
def fresh_layer_memory():
    """The layers' aggregates, outputs and input gradients in fresh tensors meanwhile."""
    pools = (aggregation._AGGREGATES, recycled_linear._OUTPUTS, recycled_linear._INPUT_GRADIENTS)
    for pool in pools:
        pool.empty = lambda shape, dtype, device: empty_rows(shape, dtype, device)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for pool in pools:
            del pool.empty


# --compare: (reference's name, its model), (candidate's name, its model)
COMPARISONS = {
    "paired": (("two products", TwoProducts), ("paired", LookedUp)),
    "table-reads": (("looked up", LookedUp), ("in place", GraphSAGE)),
    "recycled": (("fresh", GraphSAGE), ("recycled", GraphSAGE)),
}
# what a model's forward and backward run under, by its name (default: nothing)
CONTEXTS = {"fresh": fresh_layer_memory}


def parse_args(argv=None):
    parser = cli.parser(__doc__.split("\n\n")[0], __doc__.split("\n\n", 1)[1])
    add = parser.add_argument
    add("--graph", default="powerlaw-out", choices=["powerlaw-in", "powerlaw-out", "symmetric"],
        help="bench_sampler.py's shape (powerlaw-out)")  # fmt: skip
    add("-n", "--num-nodes", type=int, default=1_000_000, help="default 1,000,000")
    add("--compare", default="paired", choices=sorted(COMPARISONS),
        help="the change: the paired product (default), the first layer's table reads, the "
        "layers' results in recycled memory")  # fmt: skip
    add("--batches", type=int, default=24, help="timed batches per model (24)")
    add("-b", "--batch-size", type=int, default=1024, help="seeds per batch (1024)")
    add("--threads", type=int, default=2, help="torch threads (2)")
    add("--json", default=None, help="also write the summary JSON here")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    settings = cli.apply_allocator(args)
    load_before = report.load_average()
    torch.set_num_threads(args.threads)
    if float_kernel("csr_aggregate", torch.zeros(1)) is None:
        raise SystemExit("probe_sage_layers.py needs the compiled kernels")
    labels, batches = _workload(args)
    (reference, _), (candidate, _) = COMPARISONS[args.compare]
    times = _timed(args, _models(args), labels, batches)
    summary = {"benchmark": "probe_sage_layers", "config": vars(args), "allocator": settings,
               "loadavg_1min": load_before}  # fmt: skip
    for name, values in times.items():
        summary[f"{name} median ms"] = 1e3 * _median(values)
        print(f"{name}: forward + backward {summary[f'{name} median ms']:.1f} ms (median)")
    ratios = [a / b for a, b in zip(times[reference], times[candidate], strict=True)]
    summary["ratio median"] = _median(ratios)
    summary["ratio range"] = [min(ratios), max(ratios)]
    print(f"{reference} / {candidate}, batch by batch: median {_median(ratios):.3f}, range "
          f"{min(ratios):.3f}-{max(ratios):.3f} (graph {args.graph}, load before "
          f"{load_before:.2f})")  # fmt: skip
    report.emit_summary(summary, args.json)
    return summary


def _workload(args):
    """The nodes' labels and 8 batches sampled from the graph (3 blocks each)."""
    shape = SimpleNamespace(num_nodes=args.num_nodes, avg_degree=20, seed=0)
    src, dst, _ = build_graph(shape, torch, args.graph)
    graph = Graph.from_edges(src, dst, args.num_nodes)
    labels = torch.randint(0, 47, (args.num_nodes,), generator=torch.Generator().manual_seed(1))
    generator = torch.Generator().manual_seed(0)
    sampler = NeighborSampler([15, 10, 5])
    seeds = torch.randperm(args.num_nodes, generator=generator)
    size = getattr(args, "batch_size", 1024)
    batches = [sampler.sample_blocks(graph, seeds[i * size : (i + 1) * size], generator)[2]
               for i in range(8)]  # fmt: skip
    return labels, batches


def _models(args) -> dict:
    """name -> (model, its sparse optimizer), both models from the same weights and table."""
    initial = torch.empty(args.num_nodes, 64).normal_(0, 0.1)
    models = {}
    for name, model_class in COMPARISONS[args.compare]:
        emb = NodeEmbedding(args.num_nodes, 64, f"probe-{name.replace(' ', '-')}",
                            init_func=lambda t: t.copy_(initial))  # fmt: skip
        model = model_class(emb, 0, 128, 47, 3, dropout=0.5)
        models[name] = (model, SparseAdam([emb], lr=0.01))
    first, *others = models.values()
    for model, _ in others:
        model.load_state_dict(first[0].state_dict())
    return models


def _timed(args, models: dict, labels, batches) -> dict[str, list[float]]:
    """Seconds of forward + backward of each model, batch after batch, in alternating order
    (the first two batches warm up, untimed)."""
    times: dict[str, list[float]] = {name: [] for name in models}
    for step in range(args.batches + 2):
        order = list(models) if step % 2 else list(reversed(models))
        for name in order:
            model, sparse_opt = models[name]
            blocks = batches[step % len(batches)]
            torch.manual_seed(step)  # the same dropout keys for both
            with CONTEXTS.get(name, nullcontext)():
                start = time.perf_counter()
                F.cross_entropy(model(blocks), labels[blocks[-1].dst_nodes]).backward()
                seconds = time.perf_counter() - start
            sparse_opt.step()
            model.zero_grad(set_to_none=True)
            if step >= 2:
                times[name].append(seconds)
    return times


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


if __name__ == "__main__":
    main()
