#!/usr/bin/env python
"""The compiled kernels on torch's OpenMP threads against threads of their own: GraphSAGE
training steps in one process, the two alternating batch by batch.

After each of its parallel operations torch's OpenMP threads spin for a while, waiting for
the next. A kernel that runs on threads of its own right after a torch operation shares
the cores with them; run on the OpenMP runtime torch loaded, it takes those threads
themselves (``csrc/common/parallel.cpp``). Each batch of ``bench_end_to_end.py``'s loop
(sampling, forward, backward, sparse step: ``SparseAdam`` on the embedding and ``Adam`` on
the layers) runs with the kernels on one or the other, in the order own, OpenMP, OpenMP,
own, ... so that neither always follows the other. Prints per phase the median time of
each and the median of the ratios (own / OpenMP: above 1, OpenMP's threads are faster);
the last line is ``BENCH_SUMMARY {json}``. No target: the ratios are reported, not judged.

Needs the compiled kernels (CPU) in a process where torch brought an OpenMP runtime.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from types import SimpleNamespace

from bench_kernel_builds import report
from bench_sampler import GRAPHS, build_graph
from harness import cli
from harness.report import load_average

PHASES = ("sampling", "forward", "backward", "sparse step", "batch")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--graph", choices=GRAPHS, default="powerlaw-out", help="(powerlaw-out)")
    add("--nodes", type=int, default=1_000_000, help="nodes of the graph (1000000)")
    add("--avg-degree", type=float, default=20.0, help="mean in-degree (20)")
    add("--fanouts", default="15,10,5", help="input layer first, DGL's order (15,10,5)")
    add("--batch-size", type=int, default=1024, help="seeds a batch (1024)")
    add("--batches", type=int, default=60, help="batches timed, half on each (60)")
    add("--threads", type=int, default=2, help="torch threads, hence the kernels' (2)")
    add("--seed", type=int, default=0)
    add("--json", help="also write the summary JSON here")
    args = parser.parse_args(argv)
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    if args.batches < 4 or args.batches % 4:
        parser.error(f"--batches must be a multiple of 4, at least 4, got {args.batches}")
    return args


def measure(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Milliseconds of each phase of each timed batch, by where the kernels ran
    ("own", "openmp")."""
    import torch
    import torch.nn.functional as F

    from graphemb import NodeEmbedding
    from graphemb._native.library import library
    from graphemb.graph import Graph
    from graphemb.nn import GraphSAGE
    from graphemb.optim import SparseAdam
    from graphemb.sampling import NeighborSampler

    torch.set_num_threads(args.threads)
    lib = library()
    if not lib.uses_openmp:
        sys.exit("the kernels found no OpenMP runtime in this process: nothing to compare")
    shape = SimpleNamespace(num_nodes=args.nodes, avg_degree=args.avg_degree, seed=args.seed)
    src, dst, _ = build_graph(shape, torch, args.graph)
    graph = Graph.from_edges(src, dst, args.nodes)
    del src, dst
    emb = NodeEmbedding(args.nodes, 64, "probe", init_func=lambda t: t.normal_(0, 0.1))
    model = GraphSAGE(emb, 0, 128, 47, num_layers=len(args.fanouts), dropout=0.5)
    sparse, dense = SparseAdam([emb], lr=0.01), torch.optim.Adam(model.parameters(), lr=0.01)
    sampler, generator = NeighborSampler(args.fanouts), torch.Generator().manual_seed(args.seed)
    labels = torch.randint(0, 47, (args.batch_size,), generator=generator)
    times = {where: {phase: [] for phase in PHASES} for where in ("own", "openmp")}
    for batch in range(-4, args.batches):  # 4 batches warm both up, not kept
        where = "openmp" if batch % 4 in (1, 2) else "own"
        lib.allow_openmp(where == "openmp")
        clock = [time.perf_counter()]
        seeds = torch.randperm(args.nodes, generator=generator)[: args.batch_size]
        blocks = sampler.sample_blocks(graph, seeds, generator)[2]
        clock.append(time.perf_counter())
        loss = F.cross_entropy(model(blocks), labels)
        clock.append(time.perf_counter())
        loss.backward()
        clock.append(time.perf_counter())
        sparse.step()
        dense.step()
        dense.zero_grad()
        clock.append(time.perf_counter())
        if batch >= 0:
            steps = [b - a for a, b in zip(clock[:-1], clock[1:], strict=True)]
            for phase, seconds in zip(PHASES, [*steps, clock[-1] - clock[0]], strict=True):
                times[where][phase].append(1e3 * seconds)
    lib.allow_openmp(True)
    return times


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)
    load = load_average()
    times = measure(args)
    for phase in PHASES:
        own, openmp = (statistics.median(times[w][phase]) for w in ("own", "openmp"))
        print(f"{phase:12s} own threads {own:7.2f} ms  OpenMP's {openmp:7.2f} ms  "
              f"own / OpenMP {own / openmp:.3f}")  # fmt: skip
    fanouts = ",".join(map(str, args.fanouts))
    what = (f"own / OpenMP threads ms a batch, GraphSAGE on {args.graph} {args.nodes:,} nodes, "
            f"fanouts {fanouts}")  # fmt: skip
    # the batches in pairs of neighbours that ran on each (own, OpenMP, OpenMP, own, ...)
    ratios = [o / m for o, m in zip(times["own"]["batch"], times["openmp"]["batch"], strict=True)]
    report(args, "kernel_threads", what, ratios, "batch pairs", load, ms=times)


if __name__ == "__main__":
    main()
