#!/usr/bin/env python
"""GraphSAGE with a learnable node embedding, end to end: graphemb against DGL as its users
run it, each contender in a fresh process of its own.

The loop a user writes, per batch of seed nodes: the library's loader samples the blocks
(fanouts 15,10,5), the input nodes' rows of a learnable 64-d embedding (the only input)
pass through three mean-aggregator SAGEConv layers (hidden 128, 47 classes, dropout 0.5),
cross-entropy, backward, a sparse Adam step on the rows and a dense Adam step on the
layers. Contenders, timed in interleaved rounds on the same graph and the same seed batches
(batch i = the same 1024 seeds for every one), each built and run in a Python process of
its own that imports its own library only (harness/isolated.py, e2e_workload.py):

  graphemb 1 proc      graphemb's SeedLoader + NeighborSampler, graphemb.nn.GraphSAGE,
                       NodeEmbedding + graphemb.optim.SparseAdam; --threads torch threads
  dgl documented loop  dgl.dataloading.DataLoader over NeighborSampler (a graph with DGL's
                       default formats), dgl.nn.SAGEConv, dgl.nn.NodeEmbedding +
                       dgl.optim.SparseAdam with zero_grad() every batch, as DGL's examples
                       (dgl stack only)
  dgl + torch SparseAdam   the same loop with the rows in torch's nn.Embedding(sparse=True)
                       and torch.optim.SparseAdam
  dgl docstring loop   (--dgl-docstring-loop) DGL's loop as the docstrings of NodeEmbedding
                       and SparseAdam write it: SparseAdam.zero_grad() never called, so
                       every step applies all earlier batches' gradients again (e2e_dgl.py);
                       its step grows with every batch: no target
  graphemb 2 proc      (--procs 2) 2 processes x 1 thread: the embedding in shared memory,
                       the layers in DistributedDataParallel, half of every batch per rank;
                       and the same ranks without any exchange, a yardstick (no contender)
  graphemb-pyg-aggr    (--pyg-aggregation) graphemb whose layers aggregate as PyG's SAGEConv
                       does on block.adj_t: the layers before graphemb's own aggregation

Every process gets the same allocator settings (--huge-pages, --omp-wait-policy:
harness/allocation.py), printed in the header with the libraries each process imported.
The graph is one of bench_sampler.py's shapes (--graph; default 1M nodes, 20M edges).
Prints the median ms per batch with the per-round spread, the speed-ups over DGL's loops
(targets: 3x its documented loop, 2x the torch-SparseAdam one), a per-phase profile
(torch.profiler spans: sampling, forward, backward, sparse step, dense step) and, per
phase, graphemb against DGL and against a lower bound measured in the same run
(e2e_bounds.py; targets: layers and sampling 2x DGL's, every phase within 1.3x its bound).
The last line is ``BENCH_SUMMARY {json}``.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile

import e2e_loops as loops
import e2e_report
import e2e_workload
from harness import cli
from harness.busy import add_busy_option, busy_processes

TARGETS = {
    "dgl": 3.0,  # end to end, over DGL's documented loop
    "dgl-torch-rows": 2.0,  # ... over DGL's loop with torch's SparseAdam on the rows
    "layers": 2.0,  # forward + backward over DGL's documented loop
    "sampling": 2.0,  # the sampling phase over DGL's
    "bound": 1.3,  # every graphemb phase at most this multiple of its bound
    "procs": 1.0,  # 2 processes x 1 thread at least as fast as 1 process x 2 threads
}
DGL_NAMES = e2e_workload.DGL_NAMES


def parse_args(argv=None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0], __doc__.split("\n\n", 1)[1])
    add = parser.add_argument
    add("--quick", action="store_true", help="small graph, few batches")
    add("-n", "--num-nodes", type=int, default=None, help="default 1,000,000")
    add("--avg-degree", type=float, default=20.0, help="mean in-degree")
    add("--graph", choices=("powerlaw-in", "powerlaw-out", "symmetric"), default="powerlaw-in",
        help="bench_sampler.py's shapes (default power-law in-degrees)")  # fmt: skip
    add("--fanouts", default="15,10,5", help="input layer first (DGL's order)")
    add("-b", "--batch-size", type=int, default=1024, help="seeds per batch")
    add("-d", "--dim", type=int, default=64, help="embedding width")
    add("--hidden", type=int, default=128, help="width of the hidden layers")
    add("--classes", type=int, default=47, help="output width")
    add("--dropout", type=float, default=0.5, help="dropout before every layer")
    add("--warmup", type=int, default=None, help="untimed batches (default 2)")
    add("--steps", type=int, default=None, help="timed batches (default 15)")
    add("--rounds", type=int, default=None, help="interleaved rounds (3)")
    add("--profile-steps", type=int, default=None, help="profiled batches (default 7)")
    add("--threads", type=int, default=2, help="torch threads of a 1-process contender")
    add("--procs", default="1", help="graphemb's process counts: 1 (one process x --threads) "
        "and/or 2 (2 x 1 thread); default 1")  # fmt: skip
    add("--device", choices=("cpu", "cuda"), default="cpu")
    add("--no-dgl", action="store_true", help="leave DGL out")
    add("--dgl-docstring-loop", action="store_true",
        help="also time DGL's loop without SparseAdam.zero_grad() (its docstrings')")  # fmt: skip
    add("--pyg-aggregation", action="store_true",
        help="also time graphemb with the layers aggregating as PyG's SAGEConv does")  # fmt: skip
    add("--bw-mib", type=int, default=None, help="MiB per tensor of the bandwidth probe (256)")
    add("--seed", type=int, default=0, help="seed of the graph, labels and seeds")
    add_busy_option(parser, "the timings and profiles", "verdicts 'under N busy processes'")
    add("--trace", default=None, help="write Chrome traces of the profiles to this folder")
    add("--json", default=None, help="also write the summary JSON here")
    args = parser.parse_args(argv)
    if args.profile_steps is not None and args.profile_steps < 1:
        parser.error(f"--profile-steps must be at least 1, got {args.profile_steps}")
    cli.sized_defaults(args, {"num_nodes": (20_000, 1_000_000), "warmup": (1, 2),
                              "steps": (4, 15), "rounds": (2, 3), "profile_steps": (2, 7),
                              "bw_mib": (32, 256)})  # fmt: skip
    if args.quick:
        args.avg_degree = min(args.avg_degree, 10.0)
        args.batch_size = min(args.batch_size, 256)
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    args.procs = sorted({int(p) for p in args.procs.split(",")})
    return args


def dgl_note(args) -> str:
    """Why DGL is left out, or ``""`` where its contenders run (checked without importing
    it here: only DGL's own processes import DGL)."""
    if args.no_dgl:
        return "left out (--no-dgl)"
    if importlib.util.find_spec("dgl") is None:
        return "left out: dgl is not installed in this environment"
    return ""


def kinds(args, with_dgl: bool) -> dict[str, str]:
    """Contender name -> kind (e2e_workload.KINDS) of every single-process contender."""
    chosen = {}
    if 1 in args.procs:
        chosen[e2e_workload.graphemb_name(args.threads)] = "graphemb"
    if args.pyg_aggregation:
        chosen[f"graphemb-pyg-aggr 1 proc x {args.threads} thr"] = "graphemb-pyg"
    if with_dgl:
        chosen[DGL_NAMES["dgl"]] = "dgl"
        chosen[DGL_NAMES["dgl-torch-rows"]] = "dgl-torch-rows"
        if args.dgl_docstring_loop:
            chosen[DGL_NAMES["dgl-docstring"]] = "dgl-docstring"
    return chosen


def launch_contenders(args, spec: dict, with_dgl: bool) -> dict:
    """One worker process per single-process contender (harness.isolated), started side
    by side; returns at once, the workers still building (:func:`ready_contenders`)."""
    from harness.isolated import launch_all

    builds = {
        name: ("e2e_workload:build", dict(spec, kind=kind, name=name, threads=args.threads))
        for name, kind in kinds(args, with_dgl).items()
    }
    return launch_all(builds)


def ready_contenders(launched: dict) -> dict:
    """The workers of :func:`launch_contenders` once built, each one's libraries and
    settings printed. A DGL worker that fails to build (DGL built for another torch) is
    left out with the reason."""
    from harness.isolated import wait_all

    started = wait_all(launched)
    for name, worker in started.items():
        info = worker.info
        libraries = ", ".join(f"{k} {v}" for k, v in info["libraries"].items()) or "none"
        print(f"  {name} imported: {libraries}; torch {info['torch']}, {info['threads']} threads")
    return started


def build_ranks(rank: int, world_size: int, spec: dict) -> dict:
    """Contenders of one rank of the process pool (harness.ranks.RankPool): graphemb's
    ranks and their no-exchange yardstick, on the saved workload."""
    from types import SimpleNamespace

    args = SimpleNamespace(**spec)
    work = e2e_workload.load(args)
    pair, yardstick = loops.pool_contenders(spec["contender"])
    contenders = {
        pair: loops.graphemb_contender(args, work, pair, rank=rank, world_size=world_size),
        yardstick: loops.graphemb_contender(
            args, work, yardstick, rank=rank, world_size=world_size, exchange=False
        ),
    }
    work.src = work.dst = work.graph = None  # the contenders hold the graph now
    return contenders


def rank_pools(args, spec: dict) -> dict:
    """A process pool of each --procs count above 1 (fresh processes: graphemb only)."""
    from harness.ranks import RankPool

    pools = {}
    for procs in (p for p in args.procs if p > 1):
        name = f"graphemb {procs} proc x 1 thr"
        spec_p = dict(spec, contender=name)
        pools[name] = RankPool(build_ranks, procs, spec_p, threads_per_rank=1, timeout=900)
    return pools


def run(args, spec: dict, with_dgl: bool) -> dict:
    """Start the contenders, time them in interleaved rounds, profile their phases, bound
    graphemb's: the summary's figures."""
    from harness import timing
    from harness.isolated import close_all

    # The ranks start while the workers build: both are mostly interpreter start-up and
    # imports (one core a process, idle cores otherwise), and neither is timed.
    launched = launch_contenders(args, spec, with_dgl)
    local, pools = {}, {}
    try:
        pools = rank_pools(args, spec)
        local = ready_contenders(launched)
        one = e2e_report.one_name(args)
        # the bounds measured now and again after the profiles: the lower of the two counts
        early = e2e_report.measure_bounds(args, local[one]) if one in local else None
        runners = {name: worker.runner() for name, worker in local.items()}
        for name, pool in pools.items():
            runners.update({n: pool.runner(n) for n in loops.pool_contenders(name)})
        with busy_processes(args.busy) as spinning:
            if spinning:
                print(f"# {len(spinning)} busy processes spinning: a loaded run")
            print(f"\n## timing: {args.steps} batches per contender in {args.rounds} rounds")
            per_round = timing.interleaved(
                runners, warmup=args.warmup, steps=args.steps, rounds=args.rounds
            )
            profiles = e2e_report.profile_all(args, local, pools)
        figures = e2e_report.report_run(args, TARGETS, per_round, profiles, local, pools, early)
    finally:
        for worker in launched.values():  # the workers exit while the ranks stop
            worker.request_stop()
        for pool in pools.values():
            pool.close()
        close_all(launched.values())
    return figures


def main(argv=None) -> dict:
    args = parse_args(argv)
    settings = cli.apply_allocator(args)  # before the first tensor; every worker inherits it
    import torch
    from harness import allocation, report

    torch.set_num_threads(args.threads)  # this process measures the bounds' rates
    note = dgl_note(args)
    with_dgl = not note and args.device == "cpu"
    print(
        f"# bench_end_to_end: torch {torch.__version__}, {report.environment()['cores']} "
        f"cores, {args.threads} threads per process, device {args.device}, load average "
        f"{report.load_average():.2f}; every contender in a process of its own, with "
        f"{allocation.describe(settings)}; dgl: {note or 'its documented loop and more'}"
    )
    directory = tempfile.mkdtemp(prefix="bench-e2e-")
    try:
        made = e2e_workload.save(args, directory)
        print(
            f"# {args.graph} graph: {args.num_nodes:,} nodes, {made['edges']:,} edges "
            f"(generated in {made['seconds']:.1f} s); fanouts {args.fanouts}, "
            f"{args.batch_size} seeds per batch, embedding {args.dim}, hidden {args.hidden}, "
            f"{args.classes} classes"
        )
        spec = {k: v for k, v in vars(args).items() if k not in ("json", "trace")}
        spec["workload"] = directory
        figures = run(args, spec, with_dgl)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    config = {k: v for k, v in spec.items() if k != "workload"}
    summary = {"benchmark": "end_to_end", "config": config, "torch": torch.__version__,
               "dgl": note or "DGL, each loop in a process of its own",
               "allocator": settings, **figures}  # fmt: skip
    report.emit_summary(summary, args.json)
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
