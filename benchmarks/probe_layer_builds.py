#!/usr/bin/env python
"""Two builds of the compiled kernels' GraphSAGE layers compared round by round in one
process, on the end-to-end benchmark's batches.

On a shared or virtual machine the layers of one batch can take 75 ms in one process and
110 ms in the next: an A/B of two processes measures the machine, not a change of a few
per cent. Here one process samples the batches and builds the model once (3 layers,
hidden 128, 47 classes, dropout 0.5, its input a 1M x 64 ``NodeEmbedding`` read in place),
loads both kernel libraries side by side and times the forward and backward of each batch
with each in turn: base, candidate, base, ... Both builds see the same batches, weights and
dropout keys, and no optimizer step runs (the recorded gradients are dropped), so both
compute the same floats. The figure is the median over rounds of the base's time over the
candidate's (above 1: the candidate is faster), with its smallest and largest.

The base is built from an earlier commit with this checkout's bindings, as
``bench_kernel_builds.py`` shows (both libraries speak ``ABI_VERSION``). The ratio is
reported with no target; ``BENCH_SUMMARY {json}`` ends the output.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

from bench_kernel_builds import add_builds, alternate_rounds, measure_and_report, parse_rounds
from harness import cli


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0])
    add_builds(parser)
    add = parser.add_argument
    add("--graph", default="powerlaw-out", choices=["powerlaw-in", "powerlaw-out", "symmetric"],
        help="bench_sampler.py's shape (powerlaw-out)")  # fmt: skip
    add("--nodes", type=int, default=1_000_000, help="nodes of the graph (1000000)")
    return parse_rounds(parser, argv, rounds=30, calls=2, what="batches")


def measure(args: argparse.Namespace, builds: list) -> dict[str, list[float]]:
    """Milliseconds of forward + backward per batch of each round, by build name."""
    import torch
    import torch.nn.functional as F
    from probe_sage_layers import _workload

    from graphemb import NodeEmbedding
    from graphemb.nn import GraphSAGE
    from graphemb.optim import SparseAdam

    torch.set_num_threads(args.threads)
    labels, batches = _workload(SimpleNamespace(num_nodes=args.nodes, graph=args.graph))
    emb = NodeEmbedding(args.nodes, 64, "layer-builds", init_func=lambda t: t.normal_(0, 0.1))
    model = GraphSAGE(emb, 0, 128, 47, 3, dropout=0.5)
    sparse = SparseAdam([emb], lr=0.01)  # only to drop the rows' recorded gradients

    def run_call(i: int) -> float:
        blocks = batches[i % len(batches)]
        torch.manual_seed(i)  # the same dropout keys for both builds
        started = time.perf_counter()
        F.cross_entropy(model(blocks), labels[blocks[-1].dst_nodes]).backward()
        seconds = time.perf_counter() - started
        model.zero_grad(set_to_none=True)
        sparse.zero_grad()
        return seconds

    return alternate_rounds(args, builds, run_call)


def describe(args: argparse.Namespace) -> str:
    return f"base / candidate ms forward + backward, GraphSAGE on {args.graph} {args.nodes:,} nodes"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)
    measure_and_report(args, measure, "layer_builds", describe(args), "batch")


if __name__ == "__main__":
    main()
