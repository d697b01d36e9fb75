#!/usr/bin/env python
"""GraphSAGE with a learnable node embedding, end to end: graphemb against DGL, one run.

The loop a user writes, per batch of seed nodes: sample the blocks (fanouts 15,10,5), read
the input nodes' rows of a learnable 64-d embedding (the only input), three mean-aggregator
SAGEConv layers (hidden 128, 47 classes), cross-entropy, backward, a sparse Adam step on
the rows and a dense Adam step on the layers. Contenders, timed in interleaved rounds on
the same graph and the same seed batches:

  graphemb 1 proc      graphemb.sampling.NeighborSampler + graphemb.nn.GraphSAGE (PyG's
                       SAGEConv on graphemb's blocks) + graphemb.NodeEmbedding +
                       graphemb.optim.SparseAdam; --threads torch threads
  dgl 1 proc           dgl.dataloading.NeighborSampler + dgl.nn.SAGEConv +
                       dgl.nn.NodeEmbedding + dgl.optim.SparseAdam (dgl stack only); the
                       same threads
  dgl + torch SparseAdam   the same DGL loop with the rows in torch's
                       nn.Embedding(sparse=True) and torch.optim.SparseAdam
  graphemb 2 proc      2 processes x 1 thread (--procs 2): the embedding in shared memory,
                       the layers in DistributedDataParallel, half of every batch per rank
  graphemb 2 proc ..., no exchange
                       the same ranks, each training its half of every batch on rows and
                       layers of its own: no gradient push, no all-reduce, no barrier, so
                       not one model. Not a contender but a yardstick for the row above:
                       its ranks without the exchange (each updates every row its half
                       touched, where the pair's owners split the rows between them)
  graphemb-pyg-aggr    (--pyg-aggregation) graphemb 1 proc whose layers aggregate as PyG's
                       SAGEConv does on block.adj_t: the layers before graphemb's own
                       aggregation (graphemb.nn.aggregation), same run

The graph is one of bench_sampler.py's shapes (--graph: power-law in-degrees with uniform
sources, the default; power-law out-degrees; or symmetric; default 1M nodes, 20M edges).
Prints the median ms per batch of 1024 seeds with the per-round spread, the speed-ups over
both DGL loops (ratio of medians, range of per-round ratios; targets 4x DGL's own, 2x the
torch-SparseAdam one), of 2 processes x 1 thread over 1 x 2 (target 1x) and of their
no-exchange yardstick over 1 x 2 (no target: the pair without its exchange), of the profiled
forward + backward over DGL's (target 1.2x), and a per-phase breakdown read from
``torch.profiler`` spans -- sampling, forward (model + loss), backward, sparse step, dense
step -- with the operators that spent the most time in each. With --procs above 1 it first
prints what share of the whole batch's input rows and first-layer edges one rank's part of
the seeds reaches (the ranks' frontiers overlap at the hubs, so each rank does more than
1/procs of the work). ``--device cuda`` runs the
layers, the embedding and the sampler on the GPU. The last line is ``BENCH_SUMMARY {json}``.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace

import e2e_loops as loops
from harness.busy import add_busy_option, busy_processes

TARGET_SPEEDUP = 4.0  # graphemb per batch at least 4x DGL's, 1 process (dgl stack)
TARGET_TORCH_ROWS = 2.0  # ... and 2x DGL's loop with torch's SparseAdam on its rows
TARGET_LAYERS = 1.2  # forward + backward at least 1.2x DGL's
TARGET_PROCS = 1.0  # 2 processes x 1 thread at least as fast as 1 process x 2 threads
DGL = "dgl 1 proc"
DGL_TORCH_ROWS = "dgl + torch SparseAdam 1 proc"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small graph, few batches")
    parser.add_argument("-n", "--num-nodes", type=int, default=None, help="default 1,000,000")
    parser.add_argument("--avg-degree", type=float, default=20.0, help="mean in-degree")
    parser.add_argument(
        "--graph",
        choices=("powerlaw-in", "powerlaw-out", "symmetric"),
        default="powerlaw-in",
        help="bench_sampler.py's shapes: power-law in-degrees (default), power-law "
        "out-degrees, or both directions of skewed edges",
    )
    parser.add_argument("--fanouts", default="15,10,5", help="input layer first (DGL's order)")
    parser.add_argument("-b", "--batch-size", type=int, default=1024, help="seeds per batch")
    parser.add_argument("-d", "--dim", type=int, default=64, help="embedding width")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--classes", type=int, default=47)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--warmup", type=int, default=None, help="untimed batches (default 2)")
    parser.add_argument("--steps", type=int, default=None, help="timed batches (default 15)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (3)")
    parser.add_argument("--profile-steps", type=int, default=None, help="default 7")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of 1 process")
    parser.add_argument(
        "--procs",
        default="1,2",
        help="process counts of graphemb (1: one process x --threads; 2: 2 x 1 thread)",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--no-dgl", action="store_true", help="leave DGL out")
    parser.add_argument(
        "--pyg-aggregation",
        action="store_true",
        help="also time graphemb with the layers aggregating as PyG's SAGEConv does on adj_t",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_busy_option(parser, "the timings and profiles", "verdicts 'under N busy processes'")
    parser.add_argument("--trace", default=None, help="write Chrome traces of the profiles here")
    parser.add_argument("--json", default=None, help="also write the summary JSON here")
    args = parser.parse_args(argv)
    if args.profile_steps is not None and args.profile_steps < 1:
        parser.error(f"--profile-steps must be at least 1, got {args.profile_steps}")
    quick = args.quick
    defaults = {
        "num_nodes": (20_000, 1_000_000),
        "warmup": (1, 2),
        "steps": (4, 15),
        "rounds": (2, 3),
        "profile_steps": (2, 7),
    }
    for key, (small, full) in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, small if quick else full)
    if quick:
        args.avg_degree = min(args.avg_degree, 10.0)
        args.batch_size = min(args.batch_size, 256)
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    args.procs = sorted({int(p) for p in args.procs.split(",")})
    return args


# ---------------------------------------------------------------------------- workload
def make_workload(args) -> SimpleNamespace:
    """The power-law graph (edge lists), labels and seed batches: the same in every process."""
    import torch
    from bench_sampler import build_graph

    src, dst, seconds = build_graph(
        SimpleNamespace(num_nodes=args.num_nodes, avg_degree=args.avg_degree, seed=args.seed),
        torch,
        args.graph,
    )
    generator = torch.Generator().manual_seed(args.seed + 1)
    labels = torch.randint(0, args.classes, (args.num_nodes,), generator=generator)
    count = args.warmup + args.steps + args.profile_steps + 2
    batches = [
        torch.randperm(args.num_nodes, generator=generator)[: args.batch_size] for _ in range(count)
    ]
    return SimpleNamespace(src=src, dst=dst, labels=labels, batches=batches, seconds=seconds)


def build_ranks(rank: int, world_size: int, spec: dict) -> dict:
    """Contenders of one rank of the process pool (harness.ranks.RankPool): graphemb's
    ranks and their no-exchange yardstick."""
    args = SimpleNamespace(**spec)
    work = make_workload(args)
    pair, yardstick = loops.pool_contenders(spec["contender"])
    contenders = {
        pair: loops.graphemb_contender(args, work, pair, rank=rank, world_size=world_size),
        yardstick: loops.graphemb_contender(
            args, work, yardstick, rank=rank, world_size=world_size, exchange=False
        ),
    }
    work.src = work.dst = work.graph = None  # the contenders hold the graph now
    return contenders


# ---------------------------------------------------------------------------- main
def import_dgl(args) -> str:
    """``"DGL <version>"`` where DGL imports (its threads set), else why it is left out."""
    if args.no_dgl:
        return "left out (--no-dgl)"
    try:
        os.environ.setdefault("DGLBACKEND", "pytorch")
        import dgl

        dgl.utils.set_num_threads(args.threads)
        return f"DGL {dgl.__version__}"
    except Exception as error:  # ImportError, or DGL built for another torch
        return f"cannot import dgl ({type(error).__name__}: {error})"


def local_contenders(args, work: SimpleNamespace, with_dgl: bool) -> dict:
    """The contenders of this process: graphemb with --threads threads (where --procs
    holds 1), its PyG-aggregation twin (--pyg-aggregation), DGL (where it imports)."""
    local = {}
    if 1 in args.procs:
        one = f"graphemb 1 proc x {args.threads} thr"
        local[one] = loops.graphemb_contender(args, work, one)
    if args.pyg_aggregation:
        name = f"graphemb-pyg-aggr 1 proc x {args.threads} thr"
        local[name] = loops.graphemb_contender(args, work, name, pyg_aggregation=True)
    if with_dgl:
        local[DGL] = loops.dgl_contender(args, work, DGL)
        local[DGL_TORCH_ROWS] = loops.dgl_contender(args, work, DGL_TORCH_ROWS, torch_rows=True)
    return local


def rank_pools(args, device, spec: dict) -> dict:
    """A process pool of each --procs count above 1, its contender built on every rank."""
    import torch
    from harness.ranks import RankPool

    pools = {}
    for procs in (p for p in args.procs if p > 1):
        if device.type == "cuda" and procs > torch.cuda.device_count():
            print(f"# {procs} proc x 1 thr left out: {torch.cuda.device_count()} GPU(s) here")
            continue
        name = f"graphemb {procs} proc x 1 thr"
        spec_p = dict(spec, contender=name)
        pools[name] = RankPool(build_ranks, procs, spec_p, threads_per_rank=1, timeout=900)
    return pools


def print_speedups(
    args, per_round: dict, extra: list[str], with_dgl: bool, targeted: list[str]
) -> dict:
    """graphemb's speed-ups over DGL's two loops, and those of ``extra`` (the
    PyG-aggregation twin, the process pools and their no-exchange yardsticks) over graphemb
    in one process, printed with the verdicts of their targets (of ``extra``, the pools
    named in ``targeted`` have one)."""
    from harness import report, timing

    one = f"graphemb 1 proc x {args.threads} thr"
    ratios, targets = {}, {}
    for peer, target in ((DGL, TARGET_SPEEDUP), (DGL_TORCH_ROWS, TARGET_TORCH_ROWS)):
        if not with_dgl:
            break
        # a no-exchange yardstick is not a contender: not held against DGL
        graphembs = (n for n in per_round if n.startswith("graphemb") and not loops.is_yardstick(n))
        for name in graphembs:
            key = name if peer == DGL else f"{name} over {peer}"
            ratios[key] = timing.round_ratios(per_round[peer], per_round[name])
            targets[key] = target if name == one else None
    if one in per_round:
        for name in extra:
            key = f"{name} vs {one}"
            ratios[key] = timing.round_ratios(per_round[one], per_round[name])
            targets[key] = TARGET_PROCS if name in targeted else None
    print()
    for name, ratio in ratios.items():
        target = targets[name]
        judged = target is not None and not args.quick
        verdict = "  " + _verdict(args, ratio["ratio"], target) if judged else ""
        label = name if " vs " in name or " over " in name else f"{name} over {DGL}"
        line = f"speed-up {label}: {timing.fmt_ratio(ratio)}{verdict}"
        (report.print_verdict if judged else print)(line)  # verdicts go to the summary too
    return ratios


def _verdict(args, ratio: float, target: float) -> str:
    """The harness's verdict line, marked as a loaded run under ``--busy``."""
    from harness import report

    line = report.verdict(ratio, target)
    return f"under {args.busy} busy processes: {line}" if args.busy else line


def print_layer_speedups(args, profiles: dict) -> dict:
    """Forward + backward (the profiled phases: input rows, dropout, layers, loss) of
    graphemb against DGL's loop, with the verdict of the layers' target."""
    from harness import report

    def layers(name: str) -> float:
        phases = profiles[name]["phases_ms"]
        return phases["forward"] + phases["backward"]

    one = f"graphemb 1 proc x {args.threads} thr"
    if one not in profiles or DGL not in profiles:
        return {}
    ratio = layers(DGL) / layers(one)
    verdict = "" if args.quick else "  " + _verdict(args, ratio, TARGET_LAYERS)
    line = (
        f"forward + backward: {one} {layers(one):.1f} ms, {DGL} {layers(DGL):.1f} ms "
        f"(profiled, median of {args.profile_steps} batches): {ratio:.2f}x{verdict}"
    )
    print()
    (print if args.quick else report.print_verdict)(line)
    return {"ratio": ratio, "graphemb_ms": layers(one), "dgl_ms": layers(DGL)}


def profile_all(args, local: dict, pools: dict) -> dict:
    """The phases of every contender (rank 0 of a pool) after the timed batches, printed."""
    from harness import phases
    from harness.report import trace_file

    print(f"\n## phases (torch.profiler spans, median of {args.profile_steps} batches)")
    start = args.warmup + args.steps
    profiles = {}
    for name, contender in local.items():
        path = trace_file(args.trace, name.replace(" ", "-"))
        profiles[name] = phases.profile_phases(
            contender, start, args.profile_steps, trace_path=path
        )
    every_rank = {}
    for name, pool in pools.items():
        for ranks in loops.pool_contenders(name):
            every_rank[ranks] = pool.profile(ranks, start, args.profile_steps, args.trace)
            profiles[ranks] = dict(
                every_rank[ranks][0],
                every_rank_phases_ms=[answer["phases_ms"] for answer in every_rank[ranks]],
            )
    for name, profile in profiles.items():
        phases.print_phases(name + (" (rank 0)" if name in every_rank else ""), profile)
    for name, answers in every_rank.items():
        print_rank_balance(name, answers)
    return profiles


def print_rank_balance(name: str, answers: list[dict]) -> None:
    """One line per rank: its main phases and the sparse step's parts, in ms. A rank whose
    push or end-of-step barrier is long waits for a slower one."""
    print(f"\n{name}: every rank's phases (ms, median of the profiled batches)")
    for rank, answer in enumerate(answers):
        ms = answer["phases_ms"]
        parts = [f"{p} {ms[p]:.1f}" for p in ("sampling", "forward", "backward", "sparse step")]
        parts += [
            f"{path.rsplit('::', 1)[-1]} {value:.1f}"
            for path, value in ms.items()
            if path.endswith(("::push", "::update", "::adam_", "::after_update"))
        ]
        print(f"  rank {rank}: " + ", ".join(parts))


def time_and_profile(args, runners: dict, local: dict, pools: dict, with_dgl: bool):
    """Interleaved timing of every contender, the speed-ups printed, then the profiles:
    ``(results, ratios, profiles)``."""
    from harness import timing

    print(f"\n## timing: {args.steps} batches per contender in {args.rounds} rounds")
    per_round = timing.interleaved(
        runners, warmup=args.warmup, steps=args.steps, rounds=args.rounds
    )
    results = {n: timing.stats_ms(timing.flat(t)) for n, t in per_round.items()}
    print(f"\n{'contender':38s} {'ms/batch':>9s} {'p10':>8s} {'p90':>8s}")
    for name, r in results.items():
        print(f"{name:38s} {r['median_ms']:9.1f} {r['p10_ms']:8.1f} {r['p90_ms']:8.1f}")
    extra = [n for n in local if "pyg-aggr" in n]
    extra += [n for name in pools for n in loops.pool_contenders(name)]
    ratios = print_speedups(args, per_round, extra, with_dgl, targeted=list(pools))
    return results, ratios, profile_all(args, local, pools)


def rank_frontier_shares(args, work, batches: int = 3) -> dict:
    """How much of the whole batch's work a rank of each --procs count above 1 gets: its
    share of the seeds' input rows (the rows it gathers, pushes and has updated) and of the
    first layer's edges, against the whole batch's, means over the first ``batches``
    batches (each share sampled anew, as the ranks do)."""
    import torch

    from graphemb.graph import Graph
    from graphemb.sampling import NeighborSampler

    counts = [p for p in args.procs if p > 1]
    if not counts or args.device != "cpu":
        return {}
    graph = getattr(work, "graph", None)
    if graph is None:
        graph = Graph.from_edges(work.src, work.dst, args.num_nodes)
    sampler, generator = NeighborSampler(args.fanouts), torch.Generator().manual_seed(args.seed)
    shares = {}
    for procs in counts:
        rows, edges = [], []
        for seeds in work.batches[:batches]:
            whole = sampler.sample_blocks(graph, seeds, generator)
            for part in seeds.chunk(procs):
                share = sampler.sample_blocks(graph, part, generator)
                rows.append(share[0].numel() / whole[0].numel())
                edges.append(share[2][0].num_edges / whole[2][0].num_edges)
        shares[procs] = {
            "input_rows": sum(rows) / len(rows),
            "first_layer_edges": sum(edges) / len(edges),
        }
        print(
            f"# a rank of {procs}: {shares[procs]['input_rows']:.0%} of the whole batch's input "
            f"rows, {shares[procs]['first_layer_edges']:.0%} of its first layer's edges "
            f"(1/{procs} would split the work without overlap)"
        )
    return shares


def main(argv=None) -> dict:
    args = parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # DGL's OpenMP reads it at import
    # The single-process contenders take turns in this process. DGL's OpenMP threads
    # busy-wait after each parallel region by default, on the cores the next contender
    # needs: graphemb's single process ran at 231 ms a batch after DGL's loops and at
    # 155-166 ms alone or with passive waiting (symmetric shape, 2026-11-27); DGL's own
    # times did not change.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    from harness import report, timing

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
    dgl_note = import_dgl(args)
    with_dgl = dgl_note.startswith("DGL ")
    print(
        f"# bench_end_to_end: torch {torch.__version__}, {os.cpu_count()} cores, "
        f"{args.threads} threads, device {args.device}, load average {report.load_average():.2f}; "
        f"dgl: {dgl_note}" + ("" if with_dgl else " -> graphemb alone")
    )
    work = make_workload(args)
    print(
        f"# {args.graph} graph: {args.num_nodes:,} nodes, {work.src.numel():,} edges "
        f"(generated in {work.seconds:.1f} s); fanouts {args.fanouts}, {args.batch_size} "
        f"seeds per batch, embedding {args.dim}, hidden {args.hidden}, {args.classes} classes"
    )

    local = local_contenders(args, work, with_dgl)
    frontiers = rank_frontier_shares(args, work)
    work.src = work.dst = work.graph = None  # the contenders hold the graphs now
    runners = {n: timing.local_runner(c.step, sync) for n, c in local.items()}
    spec = {k: v for k, v in vars(args).items() if k not in ("json", "trace")}
    pools = rank_pools(args, device, spec)
    for name, pool in pools.items():
        runners.update({n: pool.runner(n) for n in loops.pool_contenders(name)})
    try:
        with busy_processes(args.busy) as spinning:
            if spinning:
                print(f"# {len(spinning)} busy processes spinning: a loaded run")
            results, ratios, profiles = time_and_profile(args, runners, local, pools, with_dgl)
        layer_ratios = print_layer_speedups(args, profiles)
    finally:
        for pool in pools.values():
            pool.close()
    summary = {
        "benchmark": "end_to_end",
        "config": spec,
        "torch": torch.__version__,
        "dgl": dgl_note,
        "ms_per_batch": results,
        "speedups": {
            n: {k: v for k, v in r.items() if k != "per_round"} for n, r in ratios.items()
        },
        "phases_ms": {n: p["phases_ms"] for n, p in profiles.items()},
        "every_rank_phases_ms": {
            n: p["every_rank_phases_ms"] for n, p in profiles.items() if "every_rank_phases_ms" in p
        },
        "layers": layer_ratios,
        "rank_frontier_shares": frontiers,
    }
    report.emit_summary(summary, args.json)
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
