#!/usr/bin/env python
"""Do the compiled skip-gram trainer's threads pay off on this machine? Shared rows against
rows of their own, and the thread governor against always using every thread.

Two measurements, each interleaved in rounds so that a slow minute of the machine hits
every contender alike:

  kernel     graphemb_kernels.skipgram_train on one chunk of walks, nanoseconds per
             (context, target) product and thread:
               1 thread
               2 threads, shared tables     Hogwild, as word2vec's threads (the trainer)
               2 threads, own tables        each thread half the walks on tables of its
                                            own: the same work without shared rows
             A round where the shared tables run at over twice the own tables' time is an
             "episode": the cores pay for moving rows between their caches.
  trainer    train_node_embeddings(backend="compiled", workers=2), whole runs:
               every thread   each chunk on both threads
               governed       the default: ThreadGovernor picks each chunk's thread count

Target: the governed trainer's mean time <= every thread's, on a quiet machine.

Example: ``python benchmarks/bench_skipgram_threads.py --graph overlapping --rounds 20``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

import torch
from deepwalk_panel import load
from harness import cli, report

from graphemb.sampling.walks import RandomWalker
from graphemb.skipgram import (
    FINAL_RATE,
    LearningRate,
    NegativeSampler,
    train_node_embeddings,
)
from graphemb.skipgram.backends import compiled_kernel
from graphemb.skipgram.backends.base import initial_tables
from graphemb.skipgram.backends.governor import ThreadGovernor

QUICK = {"graph": "overlapping:2000:10", "rounds": 2, "runs": 1, "walks": 1}
EPISODE = 2.0  # shared / own tables in one round above which the round is an episode


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default="overlapping", help="a deepwalk_panel.py shape")
    parser.add_argument("--rounds", type=int, default=30, help="kernel rounds (30)")
    parser.add_argument("--runs", type=int, default=10, help="trainer runs of each (10)")
    parser.add_argument("--walks", type=int, default=2, help="walks per node, kernel (2)")
    parser.add_argument("--json", default=None, help="also write the summary JSON here")
    return cli.parse_with_quick(parser, argv, QUICK)


class Contender(NamedTuple):
    """One kernel contender of :func:`kernel_rounds`.

    Attributes
    ----------
    name : str
        Its row in the table.
    threads : int
        Threads it trains on (its time is counted per thread).
    run : callable
        Trains once with the round's seed; returns the (context, target) products.
    """

    name: str
    threads: int
    run: Callable[[int], int]


def kernel_rounds(graph, args) -> dict[str, list[float]]:
    """ns per product and thread of the three kernel contenders, one value per round."""
    kernel = compiled_kernel()
    generator = torch.Generator().manual_seed(0)
    walker = RandomWalker(graph)
    starts = torch.randperm(graph.num_nodes, generator=generator).repeat(args.walks)
    walks = walker(starts, 39, generator=generator).contiguous()
    counts = graph.in_degrees().to(torch.float64)  # the unweighted walks' token counts
    alias = tuple(t.contiguous() for t in NegativeSampler(counts).alias_table)
    threshold = 1e-3 * float(counts.sum())  # subsampling at sample 1e-3
    halves = walks.tensor_split(2)
    tables = [initial_tables(graph.num_nodes, 128, seed) for seed in range(2)]
    hold_walks = LearningRate.of_run(0.025, 1, 40).hold_walks

    # a constant rate (10**9 walks in the run): every round does the same work
    trainers = [
        kernel(*tables[table], counts, alias, 10, 5, 0.025, FINAL_RATE, 10**9, hold_walks,
               subsample_threshold=threshold)
        for table in range(2)
    ]  # fmt: skip

    def train(part: torch.Tensor, table: int, threads: int, seed: int) -> int:
        return int(trainers[table](part, 0, threads, seed)[1])

    def own_tables(seed: int) -> int:
        done = [0, 0]
        workers = [
            threading.Thread(target=lambda i=i: done.__setitem__(i, train(halves[i], i, 1, seed)))
            for i in range(2)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return sum(done)

    contenders = [
        Contender("1 thread", 1, lambda seed: train(walks, 0, 1, seed)),
        Contender("2 threads, shared tables", 2, lambda seed: train(walks, 0, 2, seed)),
        Contender("2 threads, own tables", 2, own_tables),
    ]
    times: dict[str, list[float]] = {contender.name: [] for contender in contenders}
    for round_ in range(args.rounds):
        for contender in contenders:
            start = time.perf_counter()
            products = contender.run(round_)
            seconds = time.perf_counter() - start
            times[contender.name].append(seconds * 1e9 * contender.threads / products)
    return times


@contextmanager
def every_thread() -> Iterator[None]:
    """The trainer without its governor: every chunk on every thread."""
    governed = ThreadGovernor.threads
    ThreadGovernor.threads = lambda self: self.workers  # type: ignore[method-assign]
    try:
        yield
    finally:
        ThreadGovernor.threads = governed  # type: ignore[method-assign]


def trainer_runs(graph, args) -> dict[str, list[float]]:
    """Seconds of whole compiled runs (10 walks of 40, window 10, dim 128), interleaved."""
    times: dict[str, list[float]] = {"every thread": [], "governed": []}
    settings = dict(dimensions=128, walk_length=40, num_walks=10, window=10, backend="compiled")
    for run in range(args.runs):
        for name in times:
            start = time.perf_counter()
            if name == "every thread":
                with every_thread():
                    train_node_embeddings(graph, workers=2, seed=run, **settings)
            else:
                train_node_embeddings(graph, workers=2, seed=run, **settings)
            times[name].append(time.perf_counter() - start)
    return times


def summarise(times: dict[str, list[float]], unit: str) -> dict[str, dict]:
    """Median, mean, max of each contender (the ``median_ms`` key is what every benchmark
    summary has; here it holds ``unit``)."""
    rows, results = [], {}
    for name, values in times.items():
        median, mean = statistics.median(values), statistics.fmean(values)
        results[name] = {"median_ms": median, "mean": mean, "max": max(values), "unit": unit}
        rows.append([name, f"{median:.1f}", f"{mean:.1f}", f"{max(values):.1f}"])
    report.print_table(["contender", f"median {unit}", f"mean {unit}", f"max {unit}"], rows)
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)
    if compiled_kernel() is None:
        sys.exit("graphemb_kernels.skipgram_train is not built: make kernels")
    torch.set_num_threads(1)
    graph, _ = load(args.graph, 0)
    print(f"graph {args.graph}: {graph.num_nodes} nodes, load before {report.START_LOAD:.2f}")
    kernel = kernel_rounds(graph, args)
    results = summarise(kernel, "ns/product/thread")
    ratios = [
        s / o
        for s, o in zip(
            kernel["2 threads, shared tables"], kernel["2 threads, own tables"], strict=True
        )
    ]
    episodes = sum(ratio > EPISODE for ratio in ratios)
    print(
        f"episodes (shared tables over {EPISODE:g}x own tables): {episodes} of {len(ratios)} rounds"
    )
    trainer = trainer_runs(graph, args)
    results.update(summarise(trainer, "s"))
    ratio = statistics.fmean(trainer["governed"]) / statistics.fmean(trainer["every thread"])
    report.print_verdict(
        f"governed mean time / every thread's: {ratio:.2f}; "
        + report.verdict(ratio, 1.0, at_most=True)
    )
    report.emit_summary(
        {"graph": args.graph, "episodes": episodes, "rounds": len(ratios), "results": results},
        args.json,
    )


if __name__ == "__main__":
    main()
