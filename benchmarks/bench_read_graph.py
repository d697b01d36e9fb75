"""Reading a large edge list: graphemb's reader against ``pandas.read_csv`` on the same file.

Question (issue 18): is reading a 1M-node / 20M-edge edge list at least as fast as
``pandas.read_csv``, with a peak memory of at most 2x the final arrays?

The file (``source target`` lines of random integer ids, written into a temporary folder
and removed afterwards) is read by each contender in a fresh child process, rounds
interleaved; time is the median over rounds. Peak memory is the child's peak resident set
(``VmHWM``, reset after the imports) minus its resident set before reading, against the
bytes of the arrays the contender returns:

* ``pandas.read_csv``: the DataFrame's (E, 2) int64 values (``sep=" ", comment="#"``, its fastest
  setting here, and ``sep=r"\\s+", comment="#"``, what graphemb's reader accepts);
* ``graphemb parse_edge_list``: the edges as node-id arrays plus the node names (what
  "reading the edge list" yields), parsed by the compiled parser
  (``graphemb_kernels.parse_integer_edges``: the file mapped, cut at line starts, one part
  per thread) where the module has it, else by numpy's ``loadtxt``;
* ``graphemb read_graph``: that, then the undirected :class:`graphemb.graph.Graph` (both
  directions: 2E edges in CSC form, indptr + indices + edge ids), built by the compiled
  counting sort (``graphemb_kernels.csc_from_edges``) in the memory of the parsed edges
  (the (2, E) table becomes the edge ids) where the module has it;
* ``graphemb read_graph, pure torch``: the same with ``GRAPHEMB_DISABLE_KERNELS=1`` (numpy's
  parser, a stable sort of int32 keys: the path of GPUs and of environments without the
  module);
* with ``--before CHECKOUT``: ``read_graph`` of another checkout's graphemb (the same file,
  the same rounds), for before/after ratios.

pandas is optional (both stacks have it; elsewhere its rows are skipped with the reason).
Timings on a shared machine are noisy: read the ratios, measured in the same run.

Measurements (both stacks, before and after the compiled reader, where the time goes):
``benchmarks/results/read_graph.md``.

    .venv/dgl/bin/python benchmarks/bench_read_graph.py            # 1M nodes, 20M edges
    .venv/dgl/bin/python benchmarks/bench_read_graph.py --quick    # 50k nodes, 500k edges
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time

import numpy as np
from harness import cli, fresh, report, timing

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Run in the child: import, reset the peak RSS, read, report time, memory and output bytes.
CHILD = r"""
import json, os, sys, time
contender, path = sys.argv[1], sys.argv[2]
compiled = None
if contender.startswith("pandas"):
    import pandas as pd
else:
    import numpy as np
    from graphemb.io import parse_edge_list, read_graph
    try:
        from graphemb._csc import compiled_csc
        compiled = compiled_csc(__import__("torch").device("cpu")) is not None
        from graphemb._compiled import compiled_module
        compiled = compiled and hasattr(compiled_module(), "parse_integer_edges")
    except ImportError:  # an older checkout (--before)
        compiled = False

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets VmHWM to the current resident set
before = status("VmRSS:")
start = time.perf_counter()
if contender == "pandas sep=' '":
    frame = pd.read_csv(path, sep=" ", header=None, comment="#", dtype="int64", engine="c")
    nbytes = frame.values.nbytes
elif contender == "pandas whitespace+comments":
    frame = pd.read_csv(path, sep=r"\s+", header=None, comment="#", dtype="int64")
    nbytes = frame.values.nbytes
elif contender == "graphemb parse_edge_list":
    edges = parse_edge_list(path)
    nbytes = edges.src.nbytes + edges.dst.nbytes + edges.node_names.nbytes
elif contender.startswith("graphemb read_graph"):
    loaded = read_graph(path)
    g = loaded.graph
    nbytes = sum(t.numel() * t.element_size() for t in (g.indptr, g.indices, g.edge_ids))
    nbytes += loaded.node_names.nbytes
seconds = time.perf_counter() - start
print("RESULT " + json.dumps({"seconds": seconds, "peak_bytes": status("VmHWM:") - before,
                             "output_bytes": nbytes, "compiled": compiled}))
"""

CONTENDERS = (
    "pandas sep=' '",
    "pandas whitespace+comments",
    "graphemb parse_edge_list",
    "graphemb read_graph",
    "graphemb read_graph, pure torch",
)
PURE_TORCH = "graphemb read_graph, pure torch"  # GRAPHEMB_DISABLE_KERNELS=1
BEFORE = "graphemb read_graph, --before"  # another checkout's graphemb


def write_edge_list(path: str, num_nodes: int, num_edges: int, seed: int) -> None:
    """Random ``source target`` lines (uniform ids), written in chunks."""
    rng = np.random.default_rng(seed)
    chunk = 1_000_000
    with open(path, "w") as stream:
        stream.write(f"# {num_nodes} nodes, {num_edges} edges\n")
        for start in range(0, num_edges, chunk):
            count = min(chunk, num_edges - start)
            pairs = rng.integers(0, num_nodes, (count, 2)).tolist()
            stream.write("".join(f"{a} {b}\n" for a, b in pairs))


def run_child(contender: str, path: str, before: str | None = None) -> dict:
    checkout = before if contender == BEFORE and before else REPO
    env = dict(os.environ, PYTHONPATH=checkout + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if contender == PURE_TORCH:
        env["GRAPHEMB_DISABLE_KERNELS"] = "1"
    # `python -c` imports from the working folder first: the checkout's graphemb
    command = [sys.executable, "-c", CHILD, contender, path]
    return fresh.run(command, f"{contender} on {path}", cwd=checkout, env=env, timeout=900)


def _child_runner(name: str, path: str, before: str | None, runs: list[dict]) -> timing.BlockRunner:
    """Runner of contender ``name``: each step reads ``path`` in a fresh child process and
    returns the seconds the child measured; its whole answer is appended to ``runs``."""

    def run(start: int, count: int) -> list[float]:
        answers = [run_child(name, path, before) for _ in range(count)]
        runs.extend(answers)
        return [a["seconds"] for a in answers]

    return run


def summarize(contenders: list[str], results: dict[str, list[dict]]) -> dict:
    """Per contender: median seconds, speed against pandas (median of per-round ratios),
    peak memory against the arrays read; printed as a table."""
    reference = next((n for n in contenders if n.startswith("pandas")), None)
    summary = {}
    rows = []
    for name in contenders:
        runs = results[name]
        seconds = timing.median([r["seconds"] for r in runs])
        peak = max(r["peak_bytes"] for r in runs)
        arrays = runs[0]["output_bytes"]
        ratio = None
        if reference is not None:
            # per-round ratios (same round, same load), then their median
            ratio = timing.median(
                [p["seconds"] / r["seconds"] for p, r in zip(results[reference], runs, strict=True)]
            )
        summary[name] = {
            "median_s": seconds,
            "speedup_vs_pandas": ratio,
            "peak_bytes": peak,
            "array_bytes": arrays,
            "peak_over_arrays": peak / arrays,
            "rounds_s": [r["seconds"] for r in runs],
            "compiled_parse_and_build": runs[0]["compiled"],
        }
        shown = "-" if ratio is None else f"{ratio:.2f}x"
        rows.append(
            [name, f"{seconds:.2f}", shown, f"{peak / 2**20:.0f}", f"{arrays / 2**20:.0f}",
             f"{peak / arrays:.2f}"]
        )  # fmt: skip
    report.print_table(
        ["contender", "median s", "vs pandas", "peak MiB", "arrays MiB", "peak/arrays"], rows
    )
    return summary


def main() -> None:
    parser = cli.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=20_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="50k nodes, 500k edges, 1 round (a smoke test)"
    )
    parser.add_argument(
        "--before",
        metavar="CHECKOUT",
        help="also read the graph with the graphemb package of this folder (e.g. an export of "
        "an earlier commit), in the same rounds",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the summary here")
    args = parser.parse_args()
    cli.apply_allocator(args)  # every reader's child process inherits it
    if args.quick:
        args.nodes, args.edges, args.rounds = 50_000, 500_000, 1

    contenders = list(CONTENDERS) + ([BEFORE] if args.before else [])
    skipped = {}
    if importlib.util.find_spec("pandas") is None:
        for name in contenders[:2]:
            skipped[name] = "pandas is not installed in this environment (the dgl stack has it)"
        contenders = contenders[2:]

    report.print_file_header(
        f"bench_read_graph: {args.nodes:,} nodes, {args.edges:,} edges, {args.rounds} rounds",
        skipped,
    )

    results: dict[str, list[dict]] = {name: [] for name in contenders}
    with tempfile.TemporaryDirectory(prefix="bench_read_graph.") as folder:
        path = os.path.join(folder, "edges.txt")
        start = time.perf_counter()
        write_edge_list(path, args.nodes, args.edges, seed=0)
        size = os.path.getsize(path)
        print(f"# wrote {size / 2**20:.0f} MiB in {time.perf_counter() - start:.1f} s")
        runners = {
            name: _child_runner(name, path, args.before, results[name]) for name in contenders
        }
        timing.interleaved(runners, warmup=0, steps=args.rounds, rounds=args.rounds)

    summary = summarize(contenders, results)
    print(
        "(vs pandas: pandas sep=' ' time / this time, median of per-round ratios; peak: "
        "child's peak RSS above its RSS before reading)"
    )
    built = summary.get("graphemb read_graph", {}).get("compiled_parse_and_build")
    print(
        "read_graph: "
        + (
            "compiled parser and counting sort (graphemb_kernels.parse_integer_edges, "
            "csc_from_edges)"
            if built
            else "numpy's parser or torch's sort (graphemb_kernels without parse_integer_edges "
            "or csc_from_edges here)"
        )
    )
    graph = summary.get("graphemb read_graph")
    if graph is not None and graph["speedup_vs_pandas"] is not None and not args.quick:
        report.print_verdict(
            f"read_graph speed vs pandas: {report.verdict(graph['speedup_vs_pandas'], 1.0)}"
        )
        report.print_verdict(
            "read_graph peak / arrays: "
            + report.verdict(graph["peak_over_arrays"], 2.0, at_most=True, unit="x")
        )
    line = {
        "nodes": args.nodes,
        "edges": args.edges,
        "file_bytes": size,
        "results": summary,
        "skipped": skipped,
    }
    report.emit_summary(line, args.json)


if __name__ == "__main__":
    main()
