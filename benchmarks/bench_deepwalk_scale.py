#!/usr/bin/env python
"""DeepWalk at scale: tokens per second, time and peak memory from 10k to 10M nodes,
graphemb against gensim on the same walker's walks.

Question (issue 46): does the compiled trainer's cost per token stay flat as its tables
outgrow the caches, and how far ahead of gensim is it on graphs of 100k and 1M nodes?

Graphs: planted partitions of ``--sizes`` nodes, average degree ``--degree``, ``--blocks``
blocks with ``--inside`` of the edges inside a block, ``uniform`` or ``powerlaw`` degrees
(:mod:`scale_graphs`: drawn straight into the CSC arrays, no Python edge lists). Every
contender runs in a fresh process on the graph drawn from the same seed:

* ``graphemb``: :func:`graphemb.skipgram.train_node_embeddings`, the compiled trainer on
  ``--threads`` threads with its defaults (noise nodes drawn per pair: fresh draws, as in
  word2vec, for output tables up to 32 MiB, each fresh draw serving 10 beyond);
* ``graphemb-<variant>``: the same with one of the options of ``skipgram_variants.py``
  (which says what each means); by default ``position``, ``pool`` and ``pair-pool-10``;
* ``gensim``: ``Word2Vec(sg=1, hs=0, epochs=1)`` on ``--threads`` workers, fed walks of
  the same walker (``RandomWalker``, a fresh permutation of the start nodes per round of
  one walk per node) as lists of the nodes' names (one string object per node); only on
  ``--gensim-sizes``.

Walks of ``--walk-length`` nodes, ``--walks-per-node`` per size (by default 10 on 10k
nodes, then one: at least 4M tokens per graph), window 10, D 128, 5 negatives, sample
1e-3. Per contender: seconds (walks + training; gensim's also the strings), tokens per
second (walk tokens / seconds), the peak resident memory of its process until its
training ends (the scoring after it is the benchmark's own: the largest of the exact
readings of the process's resident memory from outside it, every 50 ms, and of the
kernel's own high-water marks, ``ru_maxrss`` and ``VmHWM``, which can fall short of the
exact figure by a few hundred KiB: ``probe_rss_accounting.py``) and that peak
less the process's resident memory before the graph is drawn, held against the memory bound
``graph + two tables + a chunk of walks`` (the graph's CSC arrays, ``2 N D`` float32,
``chunk_walks * walk_length`` int64: what a float32 trainer cannot do without), and the
same with the tables as the contender holds them (``graphemb-float24`` and
``graphemb-bfloat16`` hold the output table in 3/4 and 1/2 of the bound's); and the
Micro-/Macro-F1 of a logistic regression from the rows to the blocks on ``--score-nodes``
nodes (half to train, half to score): the same task for every contender, so that a
difference in quality at scale shows.

The memory is measured from after a small run of the same contender (``--warm-up-nodes``,
its freed memory handed back to the system, the peak restarted there): what a process
holds whatever the graph's size (library code paged in as it runs, threads, allocator
arenas; about 15 MiB for graphemb) is not the bound's. The verdict line gives the figure
from the imports alone beside it. The generator's freed temporaries are handed back too
once the graph is built: they are the benchmark's, not the trainer's.

Verdict lines (quiet machine: the load average before the first contender, after waiting
up to ``--settle`` seconds for it to fall below 1; each row also records the load before
its contender, which the panel's own previous contender raises):
tokens/s on the 1M-node graph at least 0.7x the 10k-node figure (per graphemb contender
and shape); time at most 1/5 of gensim's at 100k and 1M nodes; F1 within 1 point of
gensim's (one seed: the DeepWalk panel, ``bench_deepwalk_quality.py``, is the gate of
-0.3 points); at 10M nodes, the time at most 15 min and the peak at most the bound.

    python benchmarks/bench_deepwalk_scale.py                       # 10k-1M, both shapes
    python benchmarks/bench_deepwalk_scale.py --sizes 10000000 --shapes uniform \\
        --contenders graphemb --gensim-sizes ""                        # the 10M-node run
    python benchmarks/bench_deepwalk_scale.py --quick                # smoke test
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from deepwalk_scale_report import READING_INTERVAL, print_rows, verdict_lines
from harness import cli, fresh, memory
from harness.report import emit_summary, load_average, print_verdict, wait_until_quiet
from skipgram_variants import named

HERE = Path(__file__).resolve().parent
#: graphemb's contenders: name -> keyword arguments of ``CompiledOptions``.
COMPILED = named("graphemb")
CONTENDERS = (*COMPILED, "gensim")
#: The contenders of a run without ``--contenders``.
DEFAULT_CONTENDERS = (
    "graphemb", "graphemb-fresh", "graphemb-position", "gensim"
)  # fmt: skip

#: ``--quick``: two small graphs per shape, short walks (a smoke test: seconds a contender).
QUICK = {
    "sizes": "2000,4000",
    "gensim_sizes": "2000",
    "walks_per_node": "2000:2",
    "walk_length": 10,
    "blocks": 10,
    "score_nodes": 2000,
    "warm_up_nodes": 1000,
    "settle": 0,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.parser(__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--sizes", default="10000,100000,1000000", help="nodes of the graphs (10k,100k,1M)")
    add("--shapes", default="uniform,powerlaw", help="degree shapes (uniform,powerlaw)")
    add(
        "--contenders",
        default=",".join(DEFAULT_CONTENDERS),
        help="of " + ", ".join(CONTENDERS) + " (skipgram_variants.py)",
    )
    add("--gensim-sizes", default="10000,100000,1000000", help="sizes gensim runs on")
    add("--walks-per-node", default="10000:10", help="SIZE:W,... (default 1 walk per node)")
    add("--walk-length", type=int, default=40)
    add("--degree", type=float, default=20.0, help="average degree (20)")
    add("--blocks", type=int, default=50, help="blocks of the planted partition (50)")
    add("--inside", type=float, default=0.9,
        help="share of the edges inside a block (0.9; at 0.3, one walk of 40 per node leaves "
        "every contender, gensim included, at chance F1 from 100k nodes)")  # fmt: skip
    add("--threads", type=int, default=2, help="threads of every contender (2)")
    add("--chunk-walks", type=int, default=0, help="graphemb's chunk_walks (0: its default)")
    add("--score-nodes", type=int, default=10_000, help="nodes scored (10,000)")
    add("--warm-up-nodes", type=int, default=80_000,
        help="nodes of each contender's small run before its measured one (80,000: output "
        "tables past 32 MiB: graphemb takes its noise pool, as on large graphs)")  # fmt: skip
    add("--seed", type=int, default=0)
    add("--timeout", type=int, default=7200, help="seconds a contender may take (7200)")
    add("--settle", type=float, default=180.0,
        help="seconds to wait at most, before the first contender, for the load average "
        "to fall below 1 (180; the verdicts read the load then)")  # fmt: skip
    add("--json", default=None, help="also write the summary JSON here")
    add("--child", default=None, help=argparse.SUPPRESS)
    add("--shape", default=None, help=argparse.SUPPRESS)
    add("--nodes", type=int, default=None, help=argparse.SUPPRESS)
    return cli.parse_with_quick(parser, argv, QUICK)


def walks_per_node(args: argparse.Namespace, nodes: int) -> int:
    table = dict(item.split(":") for item in args.walks_per_node.split(",") if item)
    return int(table.get(str(nodes), 1))


# ------------------------------------------------------------------------- one contender
def child(args: argparse.Namespace) -> None:
    """One contender on one graph, in this (fresh) process: prints its row as JSON."""
    import torch
    from scale_graphs import graph_bytes, labels, planted_graph

    # (importing the harness asked for torch's huge-page allocations, before any tensor)
    torch.set_num_threads(1)  # the contenders' own threads do the work
    start_rss = memory.resident_bytes()
    _warm_up(args)
    memory.release_free_heap()  # what the small run freed
    memory.reset_peak()
    warm_rss = memory.resident_bytes()
    measured_from = time.time()  # the parent's readings of this process count from here
    started = time.perf_counter()
    graph, edges = planted_graph(
        args.nodes, args.degree, args.shape, blocks=args.blocks, inside=args.inside,
        seed=args.seed,
    )  # fmt: skip
    built = time.perf_counter() - started
    memory.release_free_heap()  # the generator's freed temporaries (not a user's reader's)
    num_walks = walks_per_node(args, args.nodes)
    dim = 128
    if args.child == "gensim":
        rows, seconds = _gensim(graph, args, num_walks)
        output_dtype = "float32"  # gensim's syn1neg
    else:
        rows, seconds, chunk, output_dtype = _graphemb(graph, args, num_walks, dim)
    # What the arrays still held round up to whole pages (the others are freed by now).
    arrays = [a for a in (graph.indptr, graph.indices, graph.edge_ids, graph.edge_weight)
              if a is not None]  # fmt: skip
    overhang = memory.page_overhang(
        [(a.data_ptr(), a.nbytes) for a in arrays] + [(rows.ctypes.data, rows.nbytes)]
    )
    # The run's peak, read before the scoring below allocates arrays of its own.
    measured_to = time.time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    high_water = memory.high_water_bytes()
    isolated = int((graph.in_degrees() == 0).sum())
    tokens = num_walks * ((args.nodes - isolated) * args.walk_length + isolated)
    micro, macro = _scores(rows, labels(args.nodes, args.blocks), args)
    chunk = 0 if args.child == "gensim" else chunk
    walk_bytes = chunk * args.walk_length * 8
    output_bytes = args.nodes * dim * {"float32": 4, "float24": 3, "bfloat16": 2}[output_dtype]
    row = {
        "contender": args.child, "shape": args.shape, "nodes": args.nodes, "edges": edges,
        "walks_per_node": num_walks, "tokens": tokens, "seconds": seconds,
        "tokens_per_second": tokens / seconds, "graph_seconds": built,
        "peak_bytes": peak, "high_water_bytes": high_water,
        "measured_from": measured_from, "measured_to": measured_to,
        "start_bytes": start_rss, "warm_bytes": warm_rss, "graph_bytes": graph_bytes(graph),
        "bound_bytes": graph_bytes(graph) + 2 * args.nodes * dim * 4 + walk_bytes,
        "output_dtype": output_dtype,
        "held_bytes": graph_bytes(graph) + args.nodes * dim * 4 + output_bytes + walk_bytes,
        "micro_f1": micro, "macro_f1": macro, "page_overhang_bytes": overhang,
    }  # fmt: skip
    fresh.emit(row)


def _warm_up(args: argparse.Namespace) -> None:
    """The contender once on a small graph (``--warm-up-nodes``, one walk per node), so
    that what any run holds whatever its size (library code paged in, threads started,
    the allocator's arenas) is resident before the run's memory is measured from it."""
    from scale_graphs import planted_graph

    nodes = -(-args.warm_up_nodes // args.blocks) * args.blocks
    graph, _ = planted_graph(
        nodes, args.degree, args.shape, blocks=args.blocks, inside=args.inside, seed=args.seed
    )
    small = argparse.Namespace(**{**vars(args), "chunk_walks": 0})
    if args.child == "gensim":
        _gensim(graph, small, 1)
    else:
        _graphemb(graph, small, 1, 128)


def _graphemb(graph, args: argparse.Namespace, num_walks: int, dim: int):
    """The compiled trainer's rows, its seconds, its chunk of walks and its output table's
    type."""
    from graphemb.skipgram import CompiledOptions, train_node_embeddings

    options = dict(
        dimensions=dim, walk_length=args.walk_length, num_walks=num_walks, window=10,
        negatives=5, sample=1e-3, backend="compiled", workers=args.threads, seed=args.seed,
    )  # fmt: skip
    if args.chunk_walks:
        options["chunk_walks"] = args.chunk_walks
    started = time.perf_counter()
    compiled = CompiledOptions(**COMPILED[args.child])
    rows = train_node_embeddings(graph, compiled_options=compiled, **options)
    seconds = time.perf_counter() - started
    chunk = min(args.chunk_walks or 8192, graph.num_nodes)
    return rows.numpy(), seconds, chunk, compiled.for_table(graph.num_nodes, dim).output_dtype


def _gensim(graph, args: argparse.Namespace, num_walks: int):
    """gensim's rows (node-id order) and seconds: walks, their strings and training."""
    import numpy as np
    import torch
    from gensim.models import Word2Vec

    from graphemb.sampling.walks import PAD, RandomWalker

    started = time.perf_counter()
    walker = RandomWalker(graph)
    generator = torch.Generator().manual_seed(args.seed)
    names = [str(v) for v in range(graph.num_nodes)]
    sentences: list[list[str]] = []
    for _ in range(num_walks):
        order = torch.randperm(graph.num_nodes, generator=generator)
        for starts in order.split(65536):
            walks = walker(starts, args.walk_length - 1, generator=generator).tolist()
            sentences += [[names[v] for v in walk if v != PAD] for walk in walks]
    model = Word2Vec(
        sentences, vector_size=128, window=10, sg=1, hs=0, negative=5, sample=1e-3,
        min_count=0, workers=args.threads, epochs=1, seed=args.seed,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    del sentences
    index = np.array([model.wv.key_to_index[name] for name in names])
    return model.wv.vectors[index], seconds


def _scores(rows, blocks, args: argparse.Namespace) -> tuple[float, float]:
    """Micro-/Macro-F1 of a logistic regression from the standardised rows to the blocks:
    half of ``--score-nodes`` nodes (the same for every contender) to train, half to
    score."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(args.seed)
    nodes = rng.choice(args.nodes, size=min(args.score_nodes, args.nodes), replace=False)
    half = nodes.size // 2
    x, y = np.asarray(rows[nodes], dtype=np.float64), blocks.numpy()[nodes]
    # Standardised features: the rows' scale differs between trainers and walk counts, and
    # an L2-regularised regression on small rows predicts one class for every node.
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    model.fit(x[:half], y[:half])
    predicted = model.predict(x[half:])
    return (
        float(f1_score(y[half:], predicted, average="micro")),
        float(f1_score(y[half:], predicted, average="macro")),
    )


# ------------------------------------------------------------------------------ the panel
def run_contender(args: argparse.Namespace, contender: str, shape: str, nodes: int) -> dict:
    """One contender in a fresh process; its row, with the load average before it."""
    command = [sys.executable, __file__, "--child", contender, "--shape", shape]
    command += ["--nodes", str(nodes)] + _forwarded(args)
    load = load_average()
    trace = memory.ResidentTrace()  # the exact peak, read from outside the run
    try:
        row = fresh.run(command, f"{contender} on {shape} {nodes:,}", cwd=HERE,
                        timeout=args.timeout, watch=trace, every=READING_INTERVAL)  # fmt: skip
    except fresh.RunFailed as failed:
        print(failed, flush=True)
        return {"contender": contender, "shape": shape, "nodes": nodes, "failed": str(failed)}
    read_peak, readings = trace.peak(row["measured_from"], row["measured_to"])
    return {**row, "read_peak_bytes": read_peak, "readings": readings,
            "load_before": round(load, 2)}  # fmt: skip


def _forwarded(args: argparse.Namespace) -> list[str]:
    """The options a child needs, as given to the panel."""
    out = []
    for name in ("walks_per_node", "walk_length", "degree", "blocks", "inside", "threads",
                 "chunk_walks", "score_nodes", "warm_up_nodes", "seed"):  # fmt: skip
        out += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)
    if args.child:
        child(args)
        return
    contenders = cli.chosen(args.contenders, CONTENDERS)
    gensim_sizes = {int(s) for s in args.gensim_sizes.split(",") if s}
    run_load = wait_until_quiet(args.settle)
    print(
        f"# DeepWalk at scale: degree {args.degree:g}, {args.blocks} blocks, inside "
        f"{args.inside:g}, walks of {args.walk_length}, {args.threads} threads; load average "
        f"before the run {run_load:.2f}",
        flush=True,
    )
    rows = []
    for shape in args.shapes.split(","):
        for nodes in (int(s) for s in args.sizes.split(",")):
            for contender in contenders:
                if contender == "gensim" and nodes not in gensim_sizes:
                    continue
                row = run_contender(args, contender, shape, nodes)
                rows.append(row)
                print(json.dumps(row), flush=True)
    print_rows(rows)
    for line in verdict_lines(rows, run_load):
        print_verdict(line)  # kept for the summary's "verdicts"
    summary = {"benchmark": "deepwalk_scale", "load_before_run": round(run_load, 2), "rows": rows}
    emit_summary(summary, args.json)


if __name__ == "__main__":
    main()
