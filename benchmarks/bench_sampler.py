#!/usr/bin/env python
"""Neighbour sampling on CPU: graphemb against DGL and GraphBolt, on the same graph and seeds.

Contenders (timed in interleaved rounds by benchmarks/harness/timing.py, the same seed
batches for each), each built and run in a fresh process of its own that imports its own
library only (harness/isolated.py, sampler_workers.py), all with the same allocator
settings (--huge-pages, --omp-wait-policy):

  graphemb blocks    graphemb.sampling.NeighborSampler(fanouts).sample_blocks (the compiled
                     sampler of graphemb_kernels where it is built, else pure torch)
  dgl blocks         dgl.dataloading.NeighborSampler(fanouts).sample_blocks (dgl stack)
  graphbolt blocks   per layer, dgl.graphbolt's FusedCSCSamplingGraph.sample_neighbors then
                     unique_and_compact_csc_formats, as GraphBolt's NeighborSampler does
                     (dgl stack)
  graphemb layer,    one layer of a large frontier (graphemb.sampling.sample_neighbors and
  dgl layer          dgl.sampling.sample_neighbors); not with --panel

Graphs (--graph; --panel runs the three power-law shapes in one go), default 1M nodes and
~21M edges: sbm, a stochastic block model (symmetric); powerlaw-in (alias powerlaw),
in-degrees follow a power law (hubs with tens of thousands of in-edges), sources uniform;
powerlaw-out, out-degrees follow a power law, destinations uniform; symmetric, both
directions of power-law edges. Every library holds the graph in CSC form before timing.

Reports the median ms per call with p10-p90, the speed-up over the faster DGL contender
(ratio of medians, with the range of per-round ratios) and "met" / "NOT MET" against the
target per shape -- only when the 1-minute load average is at most 1 (else "load too high
for a verdict": timings on a busy machine are indicative only). The load average is
printed in the header and at every verdict. The last line is "RESULT {json}".

--busy N runs the same timings with N processes spinning on the cores (a loaded machine,
the same in every run; harness/busy.py): its verdicts hold the speed-up to the loaded
target (1.2x), still only when the machine was quiet before the run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time

from harness import cli, report, timing
from harness.busy import add_busy_option, busy_processes

TARGET_SPEEDUP = 2.0  # graphemb's sample_blocks vs the faster of DGL and GraphBolt, quiet CPU
TARGET_LOADED = 1.2  # the same with --busy processes spinning on the cores
PANEL = ("powerlaw-in", "powerlaw-out", "symmetric")
GRAPHS = ("sbm", "powerlaw", *PANEL)


def parse_args(argv=None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0], __doc__.split("\n\n", 1)[1])
    parser.add_argument(
        "--quick", action="store_true", help="small graph and few rounds: a smoke test"
    )
    parser.add_argument("--graph", choices=GRAPHS, default="sbm")
    parser.add_argument("--panel", action="store_true", help=f"run {', '.join(PANEL)}")
    parser.add_argument("-n", "--num-nodes", type=int, default=None, help="default 1,000,000")
    parser.add_argument(
        "--avg-degree", type=float, default=21.0, help="mean in-degree (default 21)"
    )
    parser.add_argument("--fanouts", default="15,10,5", help="input layer first (DGL's order)")
    parser.add_argument("-b", "--batch-size", type=int, default=1024)
    parser.add_argument(
        "--layer-seeds", type=int, default=None, help="frontier of the one-layer contenders"
    )
    parser.add_argument(
        "--batches", type=int, default=None, help="distinct seed batches, cycled (default 8)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per contender")
    parser.add_argument("--threads", type=int, default=None, help="torch and DGL threads")
    parser.add_argument("--no-dgl", action="store_true", help="leave the DGL contenders out")
    parser.add_argument("--seed", type=int, default=0)
    add_busy_option(parser, "the timings", f"held to {TARGET_LOADED:g}x")
    parser.add_argument("--json", default=None, help="also write the RESULT json to this path")
    args = parser.parse_args(argv)
    quick = args.quick
    if args.num_nodes is None:
        args.num_nodes = 50_000 if quick else 1_000_000
    if args.layer_seeds is None:
        args.layer_seeds = 8_192 if quick else 65_536
    if args.batches is None:
        args.batches = 3 if quick else 8
    if args.rounds is None:
        args.rounds = 2 if quick else 5
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    args.graph = "powerlaw-in" if args.graph == "powerlaw" else args.graph
    return args


# ---------------------------------------------------------------------------- graphs
def _power_law_ends(args, torch, generator, num_edges):
    """Node ids drawn with weight (rank + 1) ** -0.8 (Chung-Lu style), hubs anywhere."""
    weights = torch.arange(1, args.num_nodes + 1, dtype=torch.float64).pow(-0.8)
    cdf = torch.cumsum(weights, 0)
    cdf /= cdf[-1].clone()
    uniform = torch.rand(num_edges, generator=generator, dtype=torch.float64)
    ranked = torch.searchsorted(cdf, uniform).clamp_(max=args.num_nodes - 1)
    return torch.randperm(args.num_nodes, generator=generator)[ranked]


def build_graph(args, torch, shape):
    """(src, dst) int64 edge lists of ``shape`` and the seconds it took."""
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(args.seed)
    num_edges = int(args.num_nodes * args.avg_degree)
    if shape == "sbm":
        from graphemb.datasets import stochastic_block_model

        data = stochastic_block_model(
            args.num_nodes, 16, avg_degree=args.avg_degree, seed=args.seed
        )
        src, dst = data.src, data.dst
    elif shape in ("powerlaw-in", "powerlaw-out"):
        skewed = _power_law_ends(args, torch, generator, num_edges)
        uniform = torch.randint(0, args.num_nodes, (num_edges,), generator=generator)
        src, dst = (uniform, skewed) if shape == "powerlaw-in" else (skewed, uniform)
    else:  # symmetric: half the edges skewed at both ends, stored in both directions
        a = _power_law_ends(args, torch, generator, num_edges // 2)
        b = _power_law_ends(args, torch, generator, num_edges // 2)
        src, dst = torch.cat([a, b]), torch.cat([b, a])
    return src, dst, time.perf_counter() - start


# ---------------------------------------------------------------------------- main
def verdict(speedup: float, quick: bool, busy: int = 0) -> str:
    """``MET`` / ``NOT MET`` against the target, only when the machine was quiet before the
    run (:func:`harness.report.verdict`); with ``busy`` spinning processes, against the
    loaded target."""
    if quick:
        return f"--quick: a smoke test, no verdict (load average {report.load_average():.2f})"
    if busy:
        line = report.verdict(speedup, TARGET_LOADED)
        return f"under {busy} busy processes: {line}; load now {report.load_average():.2f}"
    return f"{report.verdict(speedup, TARGET_SPEEDUP)}; load now {report.load_average():.2f}"


def dgl_note(args) -> str:
    """Why the DGL and GraphBolt contenders are left out, or ``""`` (checked without
    importing DGL here: only their own processes import it)."""
    if args.no_dgl:
        return "DGL and GraphBolt contenders skipped: --no-dgl"
    if importlib.util.find_spec("dgl") is None:
        return "DGL and GraphBolt contenders skipped: dgl is not installed here"
    return ""


def save_workload(args, torch, shape: str, directory: str) -> tuple[int, list]:
    """The graph of ``shape`` and the seed batches, saved for the workers, its sizes
    printed: ``(edges, seed batches)``."""
    import sampler_workers

    src, dst, build_seconds = build_graph(args, torch, shape)
    in_degrees = torch.bincount(dst, minlength=args.num_nodes)
    out_degrees = torch.bincount(src, minlength=args.num_nodes)
    print(
        f"\n## graph {shape}: {args.num_nodes:,} nodes, {src.numel():,} edges, max "
        f"in-degree {int(in_degrees.max()):,}, max out-degree {int(out_degrees.max()):,}; "
        f"generated in {build_seconds:.1f} s"
    )
    generator = torch.Generator().manual_seed(args.seed + 1)
    batches = [
        torch.randperm(args.num_nodes, generator=generator)[: args.batch_size]
        for _ in range(args.batches)
    ]
    layers = [
        torch.randperm(args.num_nodes, generator=generator)[: args.layer_seeds]
        for _ in range(args.batches)
    ]
    sampler_workers.save(directory, src, dst, batches, layers)
    return src.numel(), batches


def start_workers(args, note: str, directory: str) -> dict:
    """One worker process per sampler (harness.isolated); a DGL-family worker that fails
    to build (GraphBolt missing, DGL built for another torch) is left out with the reason."""
    from harness.isolated import start_all

    kinds = ["graphemb blocks"] + ([] if note else ["dgl blocks", "graphbolt blocks"])
    if not args.panel:
        kinds += ["graphemb layer"] + ([] if note else ["dgl layer"])
    spec = {"workload": directory, "num_nodes": args.num_nodes, "fanouts": args.fanouts,
            "seed": args.seed, "threads": args.threads}  # fmt: skip
    builds = {kind: ("sampler_workers:build", dict(spec, kind=kind)) for kind in kinds}
    return start_all(builds, log=lambda line: None)


def time_calls(args, workers: dict) -> tuple[dict, dict]:
    """Every sampler timed in interleaved rounds, and graphemb's speed-up over each peer,
    printed as a table: ``(results, ratios)``."""
    per_round = timing.interleaved(
        {name: worker.runner() for name, worker in workers.items()},
        warmup=args.warmup,
        steps=args.rounds * args.batches,
        rounds=args.rounds,
        log=lambda line: None,
    )
    results = {name: timing.stats_ms(timing.flat(rounds)) for name, rounds in per_round.items()}
    ratios = {
        name: timing.round_ratios(
            per_round[name], per_round[name.replace(name.split()[0], "graphemb")]
        )
        for name in ["dgl blocks", "graphbolt blocks", "dgl layer"]
        if name in results
    }
    report.print_table(
        ["contender", "median ms", "p10-p90 ms", "speed-up of graphemb"],
        [
            [
                name,
                f"{r['median_ms']:.1f}",
                f"{r['p10_ms']:.1f}-{r['p90_ms']:.1f}",
                timing.fmt_ratio(ratios.get(name)),
            ]
            for name, r in results.items()
        ],
    )
    return results, ratios


def run_shape(args, torch, note: str, shape: str) -> dict:
    """Time every sampler on one graph shape, each in a process of its own; print its
    table and verdict."""
    from harness.isolated import close_all

    with tempfile.TemporaryDirectory(prefix="bench-sampler-") as directory:
        edges, _ = save_workload(args, torch, shape, directory)
        workers = start_workers(args, note, directory)
        try:
            # the blocks must look alike: same fanouts, same distribution
            input_nodes = {
                name: worker.command("input_nodes")
                for name, worker in workers.items()
                if name.endswith(" blocks")
            }
            print(
                "# input nodes of the first batch: "
                + ", ".join(f"{k} {v:,}" for k, v in input_nodes.items())
            )
            results, ratios = time_calls(args, workers)
        finally:
            close_all(workers.values())
    summary = {
        "graph": shape,
        "edges": edges,
        "results": results,
        "input_nodes": input_nodes,
    }
    summary["ratios"] = {
        k: {a: b for a, b in v.items() if a != "per_round"} for k, v in ratios.items()
    }
    peers = [name for name in ("dgl blocks", "graphbolt blocks") if name in results]
    if peers:
        faster = min(peers, key=lambda name: results[name]["median_ms"])
        speedup = ratios[faster]["ratio"]
        summary.update(
            faster_peer=faster, speedup=speedup, verdict=verdict(speedup, args.quick, args.busy)
        )
        print(
            f"{shape}: graphemb blocks {speedup:.2f}x the faster peer ({faster}); "
            f"{summary['verdict']}"
        )
    return summary


def main(argv=None) -> dict:
    args = parse_args(argv)
    settings = cli.apply_allocator(args)  # every worker inherits the same settings
    if args.threads is not None:  # every worker's OpenMP runtime reads it at import
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    from harness import allocation

    from graphemb._compiled import compiled_module, disabled

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    args.threads = threads = torch.get_num_threads()
    note = dgl_note(args)
    env = report.environment()
    compiled = hasattr(compiled_module(), "sample_blocks") and not disabled()
    print(f"# bench_sampler {env['date']} | {env['cpu']} | {env['cores']} cores")
    print(
        f"# torch {torch.__version__}, threads {threads} per process, graphemb sampler "
        f"{'compiled' if compiled else 'pure torch'}, every sampler in a process of its own "
        f"with {allocation.describe(settings)} | load average (1 min) "
        f"{report.load_average():.2f}; verdicts only at <= {report.QUIET_LOAD:g}"
    )
    if note:
        print(f"# {note}")
    print(
        f"# fanouts {args.fanouts}, batch {args.batch_size}, {args.batches} batches x "
        f"{args.rounds} interleaved rounds, warm-up {args.warmup}"
    )
    shapes = PANEL if args.panel else (args.graph,)
    with busy_processes(args.busy) as spinning:
        if spinning:
            print(f"# {len(spinning)} busy processes spinning during the timings: a loaded run")
        runs = [run_shape(args, torch, note, shape) for shape in shapes]
    if len(runs) > 1:
        print("\n## panel")
        report.print_table(
            ["graph", "graphemb ms", "dgl ms", "graphbolt ms", "speed-up", "verdict"],
            [
                [
                    run["graph"],
                    *(
                        f"{run['results'][n]['median_ms']:.1f}" if n in run["results"] else "-"
                        for n in ("graphemb blocks", "dgl blocks", "graphbolt blocks")
                    ),
                    f"{run['speedup']:.2f}x" if "speedup" in run else "-",
                    run.get("verdict", "-"),
                ]
                for run in runs
            ],
        )
    summary = {
        "benchmark": "sampler",
        "config": {k: v for k, v in vars(args).items() if k != "json"},
        "sampler": "compiled" if compiled else "torch",
        "dgl_note": note,
        "allocator": settings,
        "load_average_end": report.load_average(),
        "target_speedup": TARGET_LOADED if args.busy else TARGET_SPEEDUP,
        "shapes": runs,
        "results": runs[0]["results"]
        if len(runs) == 1
        else {f"{run['graph']} {name}": r for run in runs for name, r in run["results"].items()},
    }
    report.emit_summary(summary, args.json, prefix="RESULT ")
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
