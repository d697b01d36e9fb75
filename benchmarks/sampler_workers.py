"""The samplers of ``bench_sampler.py``, each built in a process of its own
(:class:`harness.isolated.IsolatedContender`) from one saved workload.

A worker imports its own library only: graphemb's samplers import no DGL, DGL's and
GraphBolt's import no graphemb (each holds the graph in its own CSC form, built from the
same edge lists). Timed unit: one call on seed batch ``i`` (``i`` modulo the batches).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

#: kind -> what a worker of that kind times.
KINDS = {
    "graphemb blocks": "graphemb.sampling.NeighborSampler(fanouts).sample_blocks",
    "dgl blocks": "dgl.dataloading.NeighborSampler(fanouts).sample_blocks",
    "graphbolt blocks": "per layer, GraphBolt's FusedCSCSamplingGraph.sample_neighbors and "
    "unique_and_compact_csc_formats, as GraphBolt's NeighborSampler does",
    "graphemb layer": "graphemb.sampling.sample_neighbors, one layer of a large frontier",
    "dgl layer": "dgl.sampling.sample_neighbors, one layer of a large frontier",
}
_FILE = "sampler_workload.pt"


def save(directory: str, src, dst, batches: list, layers: list) -> None:
    """The edge lists and the seed batches (blocks' and one layer's), for every worker."""
    import torch

    tensors = {"src": src, "dst": dst, "batches": batches, "layers": layers}
    torch.save(tensors, os.path.join(directory, _FILE))


def build(spec: dict):
    """The sampler ``spec["kind"]`` (one of :data:`KINDS`) on the saved workload, as a
    harness Contender; its operation ``input_nodes`` counts batch 0's input nodes."""
    import torch
    from harness.peers import Contender

    args = SimpleNamespace(**spec)
    saved = torch.load(os.path.join(args.workload, _FILE))
    inputs = saved["layers"] if args.kind.endswith(" layer") else saved["batches"]
    if args.kind.startswith("graphemb"):
        call = _graphemb(args, saved)
    elif args.kind in KINDS:
        os.environ.setdefault("DGLBACKEND", "pytorch")
        call = _dgl(args, saved)
    else:
        raise ValueError(f"unknown sampler {args.kind!r}; one of {sorted(KINDS)}")
    del saved

    def step(i: int):
        return call(inputs[i % len(inputs)])

    contender = Contender(args.kind, args.kind.split()[0], "-", len(inputs[0]), step, step)
    contender.ops["input_nodes"] = lambda: int(call(inputs[0])[0].numel())
    return contender


def _graphemb(args, saved):
    import torch

    from graphemb.graph import Graph
    from graphemb.sampling import NeighborSampler, sample_neighbors

    graph = Graph.from_edges(saved["src"], saved["dst"], args.num_nodes)
    generator = torch.Generator().manual_seed(2)
    if args.kind == "graphemb layer":
        fanout = args.fanouts[0]
        return lambda seeds: sample_neighbors(graph, seeds, fanout, generator)
    sampler = NeighborSampler(args.fanouts)
    return lambda seeds: sampler.sample_blocks(graph, seeds, generator)


def _dgl(args, saved):
    import dgl
    import torch

    if args.threads:
        dgl.utils.set_num_threads(args.threads)
    graph = dgl.graph((saved["src"], saved["dst"]), num_nodes=args.num_nodes)
    graph.create_formats_()
    dgl.seed(args.seed + 2)
    if args.kind == "dgl layer":
        fanout = args.fanouts[0]
        return lambda seeds: dgl.sampling.sample_neighbors(graph, seeds, fanout)
    if args.kind == "dgl blocks":
        sampler = dgl.dataloading.NeighborSampler(args.fanouts)
        return lambda seeds: sampler.sample_blocks(graph, seeds)
    import dgl.graphbolt as gb

    indptr, indices, _ = graph.adj_tensors("csc")
    return graphbolt_sampler(gb, indptr, indices, torch, args.fanouts)


def graphbolt_sampler(gb, indptr, indices, torch, fanouts):
    """GraphBolt's per-layer pipeline: sample_neighbors, then unique_and_compact_csc_formats."""
    csc = gb.fused_csc_sampling_graph(indptr, indices)
    layer_fanouts = [torch.LongTensor([f]) for f in fanouts]

    def sample(seeds):
        blocks = []
        for fanout in reversed(layer_fanouts):
            subgraph = csc.sample_neighbors(seeds, fanout)
            src_nodes, compacted = gb.unique_and_compact_csc_formats(subgraph.sampled_csc, seeds)
            blocks.insert(0, (src_nodes, compacted))
            seeds = src_nodes
        return seeds, blocks

    return sample
