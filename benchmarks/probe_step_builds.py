#!/usr/bin/env python
"""Two builds of the compiled kernels' sparse optimizer step compared round by round in one
process.

On a shared or virtual machine the same step can take 25 ms in one process and 29 ms in
the next: an A/B of two processes measures the machine, not a change of a few per cent.
Here one process builds the table and the optimizer once, loads both kernel libraries side
by side and times ``optimizer.step()`` with each in turn: base, candidate, base, ... Each
round hands both builds the same batches of ids with the same gradient, so both update the
same rows within milliseconds of each other. The figure is the median over rounds of the
base's time over the candidate's (above 1: the candidate is faster), with its smallest and
largest, beside each build's median time.

The ids are uniform with replacement (``--batch`` of them: duplicates summed, as a lookup of
repeated ids gives) or, with ``--distinct``, that many distinct ids (as the input nodes of
a sampled block give). Both libraries must speak this checkout's interface
(``ABI_VERSION``); see ``bench_kernel_builds.py`` for how to build the base from an earlier
commit. No target: the ratio is reported, not judged. The last line is
``BENCH_SUMMARY {json}``.
"""

from __future__ import annotations

import argparse
import time

from bench_kernel_builds import add_builds, alternate_rounds, measure_and_report, parse_rounds
from harness import cli

OPTIMIZERS = ("SparseAdam", "SparseAdagrad", "SparseRowWiseAdagrad", "SparseSGD")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0])
    add_builds(parser)
    add = parser.add_argument
    add("--optimizer", choices=OPTIMIZERS, default="SparseAdam", help="(SparseAdam)")
    add("--rows", type=int, default=1_000_000, help="rows of the table (1000000)")
    add("--dim", type=int, default=64, help="columns of the table (64)")
    add("--batch", type=int, default=340_000, help="ids a step (340000)")
    add("--distinct", action="store_true", help="distinct ids, not uniform with replacement")
    args = parse_rounds(parser, argv, rounds=40, calls=3, what="steps")
    if args.distinct and args.batch > args.rows:
        parser.error(f"--distinct: --batch {args.batch} is more than --rows {args.rows}")
    return args


def measure(args: argparse.Namespace, builds: list) -> dict[str, list[float]]:
    """Milliseconds per step of each round, by build name ("base", "candidate")."""
    import torch

    import graphemb.optim
    from graphemb import NodeEmbedding

    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    table = NodeEmbedding(args.rows, args.dim, "step-builds",
                          init_func=lambda rows: rows.uniform_(-0.1, 0.1))  # fmt: skip
    optimizer = getattr(graphemb.optim, args.optimizer)([table], lr=0.01)
    batches = [
        torch.randperm(args.rows, generator=generator)[: args.batch]
        if args.distinct
        else torch.randint(0, args.rows, (args.batch,), generator=generator)
        for _ in range(args.calls)
    ]
    gradient = torch.randn(args.batch, args.dim, generator=generator)

    def run_call(i: int) -> float:
        table(batches[i % len(batches)]).backward(gradient)
        started = time.perf_counter()
        optimizer.step()
        seconds = time.perf_counter() - started
        optimizer.zero_grad()
        return seconds

    return alternate_rounds(args, builds, run_call)


def describe(args: argparse.Namespace) -> str:
    ids = "distinct" if args.distinct else "uniform with replacement"
    return (f"base / candidate ms a step, {args.optimizer} {args.rows:,} x {args.dim}, "
            f"{args.batch:,} ids ({ids})")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)
    measure_and_report(args, measure, "step_builds", describe(args), "step")


if __name__ == "__main__":
    main()
