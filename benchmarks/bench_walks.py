#!/usr/bin/env python
"""Random walks against DGL's: DeepWalk's uniform walks and node2vec's biased ones.

Contenders (each in a process of its own, importing its own library only, all with the
same allocator settings; ``walk_workers.py``): graphemb's ``RandomWalker`` (the compiled
walker on CPU), the same with ``GRAPHEMB_DISABLE_KERNELS=1`` (its pure-torch walker, what
a GPU runs), and DGL's ``dgl.sampling.random_walk`` and ``node2vec_random_walk`` (dgl
stack; left out where DGL does not import). One timed call walks ``--walkers`` walkers
``--length`` steps from a batch of distinct start nodes; the calls are timed in
interleaved rounds (``harness/timing.py``).

Graphs (``bench_sampler.py``'s shapes): symmetric, power-law degrees at both ends of
every edge, stored in both directions; sbm, a stochastic block model of 16 blocks. Walks
follow out-edges, so both are graphs a walk does not leave early.

Prints, per graph, a table (median ms per call, p10-p90, steps per second, graphemb's
speed-up over each contender: ratio of medians with the range of per-round ratios) and a
line per walk kind. No target: the ratios are reported with the load average before the
run. The last line is ``BENCH_SUMMARY {json}``.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from harness import cli, report, timing

PANEL = ("symmetric", "sbm")
QUICK = {"num_nodes": 20_000, "walkers": 2_000, "length": 10, "rounds": 2, "batches": 2}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0], __doc__.split("\n\n", 1)[1])
    add = parser.add_argument
    add("--graph", choices=PANEL, default=None, help="one graph (default: both)")
    add("-n", "--num-nodes", type=int, default=1_000_000, help="nodes (1,000,000)")
    add("--avg-degree", type=float, default=21.0, help="mean degree (21)")
    add("--walkers", type=int, default=100_000, help="walkers a call (100,000)")
    add("--length", type=int, default=40, help="steps a walk (40)")
    add("--p", type=float, default=0.5, help="node2vec's return parameter (0.5)")
    add("--q", type=float, default=2.0, help="node2vec's in-out parameter (2)")
    add("--batches", type=int, default=4, help="distinct start batches, cycled (4)")
    add("--threads", type=int, default=2, help="torch's and DGL's threads in every worker (2)")
    add("--no-dgl", action="store_true", help="leave the DGL contenders out")
    add("--seed", type=int, default=0)
    cli.add_timing_options(parser, warmup=1, rounds=5)
    args = cli.parse_with_quick(parser, argv, QUICK)
    if args.walkers > args.num_nodes:
        parser.error(f"--walkers {args.walkers} distinct start nodes need as many --num-nodes")
    return args


def dgl_missing() -> str:
    """Why the DGL contenders are left out, or ``""`` (checked without importing DGL)."""
    import importlib.util

    return "" if importlib.util.find_spec("dgl") is not None else "DGL is not installed"


def run_graph(args: argparse.Namespace, shape: str, kinds: list[str]) -> dict:
    """Every walker timed on the graph ``shape``, each in a process of its own."""
    import torch
    import walk_workers
    from bench_sampler import build_graph
    from harness.isolated import close_all, start_all

    src, dst, _ = build_graph(args, torch, shape)
    generator = torch.Generator().manual_seed(args.seed + 1)
    starts = [torch.randperm(args.num_nodes, generator=generator)[: args.walkers]
              for _ in range(args.batches)]  # fmt: skip
    print(f"\n## graph {shape}: {args.num_nodes:,} nodes, {src.numel():,} edges")
    with tempfile.TemporaryDirectory(prefix="bench-walks-") as directory:
        walk_workers.save(directory, src, dst, starts)
        del src, dst
        spec = {"workload": directory, "num_nodes": args.num_nodes, "length": args.length,
                "p": args.p, "q": args.q, "seed": args.seed, "threads": args.threads}  # fmt: skip
        builds = {kind: ("walk_workers:build", dict(spec, kind=kind)) for kind in kinds}
        workers = start_all(builds, log=lambda line: None)
        try:
            per_round = timing.interleaved(
                {name: worker.runner() for name, worker in workers.items()},
                warmup=args.warmup, steps=args.rounds * args.batches, rounds=args.rounds,
                log=lambda line: None,
            )  # fmt: skip
        finally:
            close_all(workers.values())
    return summarize(args, shape, per_round)


def summarize(args: argparse.Namespace, shape: str, per_round: dict) -> dict:
    """The graph's table and lines: graphemb's speed-up over every other walker of a kind."""
    results = {name: timing.stats_ms(timing.flat(rounds)) for name, rounds in per_round.items()}
    steps = args.walkers * args.length
    ratios = {}
    for name in results:
        ours = "graphemb " + name.split()[1]
        if name != ours and ours in per_round:
            ratios[name] = timing.round_ratios(per_round[name], per_round[ours])
    rows = [[name, f"{r['median_ms']:.1f}", f"{r['p10_ms']:.1f}-{r['p90_ms']:.1f}",
             f"{steps / r['median_ms'] / 1e3:.1f}M", timing.fmt_ratio(ratios.get(name))]
            for name, r in results.items()]  # fmt: skip
    report.print_table(["walker", "median ms", "p10-p90 ms", "steps/s", "graphemb's speed-up"],
                       rows)  # fmt: skip
    lines = []
    for name, ratio in ratios.items():
        kind = name.split()[1]
        ours_ms, theirs_ms = results["graphemb " + kind]["median_ms"], results[name]["median_ms"]
        load = f"load before the run {report.START_LOAD:.2f}"
        lines.append(f"{shape}: {kind}: graphemb {ours_ms:.1f} ms, {name} {theirs_ms:.1f} ms: "
                     f"{timing.fmt_ratio(ratio)} ({load})")  # fmt: skip
    for line in lines:
        print(line)
    clean = {k: {a: b for a, b in v.items() if a != "per_round"} for k, v in ratios.items()}
    return {"graph": shape, "results": results, "ratios": clean, "lines": lines}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    settings = cli.apply_allocator(args)  # every worker inherits the same settings
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # every worker's OpenMP reads it
    from harness import allocation

    missing = "" if args.no_dgl else dgl_missing()
    kinds = [kind for kind in ("graphemb deepwalk", "graphemb-torch deepwalk", "dgl deepwalk",
                               "graphemb node2vec", "graphemb-torch node2vec", "dgl node2vec")
             if not (kind.startswith("dgl") and (args.no_dgl or missing))]  # fmt: skip
    env = report.environment()
    print(f"# bench_walks {env['date']} | {env['cpu']} | {env['cores']} cores | "
          f"{args.threads} threads per process, {allocation.describe(settings)} | load average "
          f"(1 min) {report.load_average():.2f}")  # fmt: skip
    print(
        f"# {args.walkers:,} walkers x {args.length} steps a call, node2vec p {args.p} q "
        f"{args.q}, {args.batches} start batches x {args.rounds} rounds"
        + (f"; DGL left out: {missing or '--no-dgl'}" if missing or args.no_dgl else "")
    )
    graphs = [run_graph(args, shape, kinds) for shape in ((args.graph,) if args.graph else PANEL)]
    config = {key: value for key, value in vars(args).items() if key != "json"}
    report.emit_summary({"benchmark": "walks", "config": config, "graphs": graphs}, args.json)


if __name__ == "__main__":
    main()
