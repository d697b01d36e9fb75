#!/usr/bin/env python
"""Neighbour sampling on CPU: graphemb against DGL, in one run, on the same graph and seeds.

Contenders (timed in interleaved rounds, the same seed batches for each):

  graphemb blocks   graphemb.sampling.NeighborSampler(fanouts).sample_blocks
  dgl blocks        dgl.dataloading.NeighborSampler(fanouts).sample_blocks (dgl stack only)
  graphemb layer    graphemb.sampling.sample_neighbors, one layer of a large frontier
  dgl layer         dgl.sampling.sample_neighbors, the same layer (dgl stack only)

The graph is a stochastic block model (graphemb.datasets.stochastic_block_model: symmetric,
no duplicate edges; default 1M nodes, ~21M directed edges) or, with --graph powerlaw, a
directed graph whose in-degrees follow a power law (hubs with tens of thousands of
in-edges). Both libraries hold the graph in CSC form before timing starts (DGL's formats
are created up front). Reports the median ms per call with p10-p90, the speed-up over DGL
(ratio of medians, with the range of per-round ratios), the sizes of the sampled blocks for
both (they must agree: same fanouts, same distribution), and a per-phase split of
graphemb's sampler (edge draws vs relabelling). Timing runs with --threads torch threads
and as many DGL OpenMP threads; other processes slow both alike, but read absolute
numbers with the load average printed in the header. The last line is "RESULT {json}".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone

TARGET_SPEEDUP = 1.2  # graphemb's sample_blocks at least 1.2x as fast as DGL's on CPU


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small graph and few rounds: a smoke test of a few seconds",
    )
    parser.add_argument("--graph", choices=("sbm", "powerlaw"), default="sbm")
    parser.add_argument("-n", "--num-nodes", type=int, default=None, help="default 1,000,000")
    parser.add_argument(
        "--avg-degree",
        type=float,
        default=21.0,
        help="mean in-degree (default 21: ~21M edges on 1M nodes)",
    )
    parser.add_argument("--fanouts", default="15,10,5", help="input layer first (DGL's order)")
    parser.add_argument("-b", "--batch-size", type=int, default=1024)
    parser.add_argument(
        "--layer-seeds",
        type=int,
        default=None,
        help="frontier size of the one-layer contenders (default 65,536)",
    )
    parser.add_argument(
        "--batches", type=int, default=None, help="distinct seed batches, cycled (default 8)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per contender")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch and DGL threads (default: torch's default)"
    )
    parser.add_argument("--no-dgl", action="store_true", help="leave the DGL contenders out")
    parser.add_argument("--seed", type=int, default=0)
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
    return args


# ---------------------------------------------------------------------------- graphs
def build_graph(args, torch):
    """(src, dst) int64 edge lists and the time it took."""
    start = time.perf_counter()
    if args.graph == "sbm":
        from graphemb.datasets import stochastic_block_model

        data = stochastic_block_model(
            args.num_nodes, 16, avg_degree=args.avg_degree, seed=args.seed
        )
        src, dst = data.src, data.dst
    else:
        # Chung-Lu style: sources uniform, destinations with weight (rank + 1) ** -0.8, so
        # in-degrees follow a power law; vectorised, a few seconds for 20M edges.
        generator = torch.Generator().manual_seed(args.seed)
        num_edges = int(args.num_nodes * args.avg_degree)
        weights = torch.arange(1, args.num_nodes + 1, dtype=torch.float64).pow(-0.8)
        cdf = torch.cumsum(weights, 0)
        cdf /= cdf[-1].clone()
        uniform = torch.rand(num_edges, generator=generator, dtype=torch.float64)
        ranked = torch.searchsorted(cdf, uniform).clamp_(max=args.num_nodes - 1)
        relabel = torch.randperm(args.num_nodes, generator=generator)  # hubs anywhere
        dst = relabel[ranked]
        src = torch.randint(0, args.num_nodes, (num_edges,), generator=generator)
    return src, dst, time.perf_counter() - start


# ---------------------------------------------------------------------------- timing
def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_rounds(contenders, inputs, rounds, warmup):
    """{name: [seconds per call]} and {name: [median seconds per round]}: every round runs
    each contender over all inputs, in an order that rotates from round to round."""
    names = list(contenders)
    for name in names:
        for index in range(warmup):
            contenders[name](inputs[name][index % len(inputs[name])])
    times, per_round = defaultdict(list), defaultdict(list)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            this_round = []
            for item in inputs[name]:
                start = time.perf_counter()
                contenders[name](item)
                this_round.append(time.perf_counter() - start)
            times[name] += this_round
            per_round[name].append(statistics.median(this_round))
    return times, per_round


class PhaseTimer:
    """Times graphemb's sampler phases by wrapping its internals from outside."""

    def __init__(self, module):
        self.module, self.seconds, self.calls = module, defaultdict(float), defaultdict(int)
        self.originals = {}

    def __enter__(self):
        for name, label in (("_sample_edges", "edge draws"), ("_relabel", "relabel")):
            original = getattr(self.module, name)
            self.originals[name] = original

            def timed(*args, _original=original, _label=label):
                start = time.perf_counter()
                try:
                    return _original(*args)
                finally:
                    self.seconds[_label] += time.perf_counter() - start
                    self.calls[_label] += 1

            setattr(self.module, name, timed)
        return self

    def __exit__(self, *exc):
        for name, original in self.originals.items():
            setattr(self.module, name, original)


# ---------------------------------------------------------------------------- main
def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads is not None:  # DGL's OpenMP runtime reads it at import
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    from graphemb.graph import Graph
    from graphemb.sampling import NeighborSampler, neighbor, sample_neighbors

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    dgl, dgl_note = None, None
    if not args.no_dgl:
        try:
            os.environ.setdefault("DGLBACKEND", "pytorch")
            import dgl  # type: ignore[no-redef]

            dgl.utils.set_num_threads(threads)
        except Exception as error:  # ImportError, or DGL built against another torch
            dgl, dgl_note = None, f"DGL contenders skipped: cannot import dgl ({error})"
    else:
        dgl_note = "DGL contenders skipped: --no-dgl"

    print(f"# bench_sampler  {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, dgl {dgl.__version__ if dgl else '-'}, "
        f"threads {threads}, load average {os.getloadavg()[0]:.2f}"
    )
    if dgl_note:
        print(f"# {dgl_note}")

    src, dst, build_seconds = build_graph(args, torch)
    start = time.perf_counter()
    graph = Graph.from_edges(src, dst, args.num_nodes)
    csc_seconds = time.perf_counter() - start
    dgl_graph = None
    if dgl is not None:
        dgl_graph = dgl.graph((src, dst), num_nodes=args.num_nodes)
        dgl_graph.create_formats_()
    del src, dst
    degrees = graph.in_degrees()
    print(
        f"# graph {args.graph}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
        f"in-degree mean {degrees.double().mean():.1f} max {int(degrees.max()):,}; "
        f"generated in {build_seconds:.1f} s, CSC in {csc_seconds:.1f} s"
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
    ours = NeighborSampler(args.fanouts)
    ours_generator = torch.Generator().manual_seed(args.seed + 2)
    layer_fanout = args.fanouts[0]
    contenders = {
        "graphemb blocks": lambda seeds: ours.sample_blocks(graph, seeds, ours_generator),
        "graphemb layer": lambda seeds: sample_neighbors(
            graph, seeds, layer_fanout, ours_generator
        ),
    }
    inputs = {"graphemb blocks": batches, "graphemb layer": layers}
    if dgl_graph is not None:
        theirs = dgl.dataloading.NeighborSampler(args.fanouts)
        dgl.seed(args.seed + 2)
        contenders["dgl blocks"] = lambda seeds: theirs.sample_blocks(dgl_graph, seeds)
        contenders["dgl layer"] = lambda seeds: dgl.sampling.sample_neighbors(
            dgl_graph, seeds, layer_fanout
        )
        inputs["dgl blocks"], inputs["dgl layer"] = batches, layers

    # Sizes: the sampled blocks of both libraries must look alike.
    sizes = {}
    for name in ("graphemb blocks", "dgl blocks"):
        if name not in contenders:
            continue
        input_nodes, _, blocks = contenders[name](batches[0])
        edges = [int(b.num_edges if name.startswith("graphemb") else b.num_edges()) for b in blocks]
        sizes[name] = {"input_nodes": int(input_nodes.numel()), "edges_per_block": edges}
        print(f"# {name}: {sizes[name]['input_nodes']:,} input nodes, edges per block {edges}")

    times, per_round = run_rounds(contenders, inputs, args.rounds, args.warmup)
    results = {}
    print(f"\n{'contender':18s} {'median ms':>10s} {'p10':>8s} {'p90':>8s} {'calls':>6s}")
    for name, seconds in times.items():
        ms = [s * 1e3 for s in seconds]
        results[name] = {
            "median_ms": statistics.median(ms),
            "p10_ms": percentile(ms, 0.1),
            "p90_ms": percentile(ms, 0.9),
            "min_ms": min(ms),
            "calls": len(ms),
        }
        r = results[name]
        print(
            f"{name:18s} {r['median_ms']:10.1f} {r['p10_ms']:8.1f} {r['p90_ms']:8.1f} "
            f"{r['calls']:6d}"
        )

    ratios = {}
    for unit in ("blocks", "layer"):
        if f"dgl {unit}" not in results:
            continue
        overall = results[f"dgl {unit}"]["median_ms"] / results[f"graphemb {unit}"]["median_ms"]
        rounds = [
            d / g
            for d, g in zip(per_round[f"dgl {unit}"], per_round[f"graphemb {unit}"], strict=True)
        ]
        ratios[unit] = {
            "speedup_vs_dgl": overall,
            "round_min": min(rounds),
            "round_max": max(rounds),
        }
    print()
    for unit, ratio in ratios.items():
        verdict = ""
        if unit == "blocks" and args.quick:
            verdict = "  (--quick: a smoke test; the target is judged at full size)"
        elif unit == "blocks":
            verdict = f"  target >= {TARGET_SPEEDUP}x: " + (
                "MET" if ratio["speedup_vs_dgl"] >= TARGET_SPEEDUP else "NOT MET"
            )
        print(
            f"speed-up over DGL, {unit}: {ratio['speedup_vs_dgl']:.2f}x "
            f"[rounds {ratio['round_min']:.2f}-{ratio['round_max']:.2f}]{verdict}"
        )

    # Where graphemb's time goes (separate, untimed-above calls).
    with PhaseTimer(neighbor) as phases:
        start = time.perf_counter()
        for seeds in batches:
            ours.sample_blocks(graph, seeds, ours_generator)
        total = time.perf_counter() - start
    split = {label: 1e3 * s / len(batches) for label, s in phases.seconds.items()}
    split["other"] = 1e3 * total / len(batches) - sum(split.values())
    print("graphemb blocks per call: " + ", ".join(f"{k} {v:.1f} ms" for k, v in split.items()))

    summary = {
        "benchmark": "sampler",
        "config": {k: v for k, v in vars(args).items() if k != "json"},
        "environment": {
            "torch": torch.__version__,
            "dgl": dgl.__version__ if dgl else None,
            "threads": threads,
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg()[0],
            "dgl_note": dgl_note,
        },
        "graph": {
            "nodes": graph.num_nodes,
            "edges": graph.num_edges,
            "max_in_degree": int(degrees.max()),
        },
        "sizes": sizes,
        "results": results,
        "ratios": ratios,
        "graphemb_phases_ms": split,
        "target_speedup_vs_dgl": TARGET_SPEEDUP,
    }
    line = json.dumps(summary)
    print("RESULT " + line)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(line + "\n")
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
