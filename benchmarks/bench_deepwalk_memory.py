#!/usr/bin/env python
"""Peak memory of DeepWalk on a large graph: the command line a user runs, on a file.

Question (the skip-gram issue's memory target): does a 1M-node / 20M-edge graph train with
``python -m graphemb deepwalk --workers 2`` at a peak resident memory of at most the graph
plus twice its two tables?

The edge list (``source target`` lines of uniform random ids, as in
``bench_read_graph.py``) is written into a temporary folder; then

    python -m graphemb deepwalk --input G.txt --output G.npy --workers 2 \\
        --num-walks W --walk-length L

runs as a child process, whose peak resident set (``ru_maxrss`` of the finished child: the
interpreter, torch, reading the file, training and writing the output included) is held
against

    bound = graph + 2 x (two tables)
    graph = the CSC arrays of the undirected graph the command trains on (indptr, indices,
            edge ids: what ``graphemb.io.read_graph`` returns, measured after the child)
    two tables = input and output rows, 2 x N x D float32

Walks are drawn and trained chunk by chunk, so memory does not grow with ``--num-walks``:
the default of one walk per node keeps the run to minutes; the time is printed, not judged.

    python benchmarks/bench_deepwalk_memory.py            # 1M nodes, 20M edges
    python benchmarks/bench_deepwalk_memory.py --quick    # 5k nodes, 50k edges (smoke test)
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_read_graph import write_edge_list
from harness import cli
from harness.report import emit_summary, load_average, verdict

REPO = str(Path(__file__).resolve().parent.parent)
GIB = 1024**3


def graph_bytes(path: str) -> int:
    """Bytes of the arrays of the graph ``read_graph`` makes of ``path`` (undirected)."""
    from graphemb.io import read_graph

    graph = read_graph(path).graph
    arrays = [graph.indptr, graph.indices, graph.edge_ids, graph.edge_weight]
    return sum(a.numel() * a.element_size() for a in arrays if a is not None)


def run_deepwalk(args: argparse.Namespace, source: str, output: str) -> tuple[float, int]:
    """Seconds and peak resident bytes of the ``deepwalk`` command in a child process."""
    command = [
        sys.executable,
        "-m",
        "graphemb",
        "deepwalk",
        "--input",
        source,
        "--output",
        output,
        "--workers",
        str(args.workers),
        "--num-walks",
        str(args.num_walks),
        "--walk-length",
        str(args.walk_length),
        "--dimensions",
        str(args.dimensions),
        "--quiet",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=7200)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"deepwalk failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak_kib <= before:  # an earlier child peaked higher: ru_maxrss is a maximum
        raise SystemExit("run one measurement per process (an earlier child peaked higher)")
    return seconds, peak_kib * 1024


#: ``--quick``: a smoke test (the interpreter and torch then dominate the peak).
QUICK = {"nodes": 5_000, "edges": 50_000, "walk_length": 10}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n")[0])
    for name, default, meaning in (
        ("nodes", 1_000_000, "nodes of the graph"),
        ("edges", 20_000_000, "edge lines of the file (uniform random ends)"),
        ("num-walks", 1, "walks per node (memory does not grow with it)"),
        ("walk-length", 40, "nodes per walk"),
        ("dimensions", 128, "embedding size"),
        ("workers", 2, "training threads"),
        ("seed", 0, "seed of the file's edges"),
    ):
        parser.add_argument(f"--{name}", type=int, default=default, help=f"{meaning} ({default:,})")
    parser.add_argument("--json", default=None, help="also write the summary JSON here")
    return cli.parse_with_quick(parser, argv, QUICK)


def main() -> None:
    args = parse_args()
    cli.apply_allocator(args)
    print(
        f"# DeepWalk peak memory: {args.nodes:,} nodes, {args.edges:,} edges, "
        f"{args.num_walks} walk(s) of {args.walk_length} per node, D={args.dimensions}, "
        f"--workers {args.workers}; load average before the run {load_average():.2f}"
    )
    with tempfile.TemporaryDirectory() as folder:
        source, output = os.path.join(folder, "graph.txt"), os.path.join(folder, "emb.npy")
        write_edge_list(source, args.nodes, args.edges, args.seed)
        seconds, peak = run_deepwalk(args, source, output)
        graph = graph_bytes(source)
    tables = 2 * args.nodes * args.dimensions * 4
    bound = graph + 2 * tables
    print(
        f"deepwalk: {seconds:.1f} s, peak resident {peak / GIB:.2f} GiB | graph "
        f"{graph / GIB:.2f} GiB, two tables {tables / GIB:.2f} GiB, bound graph + 2 x tables "
        f"{bound / GIB:.2f} GiB | peak / bound {peak / bound:.2f}"
    )
    line = verdict(peak / GIB, bound / GIB, at_most=True, unit=" GiB")
    print(f"peak memory: {line}")
    emit_summary(
        {
            "benchmark": "deepwalk_memory",
            "nodes": args.nodes,
            "edges": args.edges,
            "seconds": seconds,
            "peak_bytes": peak,
            "graph_bytes": graph,
            "tables_bytes": tables,
            "bound_bytes": bound,
            "verdict": line,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
