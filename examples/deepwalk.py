"""Unsupervised node embeddings from random walks: DeepWalk and node2vec.

Random walks on the graph alone (no node features, no labels) train word2vec's skip-gram
with negative sampling (:func:`graphemb.skipgram.train_node_embeddings`); the learned rows
are then scored the DeepWalk way: one-vs-rest logistic regression on a fraction of
labelled nodes, Micro/Macro-F1 on the rest, and on the dataset's own split.

* ``--walk deepwalk``: uniform walks; ``--walk node2vec``: biased walks (``--p``, ``--q``).
* ``--backend``: ``compiled`` (word2vec's algorithm in C++ threads, CPU), ``torch`` (the
  same updates in batched rounds, CPU or ``--device cuda``), or ``auto``.
* ``--num-procs N``, or ``torchrun``: N ranks train one table together (torch backend), each
  its share of every step, the rows in shared memory on one machine or partitioned across
  machines (``GRAPHEMB_MACHINES=0,0,1,1`` simulates two machines of two ranks each).

Usage (either stack; no DGL needed)::

    python examples/deepwalk.py                                   # Cora's graph, DeepWalk
    python examples/deepwalk.py --walk node2vec --p 1 --q 0.5
    python examples/deepwalk.py --dataset sbm                     # planted communities
    python examples/deepwalk.py --backend torch --device cuda
    python examples/deepwalk.py --num-procs 2                     # 2 ranks, shared memory
    GRAPHEMB_MACHINES=0,0,1,1 torchrun --standalone --nproc_per_node 4 \
        examples/deepwalk.py --dataset sbm --sbm-nodes 100000     # 2 machines x 2 ranks
    python examples/deepwalk.py --quick                           # seconds (CI)

Prints the run, the F1 table, the scores on the dataset's own split, and last
``RESULT {json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import torch

from graphemb.datasets import load_planetoid, stochastic_block_model
from graphemb.evaluation import (
    DEEPWALK_RATIOS,
    format_f1_table,
    node_classification_f1,
    split_f1,
)
from graphemb.graph import Graph
from graphemb.skipgram import Backend, SkipGramOptions, train_node_embeddings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _launch as launch  # noqa: E402  (examples/_launch.py: the dataset options)

#: --quick: a short run for CI, seconds on one CPU core; still far above chance.
QUICK = {"num_walks": 5, "dimensions": 32, "walk_length": 20, "ratios": "0.5", "repeats": 2}


def build_parser() -> argparse.ArgumentParser:
    """The example's command line; skip-gram defaults are the library's."""
    defaults = SkipGramOptions()
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    launch.add_dataset_arguments(parser, " (features unused)")
    walks = parser.add_argument_group("walks and skip-gram")
    walks.add_argument("--walk", choices=["deepwalk", "node2vec"], default="deepwalk")
    walks.add_argument("--p", type=float, default=1.0, help="node2vec return parameter")
    walks.add_argument("--q", type=float, default=0.5, help="node2vec in-out parameter")
    for name, help_text in (
        ("walk_length", "nodes per walk"),
        ("num_walks", "walks started from every node"),
        ("dimensions", "embedding size"),
        ("window", "largest context distance"),
        ("negatives", "noise nodes per (context, node) pair"),
    ):
        walks.add_argument(f"--{name.replace('_', '-')}", type=int, default=None,
                           help=f"{help_text} (default {getattr(defaults, name)})")  # fmt: skip
    train = parser.add_argument_group("training")
    train.add_argument("--backend", choices=[b.value for b in Backend], default="auto")
    train.add_argument("--workers", type=int, default=None, help="CPU threads that train")
    train.add_argument("--seed", type=int, default=0, help="seeds walks, rows, noise, splits")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument("--quick", action="store_true", help=f"short run for CI: {QUICK}")
    launch.add_process_arguments(
        parser, num_procs_default=1, num_procs_help="ranks to start here (ignored under torchrun)",
        device_help="cuda: one GPU per rank, the rows partitioned over them",
    )  # fmt: skip
    scoring = parser.add_argument_group("evaluation")
    scoring.add_argument("--ratios", default=None, help="labelled fractions, comma-separated")
    scoring.add_argument("--repeats", type=int, default=5, help="random splits per fraction")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The checked options, ``--quick`` filling in what the command line left out."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for key, value in (QUICK if args.quick else {}).items():
        if getattr(args, key) is None or key == "repeats":
            setattr(args, key, value)
    args.ratios = args.ratios or ",".join(str(r) for r in DEEPWALK_RATIOS)
    try:
        args.ratios = [float(r) for r in args.ratios.split(",")]
    except ValueError:
        parser.error(f"--ratios must be comma-separated numbers, got {args.ratios!r}")
    if not all(0 < r < 1 for r in args.ratios):
        parser.error("--ratios must lie in (0, 1)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible")
    try:
        args.options = skipgram_options(args).checked()
    except ValueError as error:  # the library names the option and the value
        parser.error(str(error))
    return args


def skipgram_options(args: argparse.Namespace) -> SkipGramOptions:
    """The run's skip-gram options: the library's, changed by the flags given."""
    given = {
        name: getattr(args, name)
        for name in ("walk_length", "num_walks", "dimensions", "window", "negatives")
        if getattr(args, name) is not None
    }
    walks = {"p": args.p, "q": args.q} if args.walk == "node2vec" else {}
    return SkipGramOptions(seed=args.seed, **given, **walks)


def load_graph(args: argparse.Namespace) -> tuple[Graph, Any]:
    """The graph, and the dataset for its labels and split (features are never used)."""
    if args.dataset == "sbm":
        data = stochastic_block_model(args.sbm_nodes, args.sbm_communities, seed=args.seed)
    else:
        data = load_planetoid(args.dataset)
    return Graph.from_dataset(data), data


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    args = parse_args(argv)
    if launch.torchrun_ranks() is not None or args.num_procs > 1:
        args.num_threads = args.workers or 1
        launch.launch(run, args, args.num_procs)  # rank 0 prints the result
        return None
    return run(0, 1, 0, args)


def run(rank: int, world_size: int, local_rank: int, args: argparse.Namespace) -> dict | None:
    """Train (every rank) and score (rank 0)."""
    started = time.perf_counter()
    graph, data = load_graph(args)
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
    graph = graph.to(device)
    options = args.options
    if rank == 0:
        print(
            f"{args.dataset}: {graph.num_nodes} nodes, {graph.num_edges} edges, "
            f"{data.num_classes} classes; {args.walk} walks of {options.walk_length} nodes, "
            f"window {options.window}, {options.negatives} negatives, dim "
            f"{options.dimensions}; backend {args.backend} on {args.device}, {world_size} "
            f"rank(s)",
            flush=True,
        )
    rows = train_node_embeddings(
        graph, options, backend=args.backend, workers=args.workers, progress=not args.no_progress
    ).cpu()
    trained = time.perf_counter() - started
    if rank != 0:
        return None
    scores = node_classification_f1(rows, data.labels, args.ratios, repeats=args.repeats,
                                    seed=args.seed)  # fmt: skip
    micro, macro = split_f1(rows, data.labels, data.train_idx, data.test_idx)
    print(format_f1_table(scores), flush=True)
    print(f"own split ({len(data.train_idx)} labelled, {len(data.test_idx)} test nodes): "
          f"accuracy {micro:.4f}, Macro-F1 {macro:.4f}", flush=True)  # fmt: skip
    half = min(scores, key=lambda s: abs(s.train_ratio - 0.5))
    result = {
        "dataset": args.dataset, "walk": args.walk, "p": options.p, "q": options.q,
        "dimensions": options.dimensions, "num_walks": options.num_walks,
        "backend": args.backend, "device": args.device, "seed": args.seed,
        "world_size": world_size,
        "micro_f1_at_50": round(half.micro_f1, 4), "macro_f1_at_50": round(half.macro_f1, 4),
        "split_accuracy": round(micro, 4), "split_macro_f1": round(macro, 4),
        "chance": round(1.0 / data.num_classes, 4),
        "scores": [{k: round(v, 4) if isinstance(v, float) else v
                    for k, v in s.as_dict().items()} for s in scores],
        "train_seconds": round(trained, 2),
        "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip
    print("RESULT " + json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
