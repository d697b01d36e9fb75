"""Unsupervised node embeddings from random walks: DeepWalk and node2vec.

Random walks on the graph alone (no node features, no labels) feed a skip-gram with
negative sampling whose two tables are :class:`graphemb.NodeEmbedding` objects trained by
graphemb's ``SparseAdam``. The learned rows are then frozen and scored the DeepWalk way:
one-vs-rest logistic regression on a fraction of labelled nodes, Micro/Macro-F1 on the rest.

* ``--walk deepwalk``: uniform walks; ``--walk node2vec``: biased walks (``--p``, ``--q``).
* ``--num-procs N``: N processes on this machine (gloo; the tables live once in shared
  memory), or ``torchrun --standalone --nproc_per_node N examples/deepwalk.py``; with
  ``--device cuda`` one GPU per process (NCCL, tables partitioned over the GPUs). Each
  process walks its share of every batch; N processes train like one on the union batch.
* An epoch draws one walk from every node; ``--epochs`` is the number of walks per node.

Usage (either stack; no DGL needed)::

    python examples/deepwalk.py                                   # Cora's graph, DeepWalk
    python examples/deepwalk.py --walk node2vec --p 1 --q 0.5
    python examples/deepwalk.py --dataset sbm                     # planted communities
    python examples/deepwalk.py --num-procs 2
    python examples/deepwalk.py --checkpoint runs/dw.ckpt --epochs 5
    python examples/deepwalk.py --checkpoint runs/dw.ckpt --epochs 10 --resume
    python examples/deepwalk.py --quick                           # seconds (CI)

Prints a line per epoch, the F1 table, the scores on the dataset's own split, and last
``RESULT {json}``. Training is seeded per epoch, so a run resumed from the checkpoint of
epoch k reproduces the uninterrupted run.

Training defaults to word2vec's schedule (``--optimizer sgd``) with the defaults of
:func:`graphemb.skipgram.train_node_embeddings`: summed loss, dynamic window, frequent nodes
subsampled (``--sample``), blocks of negatives drawn per step and weighted to word2vec's
per-pair expectation (``--sharing batch``), learning rate 0.035 decaying linearly to ~0 over
all epochs, :meth:`graphemb.skipgram.SkipGram.sgd_step` (rows repeated in a step move by at
most 1.5 times their mean gradient). ``--optimizer adam`` / ``adagrad`` keep the previous
behaviour (mean loss, fixed window, negatives per position).

Measured on Cora's graph (dim 128, 10 walks of 40 nodes per node, window 10, 5 negatives;
the trainer's step through :func:`graphemb.skipgram.train_node_embeddings`, one process;
mean of 20 seeds x 3 label splits for the first two rows, of 4 seeds (earlier runs) for the
others, scored like gensim by benchmarks/bench_deepwalk_quality.py):

==================================================  ================  ================
Cora, graph only                                    Micro-F1 at 50%   Macro-F1 at 50%
==================================================  ================  ================
gensim Word2Vec (sg, negative 5), same walks        0.825             0.816
graphemb default (``batch`` negatives, "cap:1.5")   0.823             0.814
graphemb, ``walk`` negatives, "cap:2"               0.811             0.801
graphemb, ``pair`` negatives (word2vec's draws)     0.825             0.815
==================================================  ================  ================

This script's own defaults (window 5) give Micro-F1 0.827 and Macro-F1 0.818 at 50 %.

For reference: DeepWalk on Cora's public split (140 labels) scores 0.672 in Kipf &
Welling, "Semi-Supervised Classification with Graph Convolutional Networks" (ICLR 2017,
arXiv:1609.02907), Table 2 (from Yang et al., 2016). The README of OpenNE-PyTorch
(github.com/thunlp/OpenNE) lists "accuracy" 0.827 for DeepWalk and 0.812 for node2vec at
its default 50% training ratio, in a table that does not name its dataset (it also lists
TADW, which needs text features such as Cora's). The synthetic graph (``--dataset sbm``:
5,000 nodes, 5 communities) reached Micro-F1 0.990 at 50% (chance 0.20) with
``--optimizer adam``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

import graphemb
from graphemb.datasets import load_planetoid, stochastic_block_model
from graphemb.evaluation import (
    DEEPWALK_RATIOS,
    F1Scores,
    format_f1_table,
    node_classification_f1,
    split_f1,
)
from graphemb.graph import Graph
from graphemb.optim import SparseAdagrad, SparseAdam, SparseSGD
from graphemb.sampling.walks import RandomWalker
from graphemb.skipgram import (
    SHARING,
    TORCH_LR,
    NegativeSampler,
    SkipGram,
    keep_probabilities,
    learning_rate,
    subsample_walks,
    train_node_embeddings,
    train_step,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _launch as launch  # noqa: E402  (examples/_launch.py: options and launcher of ranks)

# word2vec's schedule (--optimizer sgd) takes the library trainer's defaults.
TRAINER = {
    name: parameter.default
    for name, parameter in inspect.signature(train_node_embeddings).parameters.items()
}

# --quick: a short run for CI, seconds on one CPU core; still far above chance.
QUICK = {
    "epochs": 3,
    "dim": 32,
    "walk_length": 20,
    "batch_walks": 16,
    "lr": 0.1,
    "ratios": "0.5",
    "repeats": 2,
}


# ---------------------------------------------------------------------------- arguments
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        choices=["cora", "citeseer", "sbm"],
        default="cora",
        help="a Planetoid citation graph (features unused), or a synthetic "
        "stochastic block model whose communities are the classes",
    )
    data.add_argument("--sbm-nodes", type=int, default=5000, help="nodes of the sbm graph")
    data.add_argument("--sbm-communities", type=int, default=5, help="communities of the sbm graph")

    walks = parser.add_argument_group("walks")
    walks.add_argument(
        "--walk",
        choices=["deepwalk", "node2vec"],
        default="deepwalk",
        help="uniform walks, or node2vec's biased second-order walks",
    )
    walks.add_argument("--p", type=float, default=1.0, help="node2vec return parameter")
    walks.add_argument(
        "--q",
        type=float,
        default=0.5,
        help="node2vec in-out parameter (< 1: move outwards, DFS-like; > 1: stay local). "
        "On Cora q = 0.5 scored best of q in {0.5, 2, 4} (Micro-F1 at 50%%: 0.82 vs 0.81 "
        "for DeepWalk, 0.78-0.80 for q > 1)",
    )
    walks.add_argument(
        "--walk-length", type=int, default=None, help="steps per walk (default 40; 20 with --quick)"
    )

    model = parser.add_argument_group("skip-gram")
    model.add_argument(
        "--dim", type=int, default=None, help="embedding size (default 128; 32 with --quick)"
    )
    model.add_argument("--window", type=int, default=5, help="context window")
    model.add_argument(
        "--negatives", type=int, default=5, help="negative nodes per pair (degree ** 0.75)"
    )
    model.add_argument(
        "--sharing",
        choices=SHARING,
        default=None,
        help="negatives: 'batch' = blocks drawn per step, each center scored against another "
        "walk's block, weighted to word2vec's expected loss (fast, the default with sgd); "
        "'pair' = word2vec's K per pair; 'walk' = each walk's own block; 'position' = K per "
        "walk position shared by its pairs (the default with adam/adagrad; worse embeddings)",
    )
    model.add_argument(
        "--sample",
        type=float,
        default=None,
        help="subsampling threshold of frequent nodes (default 1e-3 with sgd, 0 otherwise)",
    )

    train = parser.add_argument_group("training")
    train.add_argument(
        "--epochs", type=int, default=None, help="walks per node (default 10; 3 with --quick)"
    )
    train.add_argument(
        "--batch-walks",
        type=int,
        default=None,
        help="walks per step, over all processes (default 32 with sgd, 256 otherwise; 16 "
        "with --quick)",
    )
    train.add_argument(
        "--optimizer",
        choices=["sgd", "adam", "adagrad"],
        default="sgd",
        help="sgd: word2vec's schedule (summed loss, dynamic window, learning rate decaying "
        "linearly to ~0 over all --epochs; a run resumed with a larger --epochs does not "
        "repeat the uninterrupted one); adam/adagrad: graphemb SparseAdam or SparseAdagrad "
        "on the mean loss, fixed window",
    )
    train.add_argument(
        "--lr",
        type=float,
        default=None,
        help=f"learning rate (default {TORCH_LR} with sgd, 0.01 otherwise; 0.1 with --quick)",
    )
    train.add_argument("--seed", type=int, default=0, help="seeds tables, walks, negatives, splits")
    train.add_argument("--num-threads", type=int, default=1, help="torch threads per process")
    train.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    train.add_argument(
        "--quick",
        action="store_true",
        help="short run for CI: " + ", ".join(f"{k}={v}" for k, v in QUICK.items()),
    )

    scoring = parser.add_argument_group("evaluation")
    scoring.add_argument(
        "--ratios",
        default=None,
        help="labelled fractions, comma-separated (default: 0.1, ..., 0.9)",
    )
    scoring.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="random splits per fraction (default 5; 2 with --quick)",
    )

    launch.add_process_arguments(
        parser,
        num_procs_default=1,
        num_procs_help="processes to start here (ignored under torchrun)",
        device_help="cpu: gloo, tables in shared memory across processes; cuda: one "
        "GPU per process, NCCL, tables partitioned over the GPUs",
    )

    ckpt = parser.add_argument_group("checkpoints")
    ckpt.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="save tables and optimizer state here after every epoch",
    )
    ckpt.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    defaults = {
        "epochs": 10,
        "dim": 128,
        "walk_length": 40,
        "batch_walks": 32 if args.optimizer == "sgd" else 256,
        "lr": TORCH_LR if args.optimizer == "sgd" else 0.01,
        "sharing": TRAINER["sharing"] if args.optimizer == "sgd" else "position",
        "sample": 1e-3 if args.optimizer == "sgd" else 0.0,
        "repeats": 5,
        "ratios": ",".join(str(r) for r in DEEPWALK_RATIOS),
    }
    for key, value in {**defaults, **(QUICK if args.quick else {})}.items():
        if getattr(args, key) is None:  # what the command line gives always wins
            setattr(args, key, value)
    try:
        args.ratios = [float(r) for r in args.ratios.split(",")]
    except ValueError:
        parser.error(f"--ratios must be comma-separated numbers, got {args.ratios!r}")
    if not all(0 < r < 1 for r in args.ratios):
        parser.error("--ratios must lie in (0, 1)")
    if args.epochs < 0:
        parser.error("--epochs must be >= 0")
    for name in (
        "dim",
        "window",
        "negatives",
        "walk_length",
        "batch_walks",
        "repeats",
        "num_procs",
        "num_threads",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if not (args.p > 0 and args.q > 0):
        parser.error("--p and --q must be > 0")
    launch.check_resume(parser, args)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible")
    return args


# ---------------------------------------------------------------------------- pieces
def load_graph(args: argparse.Namespace) -> tuple[Graph, Any]:
    """The graph, and the dataset for its labels and splits (features are never used)."""
    if args.dataset == "sbm":
        data = stochastic_block_model(args.sbm_nodes, args.sbm_communities, seed=args.seed)
    else:
        data = load_planetoid(args.dataset)
    return Graph.from_dataset(data), data


def epoch_generator(seed: int, epoch: int, rank: int, device: torch.device) -> torch.Generator:
    """Seeds one epoch of one process: a resumed run repeats the epochs it missed."""
    return torch.Generator(device=device).manual_seed(
        (seed * 1_000_003 + epoch * 1_009 + rank) % 2**62
    )


def train_epoch(
    args, model, optimizer, walker, sampler, epoch, rank, world_size
) -> tuple[float, int]:
    """One walk from every node, in batches of ``--batch-walks`` over all processes.

    Returns this process's mean loss per pair and its number of positive pairs.
    """
    num_nodes = walker.graph.num_nodes
    device = walker.graph.device
    # The same order of start nodes everywhere; each process takes its slice of a batch.
    order = torch.randperm(
        num_nodes, generator=epoch_generator(args.seed, epoch, 0, torch.device("cpu"))
    )
    generator = epoch_generator(args.seed, epoch, rank + 1, device)
    keep = keep_probabilities(walker.graph.in_degrees(), args.sample)
    word2vec = args.optimizer == "sgd"
    total, pairs, done = 0.0, 0, 0
    for batch in order.split(args.batch_walks):  # every process runs the same number of steps
        start = batch.tensor_split(world_size)[rank].to(device)
        walks = walker(start, args.walk_length, generator=generator)
        if args.sample > 0:
            walks = subsample_walks(walks, keep, generator=generator)
        if word2vec:
            # The library trainer's step: dynamic window, negatives, then word2vec's step
            # written into the tables where the model allows it (shared memory: every
            # process at once, without locks), else the summed loss and the optimizer
            # (x world_size undoes its mean over ranks); the rate decays linearly over
            # every walk of every epoch.
            loss = train_step(
                model,
                walks,
                sampler,
                lr=learning_rate(args.lr, (epoch - 1) * num_nodes + done, args.epochs * num_nodes),
                generator=generator,
                optimizer=optimizer,
                duplicates=TRAINER["duplicates"],
                return_loss=True,
                loss_scale=world_size,
            )
        else:
            mean = model(walks, sampler(model.negatives_shape(walks.shape), generator=generator))
            mean.backward()
            optimizer.step()
            loss = mean.item()
        done += batch.numel()
        count = SkipGram.num_pairs(walks, args.window)  # at the full window
        total += loss if word2vec else loss * count
        pairs += count
    return total / max(pairs, 1), pairs


def evaluate(args, model: SkipGram, data) -> tuple[list[F1Scores], tuple[float, float]] | None:
    """F1 table of the frozen center rows over random splits, and (Micro, Macro) F1 on the
    dataset's own split (Planetoid's public one: 140 labelled nodes, 1000 test nodes).
    Rank 0 only (collective: gathers the table)."""
    table = model.center.all_get_embedding(dst=0)
    if table is None:
        return None
    scores = node_classification_f1(
        table, data.labels, args.ratios, repeats=args.repeats, seed=args.seed
    )
    return scores, split_f1(table, data.labels, data.train_idx, data.test_idx)


def at_ratio(scores: list[F1Scores], ratio: float) -> F1Scores:
    return min(scores, key=lambda s: abs(s.train_ratio - ratio))


# ---------------------------------------------------------------------------- one process
def run(rank: int, world_size: int, local_rank: int, args: argparse.Namespace) -> dict | None:
    """Train and evaluate; inside a process group when ``world_size > 1``."""
    started = time.perf_counter()
    torch.set_num_threads(args.num_threads)
    is_main = rank == 0
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
    graph, data = load_graph(args)
    num_classes = data.num_classes
    graph = graph.to(device)
    walker = RandomWalker(graph, *((args.p, args.q) if args.walk == "node2vec" else (1.0, 1.0)))
    sampler = NegativeSampler.from_graph(graph)
    model = SkipGram(
        graph.num_nodes,
        args.dim,
        window=args.window,
        name=f"{args.dataset}_walks",
        device=device,
        seed=args.seed,
        timeout=args.timeout,
        sharing=args.sharing,
        num_negatives=args.negatives,
    )
    optimizer_class = {"sgd": SparseSGD, "adam": SparseAdam, "adagrad": SparseAdagrad}
    optimizer = optimizer_class[args.optimizer](model.embeddings, lr=args.lr)

    first_epoch, history = 1, []
    if args.resume:
        extra = graphemb.load(args.checkpoint, model.embeddings, optimizer)["extra"]
        first_epoch, history = int(extra["epoch"]) + 1, list(extra["history"])
        if is_main:
            print(f"RESUMED from {args.checkpoint} after epoch {extra['epoch']}", flush=True)
    if is_main:
        walk = (
            f"node2vec walks (p={args.p}, q={args.q})"
            if args.walk == "node2vec"
            else "uniform walks (DeepWalk)"
        )
        print(
            f"{args.dataset}: {graph.num_nodes} nodes, {graph.num_edges} edges, {num_classes} "
            f"classes; {walk} of {args.walk_length} steps, window {args.window}, "
            f"{args.negatives} negatives, dim {args.dim}; {world_size} process(es) on "
            f"{args.device}, tables: {model.center.storage_kind}",
            flush=True,
        )

    epochs = tqdm(
        range(first_epoch, args.epochs + 1),
        desc="epochs",
        file=sys.stderr,
        disable=args.no_progress or not is_main,
        initial=first_epoch - 1,
        total=args.epochs,
    )
    train_seconds, train_pairs = 0.0, 0
    for epoch in epochs:
        tic = time.perf_counter()
        loss, pairs = train_epoch(args, model, optimizer, walker, sampler, epoch, rank, world_size)
        seconds = time.perf_counter() - tic
        train_seconds, train_pairs = train_seconds + seconds, train_pairs + pairs * world_size
        history.append({"epoch": epoch, "loss": loss})
        if is_main:
            epochs.set_postfix(loss=f"{loss:.4f}")
            tqdm.write(
                f"epoch {epoch:3d}  loss {loss:.4f}  {pairs * world_size / seconds:,.0f} pairs/s",
                file=sys.stdout,
            )
        if args.checkpoint is not None:  # collective
            if is_main:
                args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
            graphemb.save(
                args.checkpoint,
                model.embeddings,
                optimizer,
                extra={"epoch": epoch, "history": history},
            )
    epochs.close()

    evaluated = evaluate(args, model, data)
    if not is_main or evaluated is None:
        return None
    scores, (public_micro, public_macro) = evaluated
    print(format_f1_table(scores), flush=True)
    print(
        f"own split ({len(data.train_idx)} labelled, {len(data.test_idx)} test nodes): "
        f"accuracy {public_micro:.4f}, Macro-F1 {public_macro:.4f}",
        flush=True,
    )
    half = at_ratio(scores, 0.5)
    result = {
        "dataset": args.dataset,
        "walk": args.walk,
        "p": args.p,
        "q": args.q,
        "dim": args.dim,
        "epochs": args.epochs,
        "start_epoch": first_epoch,
        "world_size": world_size,
        "device": args.device,
        "seed": args.seed,
        "final_loss": history[-1]["loss"] if history else None,
        "micro_f1_at_50": round(half.micro_f1, 4),
        "macro_f1_at_50": round(half.macro_f1, 4),
        "split_accuracy": round(public_micro, 4),
        "split_macro_f1": round(public_macro, 4),
        "chance": round(1.0 / num_classes, 4),
        "scores": [
            {k: round(v, 4) if isinstance(v, float) else v for k, v in s.as_dict().items()}
            for s in scores
        ],
        "pairs_per_second": round(train_pairs / train_seconds) if train_seconds else None,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print("RESULT " + json.dumps(result), flush=True)
    return result


# ---------------------------------------------------------------------------- processes
def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    args = parse_args(argv)
    if launch.torchrun_ranks() is not None or args.num_procs > 1:
        launch.launch(run, args, args.num_procs)
        return None
    return run(0, 1, 0, args)


if __name__ == "__main__":
    main()
