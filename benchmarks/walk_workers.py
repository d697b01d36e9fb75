"""The walkers of ``bench_walks.py``, each built in a process of its own
(:class:`harness.isolated.IsolatedContender`) from one saved workload.

A worker imports its own library only: graphemb's walkers import no DGL, DGL's import no
graphemb (each builds its graph from the same edge lists). Timed unit: one call walking
from start batch ``i`` (``i`` modulo the batches), every walker ``length`` steps.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

#: kind -> what a worker of that kind times.
KINDS = {
    "graphemb deepwalk": "graphemb.sampling.RandomWalker(graph)(start, length): the compiled "
    "walker",
    "graphemb-torch deepwalk": "the same with GRAPHEMB_DISABLE_KERNELS=1: the pure-torch walker "
    "(what a GPU runs)",
    "dgl deepwalk": "dgl.sampling.random_walk(graph, start, length=length)",
    "graphemb node2vec": "graphemb.sampling.RandomWalker(graph, p, q)(start, length)",
    "graphemb-torch node2vec": "the same, pure torch",
    "dgl node2vec": "dgl.sampling.node2vec_random_walk(graph, start, p, q, length)",
}
_FILE = "walk_workload.pt"


def save(directory: str, src, dst, starts: list) -> None:
    """The edge lists and the start batches, for every worker."""
    import torch

    torch.save({"src": src, "dst": dst, "starts": starts}, os.path.join(directory, _FILE))


def build(spec: dict):
    """The walker ``spec["kind"]`` (one of :data:`KINDS`) on the saved workload, as a
    harness Contender."""
    import torch
    from harness.peers import Contender

    args = SimpleNamespace(**spec)
    if args.kind not in KINDS:
        raise ValueError(f"unknown walker {args.kind!r}; one of {sorted(KINDS)}")
    saved = torch.load(os.path.join(args.workload, _FILE))
    starts = saved["starts"]
    p, q = (args.p, args.q) if args.kind.endswith("node2vec") else (1.0, 1.0)
    if args.kind.startswith("graphemb"):
        if args.kind.startswith("graphemb-torch"):  # read at every call: set before the first
            os.environ["GRAPHEMB_DISABLE_KERNELS"] = "1"
        walk = _graphemb(args, saved, p, q)
    else:
        os.environ.setdefault("DGLBACKEND", "pytorch")
        walk = _dgl(args, saved, p, q)
    del saved

    def step(i: int):
        return walk(starts[i % len(starts)])

    return Contender(args.kind, args.kind.split()[0], "-", len(starts[0]), step, step)


def _graphemb(args, saved, p: float, q: float):
    import torch

    from graphemb.graph import Graph
    from graphemb.sampling import RandomWalker

    graph = Graph.from_edges(saved["src"], saved["dst"], args.num_nodes)
    walker = RandomWalker(graph, p, q)
    generator = torch.Generator().manual_seed(args.seed + 2)
    return lambda start: walker(start, args.length, generator=generator)


def _dgl(args, saved, p: float, q: float):
    import dgl

    if args.threads:
        dgl.utils.set_num_threads(args.threads)
    graph = dgl.graph((saved["src"], saved["dst"]), num_nodes=args.num_nodes)
    graph.create_formats_()
    dgl.seed(args.seed + 2)
    if p == q == 1.0:
        return lambda start: dgl.sampling.random_walk(graph, start, length=args.length)[0]
    return lambda start: dgl.sampling.node2vec_random_walk(graph, start, p, q, args.length)
