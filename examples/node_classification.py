"""Node classification with GraphSAGE and learnable node embeddings (one process).

Every node gets a learnable row of a :class:`graphemb.NodeEmbedding`, concatenated with its
features (or alone, ``--no-features``), fed to a GraphSAGE (PyG ``SAGEConv`` layers) trained
on mini-batches that graphemb's ``NeighborSampler`` samples from a :class:`graphemb.graph.Graph`.
The embedding is trained by graphemb's ``SparseAdam`` (only the rows of each batch's input
nodes change), the dense layers by ``torch.optim.Adam``. Pure torch + PyG: any current torch,
CPU or CUDA (``--device cuda``: graph, sampling, embedding and layers on the GPU).

Usage::

    python examples/node_classification.py                       # Cora, features + embeddings
    python examples/node_classification.py --no-features         # embeddings only
    python examples/node_classification.py --dataset sbm --no-features
    python examples/node_classification.py --checkpoint runs/cora.ckpt --epochs 50
    python examples/node_classification.py --checkpoint runs/cora.ckpt --epochs 100 --resume
    python examples/node_classification.py --device cuda         # everything on the GPU
    python examples/node_classification.py --quick               # a few epochs (CI)
    python examples/node_classification.py --graph edges.txt --labels labels.txt
    python examples/node_classification.py --graph blog.mat      # labels: the .mat's group

Your own graph (``--graph``): any file :func:`graphemb.io.read_graph` reads (edge list,
adjacency list, ``.mat``, ``.npz``), labels from ``--labels`` (``node label [label ...]``
lines; several labels per node make it multi-label: a BCE loss, and Micro-F1 of each
node's ``k`` highest-scoring labels in place of accuracy), optional ``--features``. The
labelled nodes are split at random (``--split``).

The last line printed is ``RESULT {json}`` with the validation and test accuracy (test
accuracy at the epoch of best validation accuracy, and at the last epoch), chance level and
the mean seconds per training epoch. ``examples/multi_gpu_graphsage.py`` runs the same
training on several processes and reuses this file's helpers. The options, the data and
the checkpoints live beside it, in ``examples/_node_classification_{options,data,progress}.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from graphemb import NodeEmbedding
from graphemb.evaluation import prediction_f1
from graphemb.optim import SparseAdam
from graphemb.sampling import NeighborSampler, SeedLoader

try:  # the optional packages of the examples: a clear message instead of a traceback
    from tqdm import tqdm

    from graphemb.nn import GraphSAGE
except ImportError as _error:
    sys.exit(
        f"this example needs an optional package: {_error}\n"
        "install the examples' needs with `pip install 'graphemb[examples]'` "
        "(torch_geometric, tqdm, ...)"
    )

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _node_classification_data import NodeData, load_data  # noqa: E402
from _node_classification_options import (  # noqa: E402
    add_graph_file_arguments,
    build_parser,
    finish_arguments,
)
from _node_classification_progress import (  # noqa: E402
    Progress,
    resume_from_checkpoint,
    save_checkpoint,
)


# ---------------------------------------------------------------------------- data and model
def make_embedding(args: argparse.Namespace, num_nodes: int, **kwargs: Any) -> NodeEmbedding | None:
    """The learnable table (``None`` for ``--emb-dim 0``).

    Rows start at zero (the default of graphemb and DGL): a node has no identity of its own
    at first, and its row moves towards the classes of the training nodes it is sampled
    next to, much like label propagation. Random initial rows would be noise that the
    model can fit the 140 training nodes of Cora with (measured with DGL: about 4 points of
    test accuracy lost with features, 6 without).
    """
    if args.emb_dim == 0:
        return None
    return NodeEmbedding(num_nodes, args.emb_dim, "node_embedding", **kwargs)


def make_model(
    args: argparse.Namespace, data: NodeData, embedding: NodeEmbedding | None
) -> GraphSAGE:
    """The GraphSAGE on ``data.graph``'s device, identically initialised in every process."""
    torch.manual_seed(args.seed)
    model = GraphSAGE(
        embedding,
        num_features=data.num_features,
        hidden_size=args.hidden,
        num_classes=data.num_classes,
        num_layers=len(args.fanouts),
        dropout=args.dropout,
    )
    return model.to(data.graph.device)


def train_loader(
    data: NodeData,
    args: argparse.Namespace,
    *,
    rank: int = 0,
    world_size: int = 1,
    batch_size: int | None = None,
) -> SeedLoader:
    """Shuffled mini-batches of the training nodes with ``args.fanouts`` sampled neighbours.

    Shuffling and sampling depend on ``args.seed`` and the epoch (``loader.set_epoch``)
    only, so a resumed run sees the batches an uninterrupted one would. With several ranks,
    each gets its own share of the nodes, and every rank the same number of batches.
    """
    return SeedLoader(
        data.graph,
        data.splits["train"],
        NeighborSampler(args.fanouts),
        batch_size or args.batch_size,
        shuffle=True,
        seed=args.seed,
        rank=rank,
        world_size=world_size,
        device=data.graph.device,
    )


def seed_epoch(seed: int, epoch: int, rank: int = 0) -> None:
    """Seed dropout per epoch (on CPU and every GPU): a resumed run repeats the same epochs."""
    torch.manual_seed((seed * 1_000_003 + epoch * 1_009 + rank) % 2**31)


def node_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy for class ids (n,), binary cross-entropy per label for 0/1 (n, C)."""
    if labels.dim() == 2:
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    return F.cross_entropy(logits, labels)


def train_epoch(
    model: torch.nn.Module,
    loader: SeedLoader,
    data: NodeData,
    dense_opt: torch.optim.Optimizer,
    sparse_opt: SparseAdam | None,
) -> float:
    """One pass over ``loader``; returns the mean loss of its batches.

    ``model`` may be wrapped in ``DistributedDataParallel``: both optimizers' steps are then
    collective, and every rank must see the same number of batches.
    """
    model.train()
    losses = []
    for _, output_nodes, blocks in loader:
        loss = node_loss(model(blocks, data.features), data.labels[output_nodes])
        dense_opt.zero_grad()
        loss.backward()  # dense gradients into .grad, embedding-row gradients into the trace
        dense_opt.step()
        if sparse_opt is not None:
            sparse_opt.step()  # updates only the rows this batch looked up
        losses.append(loss.detach())
    # One device sync per epoch, not one per batch.
    return torch.stack(losses).mean().item() if losses else 0.0


@torch.no_grad()
def evaluate(
    model: GraphSAGE, data: NodeData, splits: tuple[str, ...] = ("val", "test")
) -> dict[str, float]:
    """Accuracy on each split (multi-label: Micro-F1 of each node's k highest-scoring
    labels, k its number of labels), with every neighbour of every layer (no sampling).

    Layer-wise full-graph inference: each layer runs once over all nodes and edges, which
    costs less than sampling the full neighbourhoods of the evaluated nodes. With several
    ranks every rank computes the same predictions (the lookups of a partitioned embedding
    are collective, so every rank must call this). Returns ``{split: accuracy}``.
    """
    model.eval()
    logits = model(data.graph, data.features)
    model.train()
    accuracy = {}
    if data.multi_label:
        for name in splits:
            ids = data.splits[name]
            accuracy[name] = prediction_f1(logits[ids].cpu(), data.labels[ids].cpu())[0]
        return accuracy
    predicted = logits.argmax(dim=1)
    for name in splits:
        ids = data.splits[name]
        accuracy[name] = (predicted[ids] == data.labels[ids]).float().mean().item()
    return accuracy


@torch.no_grad()
def test_f1(model: GraphSAGE, data: NodeData) -> dict[str, float]:
    """Micro- and Macro-F1 of the model on the test split."""
    model.eval()
    logits = model(data.graph, data.features)
    model.train()
    ids = data.splits["test"]
    micro, macro = prediction_f1(logits[ids].cpu(), data.labels[ids].cpu())
    return {"test_micro_f1": round(micro, 4), "test_macro_f1": round(macro, 4)}


def epoch_line(epoch: int, loss: float, accuracy: dict[str, float]) -> str:
    return (
        f"epoch {epoch:3d}  loss {loss:.4f}  val {accuracy['val']:.4f}  test {accuracy['test']:.4f}"
    )


def result_line(
    args: argparse.Namespace,
    data: NodeData,
    progress: Progress,
    started: float,
    **more: Any,
) -> str:
    """The parseable last line: ``RESULT {json}`` (``started``: the run's start,
    ``time.perf_counter()``)."""
    best, last, epoch_seconds = progress.best, progress.last, progress.epoch_seconds
    mean_epoch = sum(epoch_seconds) / len(epoch_seconds) if epoch_seconds else float("nan")
    return "RESULT " + json.dumps(
        {
            "dataset": args.dataset,
            "features": not args.no_features and args.dataset != "sbm",
            "emb_dim": args.emb_dim,
            "epochs": args.epochs,
            "seed": args.seed,
            "best_epoch": best.epoch,
            "val_acc": round(best.val, 4),
            "test_acc": round(best.test, 4),
            "final_val_acc": round(last.get("val", float("nan")), 4),
            "final_test_acc": round(last.get("test", float("nan")), 4),
            "chance": round(1.0 / data.num_classes, 4),
            "seconds": round(time.perf_counter() - started, 1),
            "epoch_seconds": round(mean_epoch, 3),
            "start_epoch": progress.first_epoch,
            "device": args.device,
            **more,
        }
    )


def describe(args: argparse.Namespace, data: NodeData, embedding: NodeEmbedding | None) -> str:
    inputs = [f"embedding({args.emb_dim})"] if embedding is not None else []
    inputs += [f"features({data.num_features})"] if data.num_features else []
    return (
        f"{args.dataset}: {data.graph.num_nodes} nodes, {data.graph.num_edges} edges, "
        f"{data.num_classes} classes, {len(data.splits['train'])} training nodes; input: "
        + " + ".join(inputs)
    )


# ---------------------------------------------------------------------------- training
def train_epochs(
    args: argparse.Namespace,
    model: torch.nn.Module,
    loader: SeedLoader,
    data: NodeData,
    dense_opt: torch.optim.Optimizer,
    sparse_opt: SparseAdam | None,
    embedding: NodeEmbedding | None,
    progress: Progress,
    evaluate_model: Callable[[], dict[str, float]],
    *,
    trained: torch.nn.Module | None = None,
    rank: int = 0,
    log_note: str = "",
) -> None:
    """Epochs ``progress.first_epoch`` to ``args.epochs``: train ``trained`` (``model``, or
    ``model`` wrapped in ``DistributedDataParallel``), ``evaluate_model()``, log and save the
    checkpoint (``--checkpoint``) after each, recording them in ``progress``.

    With several processes every rank calls this (steps, evaluation and checkpoints are
    collective); rank 0 alone shows the progress bar and logs, its lines ending in
    ``log_note``. When no epoch was left to train the model is evaluated once, for the
    last accuracies.
    """
    is_main = rank == 0
    trained = model if trained is None else trained
    first_epoch, best, epoch_seconds = progress.first_epoch, progress.best, progress.epoch_seconds
    last: dict[str, float] = {}
    epochs = tqdm(
        range(first_epoch, args.epochs + 1),
        desc="epochs",
        disable=args.no_progress or not is_main,
        initial=first_epoch - 1,
        total=args.epochs,
        file=sys.stderr,
    )
    for epoch in epochs:
        seed_epoch(args.seed, epoch, rank)
        loader.set_epoch(epoch)
        epoch_started = time.perf_counter()
        loss = train_epoch(trained, loader, data, dense_opt, sparse_opt)
        epoch_seconds.append(time.perf_counter() - epoch_started)
        last = evaluate_model()
        best.update(epoch, last)
        if is_main:
            epochs.set_postfix(loss=f"{loss:.3f}", val=f"{last['val']:.3f}")
            if epoch % args.log_every == 0 or epoch in (first_epoch, args.epochs):
                tqdm.write(epoch_line(epoch, loss, last) + log_note, file=sys.stdout)
        if args.checkpoint is not None:
            assert embedding is not None and sparse_opt is not None
            # Collective with several processes; the unwrapped model's state_dict has no
            # "module." prefix, so either example resumes the other's checkpoints.
            save_checkpoint(args.checkpoint, embedding, sparse_opt, model, dense_opt, epoch, best)
    epochs.close()
    if not last:  # nothing left to train (resumed at the end): still report the model
        last = evaluate_model()
    progress.last = last


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = build_parser((__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where the graph, sampling, embedding and layers live",
    )
    add_graph_file_arguments(parser)
    args = parser.parse_args(argv)
    if args.graph is not None:
        args.dataset = args.graph.name
        args.no_features = args.features is None
    elif args.labels is not None or args.features is not None:
        parser.error("--labels and --features go with --graph FILE")
    args = finish_arguments(parser, args)
    started = time.perf_counter()
    torch.set_num_threads(args.num_threads)
    device = torch.device(args.device)

    try:
        data = load_data(args, device)
    except (ValueError, OSError) as error:  # the user's files: a message, no traceback
        parser.error(str(error))
    embedding = make_embedding(args, data.graph.num_nodes, device=device)
    model = make_model(args, data, embedding)
    # Two optimizers: model.parameters() are the dense layers only; the embedding is not a
    # parameter, SparseAdam updates the rows that a step looked up.
    dense_opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sparse_opt = SparseAdam([embedding], lr=args.emb_lr) if embedding is not None else None

    progress = resume_from_checkpoint(args, embedding, sparse_opt, model, dense_opt)
    print(describe(args, data, embedding) + f"; device {device}", flush=True)

    loader = train_loader(data, args)
    evaluate_model = partial(evaluate, model, data)
    train_epochs(
        args, model, loader, data, dense_opt, sparse_opt, embedding, progress, evaluate_model
    )
    line = result_line(
        args,
        data,
        progress,
        started,
        **({} if args.graph is None else {"multi_label": data.multi_label, **test_f1(model, data)}),
    )
    print(line, flush=True)
    return json.loads(line[len("RESULT ") :])


if __name__ == "__main__":
    main()
