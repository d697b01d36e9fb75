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
all epochs (:func:`graphemb.skipgram.learning_rate`), the trainer's own step
(:func:`graphemb.skipgram.train_step`: :meth:`graphemb.skipgram.SkipGram.sgd_step`, rows
repeated in a step moving by at most 1.5 times their mean gradient). ``--optimizer adam`` /
``adagrad`` keep the previous behaviour (mean loss, fixed window, negatives per position).

What these defaults score on Cora's graph, against gensim on the same walks: README.md,
"Unsupervised embeddings: DeepWalk and node2vec".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import torch
from tqdm import tqdm

import graphemb
from graphemb.datasets import load_planetoid, stochastic_block_model
from graphemb.evaluation import (
    F1Scores,
    format_f1_table,
    node_classification_f1,
    split_f1,
)
from graphemb.graph import Graph
from graphemb.optim import SparseAdagrad, SparseAdam, SparseSGD
from graphemb.sampling.walks import RandomWalker
from graphemb.skipgram import (
    NegativeSampler,
    SkipGram,
    keep_probabilities,
    learning_rate,
    subsample_walks,
    train_step,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _launch as launch  # noqa: E402  (examples/_launch.py: options and launcher of ranks)
from _deepwalk_options import TRAINER, parse_args  # noqa: E402  (the command line)


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


def build_model(
    args: argparse.Namespace, graph: Graph, device: torch.device
) -> tuple[SkipGram, Any]:
    """The skip-gram tables (collective with a process group) and their optimizer."""
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
    return model, optimizer_class[args.optimizer](model.embeddings, lr=args.lr)


def describe(args, graph: Graph, num_classes: int, model: SkipGram, world_size: int) -> str:
    """The run's first line: graph, walks, model and processes."""
    walk = (
        f"node2vec walks (p={args.p}, q={args.q})"
        if args.walk == "node2vec"
        else "uniform walks (DeepWalk)"
    )
    return (
        f"{args.dataset}: {graph.num_nodes} nodes, {graph.num_edges} edges, {num_classes} "
        f"classes; {walk} of {args.walk_length} steps, window {args.window}, "
        f"{args.negatives} negatives, dim {args.dim}; {world_size} process(es) on "
        f"{args.device}, tables: {model.center.storage_kind}"
    )


# ---------------------------------------------------------------------------- one process
def train_epochs(
    args, model, optimizer, walker, sampler, first_epoch, history, rank, world_size
) -> tuple[float, int]:
    """Epochs ``first_epoch .. --epochs``, each appended to ``history`` (and checkpointed
    with ``--checkpoint``). Returns the training seconds and the pairs of all processes."""
    is_main = rank == 0
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
    return train_seconds, train_pairs


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
    model, optimizer = build_model(args, graph, device)

    first_epoch, history = 1, []
    if args.resume:
        extra = graphemb.load(args.checkpoint, model.embeddings, optimizer)["extra"]
        first_epoch, history = int(extra["epoch"]) + 1, list(extra["history"])
        if is_main:
            print(f"RESUMED from {args.checkpoint} after epoch {extra['epoch']}", flush=True)
    if is_main:
        print(describe(args, graph, num_classes, model, world_size), flush=True)

    train_seconds, train_pairs = train_epochs(
        args, model, optimizer, walker, sampler, first_epoch, history, rank, world_size
    )

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
    args = parse_args(argv, description=__doc__.split("\n\n")[0])
    if launch.torchrun_ranks() is not None or args.num_procs > 1:
        launch.launch(run, args, args.num_procs)
        return None
    return run(0, 1, 0, args)


if __name__ == "__main__":
    main()
