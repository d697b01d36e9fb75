"""Two builds of the compiled kernels compared chunk by chunk in one process, on the DeepWalk
scale panel's graph.

On a shared or virtual machine the same training run can vary by tens of per cent from one
process to the next, far more than a kernel change of a few per cent: an A/B of two
processes, or of two runs of one, measures the machine. Here one process builds the graph
and the tables once, loads both kernel libraries side by side and hands the walk chunks to
them in turn (base, candidate, base, ...): both meet the same machine within seconds of each
other. The figure is the median over chunk pairs of the candidate's tokens per second over
the base's (the first pair left out: it warms the tables), with its smallest and largest.

Both libraries must speak this checkout's interface (``ABI_VERSION``): build the base from
the earlier commit's ``csrc/`` with the same bindings. For example::

    git stash && make kernels && cp graphemb/_kernels.abi3.so /tmp/base.so && git stash pop
    make kernels && cp graphemb/_kernels.abi3.so /tmp/candidate.so
    python benchmarks/bench_kernel_builds.py /tmp/base.so /tmp/candidate.so \\
        --nodes 10000000 --output-table float24 --chunks 14

The trainer runs on ``--threads`` threads for every chunk (the thread governor is held).
No target: the ratio is reported, not judged.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import cli
from harness.report import emit_summary, load_average

#: The scale panel's planted partition (``bench_deepwalk_scale.py``'s defaults).
PANEL_BLOCKS, PANEL_INSIDE = 50, 0.9


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0])
    add_builds(parser)
    add = parser.add_argument
    add("--nodes", type=int, default=1_000_000, help="nodes of the graph (1000000)")
    add("--shape", choices=("uniform", "powerlaw"), default="uniform", help="(uniform)")
    add("--degree", type=float, default=20.0, help="average degree (20)")
    add("--output-table", choices=("float32", "float24", "bfloat16"), default="float32",
        help="the output table's type (float32)")  # fmt: skip
    add("--chunk-walks", type=int, default=32768, help="walks a chunk (32768)")
    add("--chunks", type=int, default=16, help="chunks trained, half by each build (16)")
    add("--threads", type=int, default=2, help="trainer threads (2)")
    add("--seed", type=int, default=0)
    add("--json", help="also write the summary JSON here")
    args = parser.parse_args(argv)
    if args.chunks < 4 or args.chunks % 2:
        parser.error(f"--chunks must be even and at least 4, got {args.chunks}")
    return args


class StopTraining(Exception):
    """Raised after the last chunk measured: the run needs no more."""


def load_builds(paths: list[str], scratch: Path) -> list:
    """Each library loaded under a file name of its own (the loader hands out one handle per
    path), checked to speak this checkout's interface."""
    from graphemb._native.library import ABI_VERSION, Library

    builds = []
    for index, path in enumerate(paths):
        copy = scratch / f"build{index}{Path(path).suffix or '.so'}"
        shutil.copy(path, copy)
        build = Library(copy)
        if build.abi_version != ABI_VERSION:
            sys.exit(f"{path} speaks interface {build.abi_version}, this checkout {ABI_VERSION}")
        builds.append(build)
    return builds


def measure(args: argparse.Namespace, builds: list) -> dict[str, list[float]]:
    """Tokens per second of every chunk, by build name ("base", "candidate")."""
    import torch
    from scale_graphs import planted_graph

    import graphemb._native.library as native
    from graphemb.skipgram import CompiledOptions, train_node_embeddings
    from graphemb.skipgram.backends.compiled import CompiledBackend

    torch.set_num_threads(1)  # the trainer's own threads do the work
    graph, _ = planted_graph(
        args.nodes, args.degree, args.shape, blocks=PANEL_BLOCKS, inside=PANEL_INSIDE,
        seed=args.seed,
    )  # fmt: skip
    names, rates = ("base", "candidate"), {"base": [], "candidate": []}
    train_chunk = CompiledBackend.train_chunk

    def alternating(self, chunk, repeat, walks_before, rate) -> None:
        self._governor.threads = lambda: args.threads  # the same threads for every chunk
        turn = chunk.index % 2
        native._library = builds[turn]  # the library every kernel call goes through
        started = time.perf_counter()
        train_chunk(self, chunk, repeat, walks_before, rate)
        rates[names[turn]].append(chunk.walks.numel() / (time.perf_counter() - started))
        if chunk.index + 1 >= args.chunks:
            raise StopTraining

    CompiledBackend.train_chunk = alternating
    options = CompiledOptions(output_dtype=args.output_table)
    try:
        train_node_embeddings(
            graph, compiled_options=options, dimensions=128, walk_length=40, num_walks=1,
            window=10, negatives=5, sample=1e-3, backend="compiled", workers=args.threads,
            seed=args.seed, chunk_walks=args.chunk_walks,
        )  # fmt: skip
    except StopTraining:
        pass
    finally:
        CompiledBackend.train_chunk = train_chunk
    return rates


def run_builds(args: argparse.Namespace, measure) -> tuple[dict, float]:
    """Both builds loaded (``args.base``, ``args.candidate``) and ``measure(args, builds)``;
    returns its result and the load average before the run."""
    load = load_average()
    with tempfile.TemporaryDirectory() as scratch:
        builds = load_builds([args.base, args.candidate], Path(scratch))
        return measure(args, builds), load


def report(args: argparse.Namespace, benchmark: str, what: str, ratios: list[float],
           pairs: str, load: float, **results) -> None:  # fmt: skip
    """Print the line of ``ratios`` (``what``: median over the ``pairs`` [smallest-largest])
    and the summary JSON of ``results`` with the run's options."""
    line = (
        f"{what}: median {statistics.median(ratios):.3f} over {len(ratios)} {pairs} "
        f"[{min(ratios):.3f}-{max(ratios):.3f}] (load before the run {load:.2f})"
    )
    print(line, flush=True)
    config = {key: value for key, value in vars(args).items() if key != "json"}
    summary = {"benchmark": benchmark, "config": config, **results, "ratios": ratios,
               "line": line}  # fmt: skip
    emit_summary(summary, args.json)


def add_builds(parser: argparse.ArgumentParser) -> None:
    """The two libraries of an A/B of two builds, as ``parser``'s first arguments."""
    parser.add_argument("base", help="the kernel library measured against (a built _kernels*.so)")
    parser.add_argument("candidate", help="the kernel library measured")


def parse_rounds(
    parser: argparse.ArgumentParser, argv: list[str] | None, rounds: int, calls: int, what: str
) -> argparse.Namespace:
    """``parser``'s arguments with the options of a round-by-round A/B (``--rounds``,
    ``--calls`` of ``what`` a build makes in a round, ``--threads``, ``--seed``,
    ``--json``), checked."""
    add = parser.add_argument
    add("--rounds", type=int, default=rounds, help=f"rounds, each timing both builds ({rounds})")
    add("--calls", type=int, default=calls, help=f"{what} a build makes in a round ({calls})")
    add("--threads", type=int, default=2, help="torch threads, hence the kernels' (2)")
    add("--seed", type=int, default=0)
    add("--json", help="also write the summary JSON here")
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.calls < 1:
        parser.error(f"--rounds must be at least 2 and --calls 1, got {args.rounds}, {args.calls}")
    return args


def alternate_rounds(
    args: argparse.Namespace, builds: list, run_call: Callable[[int], float]
) -> dict[str, list[float]]:
    """``args.rounds`` rounds after an untimed one, each running ``args.calls`` calls with
    the base's library, then as many with the candidate's; ``run_call(i)`` runs call ``i``
    of the round (the same ``i`` for both builds) and returns the seconds it timed. Returns
    each build's milliseconds a call, round by round (``"base"``, ``"candidate"``)."""
    import graphemb._native.library as native

    times: dict[str, list[float]] = {"base": [], "candidate": []}
    for round_ in range(args.rounds + 1):  # round 0 warms both builds and is not kept
        for name, build in zip(times, builds, strict=True):
            native._library = build  # the library every kernel call goes through
            spent = sum(run_call(round_ * args.calls + call) for call in range(args.calls))
            if round_:
                times[name].append(1e3 * spent / args.calls)
    return times


def measure_and_report(
    args: argparse.Namespace,
    measure: Callable[[argparse.Namespace, list], dict[str, list[float]]],
    benchmark: str,
    what: str,
    unit: str,
) -> None:
    """A round-by-round A/B probe after its options and allocator settings: both builds
    measured (:func:`run_builds`) and the rounds reported (:func:`report_rounds`)."""
    times, load = run_builds(args, measure)
    report_rounds(args, benchmark, what, times, unit, load)


def report_rounds(
    args: argparse.Namespace, benchmark: str, what: str, times: dict, unit: str, load: float
) -> None:
    """Each build's median ms a ``unit`` over the rounds, then :func:`report` of the rounds'
    ratios base / candidate (above 1: the candidate is faster)."""
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.2f} ms a {unit} over "
              f"{len(values)} rounds")  # fmt: skip
    ratios = [b / c for b, c in zip(times["base"], times["candidate"], strict=True)]
    report(args, benchmark, what, ratios, "rounds", load, ms=times)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)
    rates, load = run_builds(args, measure)
    pairs = min(len(rates["base"]), len(rates["candidate"]))
    if pairs < 2:
        sys.exit(f"only {pairs} chunk pair(s) ran: the graph has too few chunks of --chunk-walks")
    base, candidate = rates["base"][1:pairs], rates["candidate"][1:pairs]
    for name, values in (("base", base), ("candidate", candidate)):
        print(f"{name}: median {statistics.median(values) / 1e3:.0f}k tokens/s over "
              f"{len(values)} chunks")  # fmt: skip
    table = f"{args.output_table} output table"
    what = f"candidate / base tokens/s, {args.nodes:,} nodes {args.shape}, {table}"
    ratios = [c / b for b, c in zip(base, candidate, strict=True)]
    report(args, "kernel_builds", what, ratios, "chunk pairs", load, tokens_per_second=rates)


if __name__ == "__main__":
    main()
