#!/usr/bin/env python
"""Weighted against unweighted random walks (DeepWalk and node2vec) on a random graph.

Contenders: ``graphemb.sampling.walks.RandomWalker`` with uniform (DeepWalk) and biased
(node2vec, ``p`` = 0.5, ``q`` = 2) steps, each unweighted and weighted (edge weights
uniform in [0, 10)). One timed step = one batch of ``--walkers`` walks of ``--length``
steps from the same start nodes. The contenders are timed in interleaved rounds
(``benchmarks/harness/timing.py``), the walker's setup (alias tables, ...) once before.
Prints a table per contender (median and p10-p90 of the step times, setup seconds), the
cost of weights per walk kind (weighted / unweighted time, per-round range), with
``--target`` its verdict line, and the ``BENCH_SUMMARY`` line. Usage::

    python benchmarks/bench_weighted_walks.py --device cuda --nodes 1000000 --edges 10000000
    python benchmarks/bench_weighted_walks.py --quick                  # seconds
"""

from __future__ import annotations

import argparse
import time

import torch
from harness import cli, report, timing

from graphemb.graph import Graph
from graphemb.sampling.walks import RandomWalker

QUICK = {"nodes": 5_000, "edges": 50_000, "walkers": 2_000, "length": 10, "repeats": 2}
KINDS = {"deepwalk": (1.0, 1.0), "node2vec(p=0.5,q=2)": (0.5, 2.0)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes (100,000)")
    parser.add_argument("--edges", type=int, default=1_000_000, help="random edges (1,000,000)")
    parser.add_argument("--walkers", type=int, default=100_000, help="walks per step (100,000)")
    parser.add_argument("--length", type=int, default=40, help="steps per walk (40)")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per round (3)")
    cli.add_timing_options(parser, warmup=1, rounds=3)
    parser.add_argument(
        "--target",
        type=float,
        default=None,
        help="verdict: weighted time at most TARGET x the unweighted, per walk kind",
    )
    args = cli.parse_with_quick(parser, argv, QUICK)
    return args


def random_graph(args: argparse.Namespace, device: torch.device) -> tuple[Graph, torch.Tensor]:
    """The undirected weighted random graph and the walks' start nodes."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, args.nodes, (args.edges,), generator=gen)
    dst = torch.randint(0, args.nodes, (args.edges,), generator=gen)
    weight = torch.rand(args.edges, generator=gen, dtype=torch.float64) * 10
    graph = Graph.from_edges(src, dst, args.nodes, undirected=True, edge_weight=weight)
    start = torch.randint(0, args.nodes, (args.walkers,), generator=gen)
    return graph.to(device), start.to(device)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    cli.apply_allocator(args)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    graph, start = random_graph(args, device)
    report.print_file_header("bench_weighted_walks: weighted against unweighted walks", {})
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"# device {name}, torch threads {torch.get_num_threads()}, {args.nodes:,} nodes, "
        f"{graph.num_edges:,} stored edges, {args.walkers:,} walks of {args.length} steps; "
        f"warm-up {args.warmup} + {args.repeats} steps x {args.rounds} interleaved rounds"
        f"{' | --quick' if args.quick else ''}",
        flush=True,
    )
    runners, setup = {}, {}
    for kind, (p, q) in KINDS.items():
        for weighted in (False, True):
            label = f"{kind} {'weighted' if weighted else 'unweighted'}"
            begin = time.perf_counter()
            walker = RandomWalker(graph, p, q, weighted=weighted)
            setup[label] = time.perf_counter() - begin
            generator = torch.Generator(device=device).manual_seed(1)
            step = (lambda w, g: lambda _: w(start, args.length, generator=g))(walker, generator)
            runners[label] = timing.local_runner(step, sync)
    times = timing.interleaved(
        runners, warmup=args.warmup, steps=args.repeats * args.rounds, rounds=args.rounds
    )
    return summarize(args, times, setup)


def summarize(args: argparse.Namespace, times: dict, setup: dict) -> dict:
    """The table, the cost of weights per walk kind (and its verdict), the summary line."""
    stats = {label: timing.stats_ms(timing.flat(t)) for label, t in times.items()}
    rows = [
        [label, f"{s['median_ms']:.2f}", f"{s['p10_ms']:.2f}-{s['p90_ms']:.2f}",
         f"{setup[label]:.3f}"]
        for label, s in stats.items()
    ]  # fmt: skip
    print()
    report.print_table(["contender", "ms/step", "p10-p90 ms", "setup s"], rows)
    print()
    costs = {}
    for kind in KINDS:
        cost = timing.round_ratios(times[f"{kind} weighted"], times[f"{kind} unweighted"])
        costs[kind] = cost
        line = f"{kind}: weighted / unweighted time {timing.fmt_ratio(cost)}"
        if args.target is not None:
            line += "; " + report.verdict(cost["ratio"], args.target, at_most=True)
        else:
            line += f" (no --target; load before the run {report.START_LOAD:.2f})"
        print(line)
    summary = {
        "benchmark": "weighted_walks",
        "config": {k: v for k, v in vars(args).items() if k != "json"},
        "results": stats,
        "setup_s": setup,
        "weighted_over_unweighted": costs,
    }
    report.emit_summary(summary, args.json)
    return summary


if __name__ == "__main__":
    main()
