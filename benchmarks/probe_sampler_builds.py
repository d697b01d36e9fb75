#!/usr/bin/env python
"""Two builds of the compiled kernels' neighbour sampler compared round by round in one
process, on one of the sampler panel's graphs.

On a shared or virtual machine the same sampler can take 10 ms in one process and 13 ms
in the next: an A/B of two processes measures the machine, not a change of a few tens of
per cent. Here one process builds the graph once, loads both kernel libraries side by
side and times ``NeighborSampler.sample_blocks`` (the call users make, fanouts 15,10,5 on
1024 seeds by default) with each in turn: base, candidate, base, ... Each round gives both
builds the same seeds and the same generator state, so both sample the same kind of
batch within milliseconds of each other. The figure is the median over rounds of the
base's time over the candidate's (above 1: the candidate is faster), with its smallest
and largest, beside each build's median time.

Both libraries must speak this checkout's interface (``ABI_VERSION``); see
``bench_kernel_builds.py`` for how to build the base from an earlier commit. No target:
the ratio is reported, not judged. The last line is ``BENCH_SUMMARY {json}``.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

from bench_kernel_builds import add_builds, alternate_rounds, measure_and_report, parse_rounds
from bench_sampler import GRAPHS, build_graph
from harness import cli


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0])
    add_builds(parser)
    add = parser.add_argument
    add("--graph", choices=GRAPHS, default="powerlaw-out", help="(powerlaw-out)")
    add("--nodes", type=int, default=1_000_000, help="nodes of the graph (1000000)")
    add("--avg-degree", type=float, default=20.0, help="mean in-degree (20)")
    add("--fanouts", default="15,10,5", help="input layer first, DGL's order (15,10,5)")
    add("--batch-size", type=int, default=1024, help="seeds a batch (1024)")
    args = parse_rounds(parser, argv, rounds=60, calls=5, what="batches")
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    if args.batch_size * args.calls > args.nodes:
        parser.error(f"--calls {args.calls} batches of {args.batch_size} distinct seeds need "
                     f"more than --nodes {args.nodes}")  # fmt: skip
    return args


def measure(args: argparse.Namespace, builds: list) -> dict[str, list[float]]:
    """Milliseconds per batch of each round, by build name ("base", "candidate")."""
    import torch

    from graphemb.graph import Graph
    from graphemb.sampling import NeighborSampler

    torch.set_num_threads(args.threads)
    shape = SimpleNamespace(num_nodes=args.nodes, avg_degree=args.avg_degree, seed=args.seed)
    src, dst, _ = build_graph(shape, torch, args.graph)
    graph = Graph.from_edges(src, dst, args.nodes)
    del src, dst
    sampler = NeighborSampler(args.fanouts)
    order = torch.randperm(args.nodes, generator=torch.Generator().manual_seed(args.seed))
    batches = order[: args.nodes // args.batch_size * args.batch_size].view(-1, args.batch_size)

    def run_call(i: int) -> float:
        generator = torch.Generator().manual_seed(args.seed + i)  # the same for both builds
        started = time.perf_counter()
        sampler.sample_blocks(graph, batches[i % len(batches)], generator)
        return time.perf_counter() - started

    return alternate_rounds(args, builds, run_call)


def describe(args: argparse.Namespace) -> str:
    fanouts = ",".join(map(str, args.fanouts))
    return f"base / candidate ms a batch, {args.graph} {args.nodes:,} nodes, fanouts {fanouts}"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)
    measure_and_report(args, measure, "sampler_builds", describe(args), "batch")


if __name__ == "__main__":
    main()
