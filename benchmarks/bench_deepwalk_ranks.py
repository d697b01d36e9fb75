#!/usr/bin/env python
"""DeepWalk on 2 machines x 2 ranks: the tables partitioned across (simulated) machines,
against one process on the same graph.

Question (issue 46): does training the skip-gram on ``NodeEmbedding`` tables spread over
several ranks give the quality one process gets?

Graph: the scale panel's planted partition (:mod:`scale_graphs`, ``--nodes`` nodes,
``--shape`` degrees, average degree 20, 50 blocks, 90 % of the edges inside a block).
Contenders, each in a fresh process (or group of processes) of its own:

* ``ranks``: ``torchrun --standalone --nproc_per_node 4`` with ``GRAPHEMB_MACHINES=0,0,1,1``
  (two machines of two ranks; the rows of each table are partitioned between the
  machines and shared by the two ranks of a machine), one thread a rank: the command a
  user runs, printed by the benchmark;
* ``one``: the same trainer (``backend="torch"``, the backend every rank runs) in one
  process on ``--threads`` threads;
* ``compiled``: the compiled trainer in one process, for reference (``--contenders``).

Walks of ``--walk-length`` nodes, ``--walks-per-node`` per node, window 10, D 128, 5
negatives, the library's other defaults, the same seed for every contender. Scored as the
scale panel scores (``bench_deepwalk_scale._scores``): a logistic regression from the rows
to the blocks, trained on half of ``--score-nodes`` nodes and scored on the other half
(the same nodes for every contender), over ``--seeds`` seeds (each seed: its own walks,
rows and scored nodes).

Verdict line (quiet machine, the load average before the first contender): the mean
Micro- and Macro-F1 of ``ranks`` within 0.5 points of ``one``'s.

    python benchmarks/bench_deepwalk_ranks.py                 # 100k nodes, power-law
    python benchmarks/bench_deepwalk_ranks.py --quick         # smoke test (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness import cli, fresh, report

HERE = Path(__file__).resolve().parent
CONTENDERS = ("ranks", "one", "compiled")
#: The simulated cluster: the machine of every rank.
MACHINES = "0,0,1,1"

#: ``--quick``: a small graph and short walks (a smoke test).
QUICK = {"nodes": 2000, "walk_length": 10, "walks_per_node": 2, "blocks": 10, "threads": 1,
         "score_nodes": 2000, "seeds": "0", "settle": 0}  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--nodes", type=int, default=100_000, help="nodes of the graph (100,000)")
    add("--shape", default="powerlaw", choices=("uniform", "powerlaw"))
    add("--blocks", type=int, default=50, help="blocks of the planted partition (50)")
    add("--walks-per-node", type=int, default=1, help="walks started from every node (1)")
    add("--walk-length", type=int, default=40)
    add("--threads", type=int, default=2, help="threads of a one-process contender (2)")
    add("--contenders", default="ranks,one", help="of " + ", ".join(CONTENDERS))
    add("--seeds", default="0,1", help="seeds, comma-separated (0,1)")
    add("--score-nodes", type=int, default=10_000, help="nodes scored (10,000)")
    add("--timeout", type=int, default=3600, help="seconds a contender may take (3600)")
    add("--settle", type=float, default=180.0,
        help="seconds to wait at most for the load average to fall below 1 (180)")  # fmt: skip
    add("--json", default=None, help="also write the summary JSON here")
    add("--child", default=None, help=argparse.SUPPRESS)
    add("--seed", type=int, default=0, help=argparse.SUPPRESS)
    return cli.parse_with_quick(parser, argv, QUICK)


# ------------------------------------------------------------------------- one contender
def child(args: argparse.Namespace) -> None:
    """Train (every rank of a group, or this one process) and score (rank 0): prints the
    row as JSON."""
    import torch
    import torch.distributed as dist
    from bench_deepwalk_scale import _scores
    from scale_graphs import labels, planted_graph

    from graphemb.skipgram import train_node_embeddings

    grouped = "WORLD_SIZE" in os.environ  # started by torchrun
    if grouped:
        torch.set_num_threads(1)
        dist.init_process_group("gloo")
    graph, _ = planted_graph(args.nodes, 20.0, args.shape, blocks=args.blocks, inside=0.9,
                             seed=args.seed)  # fmt: skip
    started = time.perf_counter()
    rows = train_node_embeddings(
        graph, dimensions=128, walk_length=args.walk_length, num_walks=args.walks_per_node,
        window=10, negatives=5, seed=args.seed, progress=False,
        backend="compiled" if args.child == "compiled" else "torch",
        workers=1 if grouped else args.threads,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    world_size = dist.get_world_size() if grouped else 1
    if grouped:
        dist.barrier()
        rank = dist.get_rank()
        dist.destroy_process_group()
        if rank != 0:
            return
    micro, macro = _scores(rows.numpy(), labels(args.nodes, args.blocks), args)
    row = {"contender": args.child, "seed": args.seed, "world_size": world_size,
           "seconds": seconds, "micro_f1": micro, "macro_f1": macro}  # fmt: skip
    fresh.emit(row)


def command_of(args: argparse.Namespace, contender: str, seed: int) -> tuple[list[str], dict]:
    """The command line and the environment of ``contender`` on ``seed``."""
    script = [str(Path(__file__).name), "--child", contender, "--seed", str(seed)]
    for name in ("nodes", "shape", "blocks", "walks_per_node", "walk_length", "threads",
                 "score_nodes"):  # fmt: skip
        script += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    env = dict(os.environ)
    if contender != "ranks":
        return [sys.executable] + script, env
    env["GRAPHEMB_MACHINES"] = MACHINES
    env["OMP_NUM_THREADS"] = "1"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc_per_node", str(len(MACHINES.split(",")))]  # fmt: skip
    return launcher + script, env


def run_contender(args: argparse.Namespace, contender: str, seed: int) -> dict:
    """One contender on one seed in fresh processes; its row, with the load before it."""
    command, env = command_of(args, contender, seed)
    load = report.load_average()
    try:
        row = fresh.run(command, f"{contender}, seed {seed}", cwd=HERE, env=env,
                        timeout=args.timeout)  # fmt: skip
    except fresh.RunFailed as failed:
        print(failed, flush=True)
        return {"contender": contender, "seed": seed, "failed": str(failed)}
    return {**row, "load_before": round(load, 2)}


# ------------------------------------------------------------------------------ the panel
def mean_scores(rows: list[dict], contender: str) -> dict | None:
    """The mean seconds and F1 of ``contender`` over its seeds (None if any seed failed)."""
    mine = [r for r in rows if r["contender"] == contender]
    if not mine or any("failed" in r for r in mine):
        return None
    return {key: sum(r[key] for r in mine) / len(mine)
            for key in ("seconds", "micro_f1", "macro_f1")}  # fmt: skip


def verdict_lines(rows: list[dict], load: float) -> list[str]:
    """``ranks`` against ``one``: the larger gap of the mean Micro- and Macro-F1."""
    ranks, one = mean_scores(rows, "ranks"), mean_scores(rows, "one")
    if ranks is None or one is None:
        return []
    gaps = {key: 100 * (ranks[key] - one[key]) for key in ("micro_f1", "macro_f1")}
    worst = max(gaps, key=lambda key: abs(gaps[key]))
    seeds = len([r for r in rows if r["contender"] == "ranks"])
    return [
        f"ranks ({MACHINES}) vs one process: F1 difference {gaps['micro_f1']:+.2f} / "
        f"{gaps['macro_f1']:+.2f} points (Micro / Macro, mean of {seeds} seed(s)); "
        + report.verdict(abs(gaps[worst]), 0.5, at_most=True, unit=" points", load=load)
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    contenders = cli.chosen(args.contenders, CONTENDERS)  # before any process starts
    cli.apply_allocator(args)
    if args.child:
        child(args)
        return
    run_load = report.wait_until_quiet(args.settle)
    print(f"# DeepWalk on ranks: {args.shape} {args.nodes:,} nodes, {args.walks_per_node} "
          f"walk(s) of {args.walk_length} a node; load average before the run "
          f"{run_load:.2f}", flush=True)  # fmt: skip
    shown, _ = command_of(args, "ranks", 0)
    # (run as ``python -m torch.distributed.run``: torchrun of this interpreter's install)
    print(f"# ranks: GRAPHEMB_MACHINES={MACHINES} torchrun {' '.join(shown[3:])}", flush=True)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for contender in contenders:
            rows.append(run_contender(args, contender, seed))
            print(json.dumps(rows[-1]), flush=True)
    report.print_table(
        ["contender", "seed", "ranks", "seconds", "Micro-F1", "Macro-F1", "load"],
        [[r["contender"], r["seed"], r.get("world_size", ""), f"{r.get('seconds', 0):.1f}",
          f"{r.get('micro_f1', 0):.4f}", f"{r.get('macro_f1', 0):.4f}",
          f"{r.get('load_before', 0):.2f}"] for r in rows],
    )  # fmt: skip
    for line in verdict_lines(rows, run_load):
        report.print_verdict(line)  # kept for the summary's "verdicts"
    summary = {"benchmark": "deepwalk_ranks", "load_before_run": round(run_load, 2), "rows": rows}
    report.emit_summary(summary, args.json)


if __name__ == "__main__":
    main()
