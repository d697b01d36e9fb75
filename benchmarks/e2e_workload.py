"""The workload of ``bench_end_to_end.py`` and the contenders built from it, one per
process.

The benchmark's process draws the graph, the labels and the seeds once and saves them
(:func:`save`); every contender's process loads the same tensors (:func:`load`) and builds
its loop (:func:`build`, the builder of :class:`harness.isolated.IsolatedContender`):
graphemb's, or one of DGL's. A process imports only its own library: graphemb's loop
imports no DGL, DGL's loops import no graphemb (the ``info`` answer lists what each process
imported, and the benchmark prints it).
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

#: The contenders a worker process can build: kind -> what it is.
KINDS = {
    "graphemb": "graphemb: SeedLoader, NeighborSampler, GraphSAGE, NodeEmbedding, SparseAdam",
    "graphemb-pyg": "graphemb with the layers aggregating as PyG's SAGEConv does on adj_t",
    "dgl": "DGL's documented loop: DataLoader, SAGEConv, NodeEmbedding, SparseAdam "
    "(zero_grad() every batch, as DGL's examples)",
    "dgl-torch-rows": "DGL's loop with the rows in torch's nn.Embedding(sparse=True) + SparseAdam",
    "dgl-docstring": "DGL's loop as its NodeEmbedding / SparseAdam docstrings write it: "
    "SparseAdam.zero_grad() never called",
}
#: The name each DGL kind is timed and reported under.
DGL_NAMES = {
    "dgl": "dgl documented loop 1 proc",
    "dgl-torch-rows": "dgl + torch SparseAdam 1 proc",
    "dgl-docstring": "dgl docstring loop (no SparseAdam.zero_grad) 1 proc",
}
_FILE = "workload.pt"


def graphemb_name(threads: int) -> str:
    """The name of graphemb's single-process contender with ``threads`` torch threads."""
    return f"graphemb 1 proc x {threads} thr"


def save(args, directory: str) -> dict:
    """Draw the graph of ``args.graph`` (``bench_sampler.py``'s shapes), the labels and the
    seeds, and save them in ``directory``. Returns what the header prints: edges, seconds.

    The seeds are one random permutation's first ``batches * batch_size`` nodes: batch ``i``
    is ``seeds[i * B:(i + 1) * B]`` for every contender (distinct seeds, as every loader
    requires of an epoch).
    """
    import torch
    from bench_sampler import build_graph

    src, dst, seconds = build_graph(
        SimpleNamespace(num_nodes=args.num_nodes, avg_degree=args.avg_degree, seed=args.seed),
        torch,
        args.graph,
    )
    generator = torch.Generator().manual_seed(args.seed + 1)
    labels = torch.randint(0, args.classes, (args.num_nodes,), generator=generator)
    count = batches_needed(args)
    if count * args.batch_size > args.num_nodes:
        raise SystemExit(
            f"{count} batches of {args.batch_size} distinct seeds need {count * args.batch_size:,}"
            f" nodes; the graph has {args.num_nodes:,}"
        )
    seeds = torch.randperm(args.num_nodes, generator=generator)[: count * args.batch_size]
    tensors = {"src": src, "dst": dst, "labels": labels, "seeds": seeds}
    torch.save(tensors, os.path.join(directory, _FILE))
    return {"edges": int(src.numel()), "seconds": seconds}


def batches_needed(args) -> int:
    """Seed batches of a run: warm-up, timed and profiled batches, and two spare."""
    return args.warmup + args.steps + args.profile_steps + 2


def load(args) -> SimpleNamespace:
    """The workload saved by :func:`save` in ``args.workload``: ``src``, ``dst``,
    ``labels``, ``seeds`` and ``num_batches``."""
    import torch

    tensors = torch.load(os.path.join(args.workload, _FILE))
    return SimpleNamespace(**tensors, num_batches=tensors["seeds"].numel() // args.batch_size)


def build(spec: dict):
    """The contender ``spec["kind"]`` (one of :data:`KINDS`) named ``spec["name"]``, built
    on the saved workload; its ``info`` operation answers what the process imported."""
    args = SimpleNamespace(**spec)
    work = load(args)
    if args.kind.startswith("graphemb"):
        import e2e_loops

        contender = e2e_loops.graphemb_contender(
            args, work, args.name, pyg_aggregation=args.kind == "graphemb-pyg"
        )
    elif args.kind in KINDS:
        os.environ.setdefault("DGLBACKEND", "pytorch")
        import e2e_dgl

        contender = e2e_dgl.dgl_contender(
            args,
            work,
            args.name,
            rows="torch" if args.kind == "dgl-torch-rows" else "dgl",
            zero_grad=args.kind != "dgl-docstring",
        )
    else:
        raise ValueError(f"unknown contender kind {args.kind!r}; one of {sorted(KINDS)}")
    work.src = work.dst = work.graph = None  # the contender holds the graph now
    contender.ops["info"] = process_info
    return contender


def process_info() -> dict:
    """What this process runs with: the graph libraries it imported (with versions), its
    torch threads and its allocator settings."""
    import torch
    from harness import allocation

    libraries = {}
    for name in ("graphemb", "dgl", "torch_geometric"):
        module = sys.modules.get(name)
        if module is not None:
            libraries[name] = getattr(module, "__version__", "?")
    return {
        "libraries": libraries,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "allocator": allocation.current(),
    }
