#!/usr/bin/env python
"""Why DGL's sparse Adam step took 2.7 s a batch inside bench_end_to_end.py: its loop never
called ``dgl.optim.SparseAdam.zero_grad()``.

DGL's ``NodeEmbedding`` records every lookup (ids and the looked-up rows, whose gradient
backward fills) in a trace, and ``SparseAdam.step()`` concatenates the whole trace and
applies it; the trace is cleared only in a step that follows a ``zero_grad()`` call (DGL
2.1, ``dgl/optim/pytorch/sparse_optim.py``). The docstrings of ``NodeEmbedding``,
``SparseAdam`` and ``SparseAdagrad`` show a loop without ``zero_grad()``; DGL's examples
call it. Without it, step ``k`` updates the rows of all ``k`` batches so far with their
gradients again: its time grows with ``k``, until nearly every row of the table is
updated every step.

This probe runs DGL's loop of ``bench_end_to_end.py`` (``e2e_dgl.py``: DataLoader,
SAGEConv, NodeEmbedding, SparseAdam) for ``--batches`` batches in a fresh process per mode,
each mode in a process of its own: ``documented`` (``zero_grad()`` every batch, as DGL's
examples) and ``docstring`` (never, as the docstrings and the benchmark's loop before this
probe). Per batch it prints the whole batch's and the sparse step's ms, the batches in the
trace and the gradient rows the step read; then ``torch.profiler``'s operator table of the
sparse step over the last ``--profile`` batches (each mode also writes its Chrome trace with
``--trace DIR``). The last line is ``BENCH_SUMMARY {json}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from types import SimpleNamespace

from harness import cli

MODES = ("documented", "docstring")


def parse_args(argv=None):
    parser = cli.parser(__doc__.split("\n\n")[0], __doc__.split("\n\n", 1)[1])
    add = parser.add_argument
    add("--quick", action="store_true",
        help="small graph, few batches, the two modes side by side (a smoke test)")  # fmt: skip
    add("--graph", default="powerlaw-out", help="bench_sampler.py's shape (powerlaw-out)")
    add("-n", "--num-nodes", type=int, default=None, help="default 1,000,000")
    add("--batches", type=int, default=None, help="batches per mode (default 24)")
    add("--profile", type=int, default=3, help="profiled batches at the end (3)")
    add("--threads", type=int, default=2, help="torch threads (2)")
    add("--mode", choices=MODES, default=None, help="run one mode in this process")
    add("--workload", default=None, help="(internal) the saved workload's folder")
    add("--trace", default=None, help="write each mode's Chrome trace to this folder")
    add("--json", default=None, help="also write the summary JSON here")
    args = parser.parse_args(argv)
    cli.sized_defaults(args, {"num_nodes": (20_000, 1_000_000), "batches": (6, 24)})
    return args


def loop_args(args) -> SimpleNamespace:
    """The options of bench_end_to_end.py's loop at its defaults."""
    return SimpleNamespace(num_nodes=args.num_nodes, avg_degree=10.0 if args.quick else 20.0,
                           graph=args.graph, fanouts=[15, 10, 5], batch_size=256 if args.quick
                           else 1024, dim=64, hidden=128, classes=47, dropout=0.5, device="cpu",
                           seed=0, warmup=0, steps=args.batches, profile_steps=0,
                           workload=args.workload)  # fmt: skip


def run_mode(args) -> dict:
    """One mode in this process: per batch its times and trace, then the step's profile."""
    import os

    os.environ.setdefault("DGLBACKEND", "pytorch")
    import e2e_dgl
    import e2e_workload
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.set_num_threads(args.threads)
    import dgl

    dgl.seed(0)  # both modes draw the same blocks, batch by batch
    torch.manual_seed(0)
    options = loop_args(args)
    contender = e2e_dgl.dgl_contender(
        options, e2e_workload.load(options), args.mode, zero_grad=args.mode == "documented"
    )
    emb, optimizer = contender.objects[:2]
    read = {}
    step = optimizer.step

    def counted_step() -> None:  # what the step is about to read: the whole trace
        read.update(batches_in_trace=len(emb.trace),
                    gradient_rows=sum(int(ids.numel()) for ids, _ in emb.trace))  # fmt: skip
        step()

    optimizer.step = counted_step
    rows, timed = [], args.batches - args.profile
    for i in range(timed):
        ms = contender.ops["clocked"](i)
        rows.append({"batch": i, "batch_ms": ms["batch"], "sparse_step_ms": ms["sparse_step"],
                     **read})  # fmt: skip
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(timed, args.batches):
            with record_function("bench::iteration"):
                contender.profile(i)
    if args.trace:
        os.makedirs(args.trace, exist_ok=True)
        prof.export_chrome_trace(os.path.join(args.trace, f"dgl-{args.mode}-loop.json"))
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14)
    return {"mode": args.mode, "batches": rows, "operators": table}


def mode_command(args, mode: str, directory: str) -> list[str]:
    """The command line that runs ``mode`` in a fresh process on the workload saved in
    ``directory``."""
    command = [sys.executable, __file__, "--mode", mode, "--workload", directory,
               "--graph", args.graph, "-n", str(args.num_nodes), "--batches",
               str(args.batches), "--profile", str(args.profile), "--threads",
               str(args.threads)] + (["--quick"] if args.quick else [])  # fmt: skip
    return command + (["--trace", args.trace] if args.trace else [])


def run_commands(commands: dict[str, list[str]], side_by_side: bool) -> dict:
    """Run every mode's command, one after the other or (``side_by_side``) all at once;
    each mode's answer, the last line it printed. A mode that fails stops the run."""
    if side_by_side:
        started = {mode: subprocess.Popen(command, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)
                   for mode, command in commands.items()}  # fmt: skip
        finished = {mode: (process.communicate(), process.returncode)
                    for mode, process in started.items()}  # fmt: skip
    else:
        finished = {}
        for mode, command in commands.items():
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            finished[mode] = ((done.stdout, done.stderr), done.returncode)
    results = {}
    for mode, ((stdout, stderr), code) in finished.items():
        if code != 0:
            raise SystemExit(f"{mode} failed:\n{stderr[-3000:]}")
        results[mode] = json.loads(stdout.strip().splitlines()[-1])
    return results


def run_both(args) -> dict:
    """Each mode in a fresh process of its own, on one saved workload; their answers.
    A measured run runs the modes one after the other; ``--quick`` (a smoke test, whose
    times nobody reads) side by side, as the batches in the trace and the rows a step
    reads do not depend on the machine's load."""
    import e2e_workload
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="probe-dgl-") as directory:
        made = e2e_workload.save(loop_args(SimpleNamespace(**{**vars(args), "workload": None})),
                                 directory)  # fmt: skip
        print(f"# {args.graph}: {args.num_nodes:,} nodes, {made['edges']:,} edges; "
              f"{args.batches} batches per mode, the last {args.profile} profiled")  # fmt: skip
        commands = {mode: mode_command(args, mode, directory) for mode in MODES}
        return run_commands(commands, side_by_side=args.quick)


def print_mode(result: dict) -> None:
    print(f"\n## {result['mode']}: per batch (ms; the batches and gradient rows the step read)")
    print(f"{'batch':>5} {'batch ms':>9} {'sparse step ms':>15} {'in trace':>9} {'rows':>10}")
    for row in result["batches"]:
        print(f"{row['batch']:5d} {row['batch_ms']:9.1f} {row['sparse_step_ms']:15.1f} "
              f"{row['batches_in_trace']:9d} {row['gradient_rows']:10,}")  # fmt: skip
    print(f"\ntorch.profiler, the last batches of {result['mode']} (operators by self CPU time):")
    print(result["operators"])


def main(argv=None) -> dict:
    args = parse_args(argv)
    settings = cli.apply_allocator(args)
    if args.mode is not None:  # one mode, in this fresh process
        print(json.dumps(run_mode(args)))
        return {}
    from harness import allocation, report

    print(f"# probe_dgl_trace: load average {report.load_average():.2f}, "
          f"{allocation.describe(settings)}, {args.threads} threads")  # fmt: skip
    results = run_both(args)
    for result in results.values():
        print_mode(result)
    summary = {"benchmark": "probe_dgl_trace", "config": vars(args), "allocator": settings,
               "modes": {m: r["batches"] for m, r in results.items()}}  # fmt: skip
    report.emit_summary(summary, args.json)
    return summary


if __name__ == "__main__":
    main()
