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
training on several processes and reuses this file's helpers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

import graphemb
from graphemb import NodeEmbedding
from graphemb.datasets import load_planetoid, stochastic_block_model
from graphemb.evaluation import prediction_f1
from graphemb.graph import Graph
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
import _launch as launch  # noqa: E402  (examples/_launch.py, shared with the other examples)

DEFAULT_EPOCHS = 40
EMB_LR_ALONE = 0.01
EMB_LR_WITH_FEATURES = 1e-4
# Beside 1433 features the 140 training nodes of Cora are fitted within a few epochs: more
# dropout regularises (measured, mean of 3 seeds: 0.800 at 0.5, 0.816 at 0.7).
DROPOUT_ALONE = 0.5
DROPOUT_WITH_FEATURES = 0.7
# Short mode for CI: few epochs, a few seconds of training.
QUICK_EPOCHS = 10


# ---------------------------------------------------------------------------- arguments
class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except the None and False of options whose help explains them."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False:
            return action.help or ""
        return super()._get_help_string(action)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """Options shared by both examples."""
    parser = argparse.ArgumentParser(
        description=description or (__doc__ or "").split("\n\n")[0],
        formatter_class=_HelpFormatter,
    )
    data = launch.add_dataset_arguments(parser)
    data.add_argument(
        "--no-features",
        action="store_true",
        help="learn from the embeddings alone (sbm has no features anyway)",
    )

    model = parser.add_argument_group("model")
    model.add_argument(
        "--emb-dim",
        type=int,
        default=32,
        help="embedding size (0: no embedding, features only, for comparison)",
    )
    model.add_argument("--hidden", type=int, default=64, help="hidden layer size")
    model.add_argument(
        "--fanouts",
        default="10,10",
        help="neighbours sampled per layer, comma-separated (one per layer, -1: all)",
    )
    model.add_argument(
        "--dropout",
        type=float,
        default=None,
        help=f"dropout of every layer's input (default: {DROPOUT_ALONE} for embeddings alone, "
        f"{DROPOUT_WITH_FEATURES} with features)",
    )

    train = parser.add_argument_group("training")
    train.add_argument(
        "--epochs",
        type=int,
        default=None,
        help=f"training epochs (default: {DEFAULT_EPOCHS}, {QUICK_EPOCHS} with --quick)",
    )
    train.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="training nodes per step (the global batch with several processes)",
    )
    train.add_argument("--lr", type=float, default=0.01, help="Adam learning rate, dense layers")
    train.add_argument(
        "--weight-decay", type=float, default=5e-4, help="Adam weight decay, dense layers"
    )
    train.add_argument(
        "--emb-lr",
        type=float,
        default=None,
        help=f"SparseAdam learning rate, embedding (default: {EMB_LR_ALONE} for embeddings "
        f"alone, {EMB_LR_WITH_FEATURES} beside features, which carry most of the signal: a "
        "fast embedding would memorise the few training nodes)",
    )
    train.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seeds the model, shuffling, sampling, dropout (and the sbm graph)",
    )
    train.add_argument(
        "--num-threads",
        type=int,
        default=1,
        help="CPU threads per process; Cora's batches are too small for more to pay off, and "
        "idle threads spinning against other processes made a run 10x slower on a busy "
        "2-core machine",
    )
    train.add_argument("--log-every", type=int, default=10, help="print a line every N epochs")
    train.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    train.add_argument(
        "--quick",
        action="store_true",
        help=f"short run for CI: {QUICK_EPOCHS} epochs unless --epochs is given, a line per epoch",
    )

    launch.add_checkpoint_arguments(
        parser,
        "embedding, optimizers and model",
        " (model, optimizers, epoch, best accuracy)",
    )
    return parser


def finish_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.Namespace:
    """Apply ``--quick`` and check what argparse cannot."""
    alone = args.no_features or args.dataset == "sbm"
    if args.emb_lr is None:
        args.emb_lr = EMB_LR_ALONE if alone else EMB_LR_WITH_FEATURES
    if args.dropout is None:
        args.dropout = DROPOUT_ALONE if alone else DROPOUT_WITH_FEATURES
    if not 0 <= args.dropout < 1:
        parser.error(f"--dropout must lie in [0, 1), got {args.dropout}")
    if args.epochs is None:
        args.epochs = QUICK_EPOCHS if args.quick else DEFAULT_EPOCHS
    if args.quick:
        args.log_every = 1
    try:
        args.fanouts = [int(f) for f in args.fanouts.split(",")]
    except ValueError:
        parser.error(f"--fanouts must be comma-separated integers, got {args.fanouts!r}")
    if not args.fanouts or not all(f >= 1 or f == -1 for f in args.fanouts):
        parser.error("--fanouts needs positive integers (or -1 for all neighbours)")
    launch.check_resume(parser, args)
    if args.epochs < 0:
        parser.error("--epochs must be >= 0")
    if args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    if args.emb_dim < 0:
        parser.error("--emb-dim must be >= 0")
    if args.emb_dim == 0 and (args.no_features or args.dataset == "sbm"):
        parser.error("--emb-dim 0 needs features: the model would have no input")
    if args.emb_dim == 0 and args.checkpoint is not None:
        parser.error("--checkpoint saves the embedding: it needs --emb-dim > 0")
    if getattr(args, "device", "cpu") == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible")
    return args


# ---------------------------------------------------------------------------- data and model
@dataclass
class NodeData:
    """A graph with what the training reads beside it, all on one device."""

    graph: Graph
    features: torch.Tensor | None  # float32 (N, F); None: no features
    labels: torch.Tensor  # int64 (N,), or (N, C) 0/1 for multi-label data
    splits: dict[str, torch.Tensor]  # "train", "val", "test": int64 node ids
    num_classes: int

    @property
    def multi_label(self) -> bool:
        return self.labels.dim() == 2

    @property
    def num_features(self) -> int:
        return 0 if self.features is None else int(self.features.shape[1])

    def to(self, device: torch.device) -> NodeData:
        return NodeData(
            self.graph.to(device),
            None if self.features is None else self.features.to(device),
            self.labels.to(device),
            {name: ids.to(device) for name, ids in self.splits.items()},
            self.num_classes,
        )


def load_data(args: argparse.Namespace, device: torch.device) -> NodeData:
    """The dataset of ``args`` as a :class:`NodeData` on ``device``."""
    if getattr(args, "graph", None) is not None:
        return load_graph_file(args).to(device)
    if args.dataset == "sbm":
        dataset: Any = stochastic_block_model(
            args.sbm_nodes, num_communities=args.sbm_communities, seed=args.seed
        )
        features = None
    else:
        dataset = load_planetoid(args.dataset)
        features = None if args.no_features else dataset.row_normalized_features()
    data = NodeData(
        Graph.from_dataset(dataset),
        features,
        dataset.labels,
        {"train": dataset.train_idx, "val": dataset.val_idx, "test": dataset.test_idx},
        dataset.num_classes,
    )
    return data.to(device)


def add_graph_file_arguments(parser: argparse.ArgumentParser) -> None:
    """``--graph``, ``--labels``, ``--features`` and their options."""
    from graphemb.io import GRAPH_FORMATS

    files = parser.add_argument_group("your own graph (instead of --dataset)")
    files.add_argument(
        "--graph",
        type=Path,
        default=None,
        metavar="FILE",
        help="graph file: edge list ('source target [weight]' lines; .txt .csv .edgelist ...), "
        "adjacency list (.adjlist), MATLAB .mat (network, and group as labels), scipy .npz",
    )
    files.add_argument(
        "--graph-format",
        choices=sorted(set(GRAPH_FORMATS.values())),
        default=None,
        help="format of --graph (default: from its suffix)",
    )
    files.add_argument(
        "--directed",
        action="store_true",
        help="the edges of --graph are directed (default: undirected, stored both ways)",
    )
    files.add_argument(
        "--labels",
        type=Path,
        default=None,
        metavar="FILE",
        help="node labels: 'node label [label ...]' lines or 'node,label' rows (.csv); nodes "
        "with several labels make it multi-label (BCE loss, F1 of the k best labels). "
        "Default with a .mat: its group",
    )
    files.add_argument(
        "--features",
        type=Path,
        default=None,
        metavar="FILE",
        help="node features: .npy (row r: the node named r) or text ('N F', then "
        "'node f1 ... fF' lines); default: the embeddings alone",
    )
    files.add_argument(
        "--split",
        default="0.5,0.25",
        metavar="TRAIN,VAL",
        help="fractions of the labelled nodes for training and validation; the rest: test",
    )


def load_graph_file(args: argparse.Namespace) -> NodeData:
    """``--graph`` with its labels, features and a random split of the labelled nodes.

    Raises ValueError (or OSError) with the file, line and problem for bad input.
    """
    from graphemb.io import read_graph, read_labels, read_node_features

    loaded = read_graph(args.graph, args.graph_format, directed=args.directed)
    if args.labels is not None:
        labels = read_labels(args.labels, loaded.node_names)
    elif loaded.labels is not None:
        labels = loaded.labels
    else:
        raise ValueError(f"{args.graph} carries no labels: give them with --labels FILE")
    features = None
    if args.features is not None:
        features = read_node_features(args.features, loaded.node_names)
    fractions = [float(f) for f in args.split.split(",")]
    if len(fractions) != 2 or min(fractions) <= 0 or sum(fractions) >= 1:
        raise ValueError(f"--split needs two positive fractions summing to < 1, got {args.split}")
    labelled = labels.nodes
    order = labelled[
        torch.randperm(len(labelled), generator=torch.Generator().manual_seed(args.seed))
    ]
    num_train = int(round(fractions[0] * len(order)))
    num_val = int(round(fractions[1] * len(order)))
    splits = {
        "train": order[:num_train],
        "val": order[num_train : num_train + num_val],
        "test": order[num_train + num_val :],
    }
    empty = [name for name, ids in splits.items() if not len(ids)]
    if empty:
        raise ValueError(
            f"--split {args.split} of {len(order)} labelled nodes leaves no {empty[0]} node"
        )
    return NodeData(loaded.graph, features, labels.values, splits, labels.num_classes)


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


class Best:
    """Test accuracy at the epoch of best validation accuracy."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        state = state or {}
        self.epoch = int(state.get("epoch", 0))
        self.val = float(state.get("val", -1.0))
        self.test = float(state.get("test", 0.0))

    def update(self, epoch: int, accuracy: dict[str, float]) -> None:
        if accuracy["val"] > self.val:
            self.epoch, self.val, self.test = epoch, accuracy["val"], accuracy["test"]

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "val": self.val, "test": self.test}


@dataclass
class Progress:
    """Where a run stands: its first epoch (later than 1 when resumed), the best epoch so
    far, the last epoch's accuracies and the seconds of each epoch trained in this run."""

    first_epoch: int = 1
    best: Best = field(default_factory=Best)
    last: dict[str, float] = field(default_factory=dict)
    epoch_seconds: list[float] = field(default_factory=list)


# ---------------------------------------------------------------------------- checkpoints
def save_checkpoint(
    path: Path,
    embedding: NodeEmbedding,
    sparse_opt: SparseAdam,
    model: torch.nn.Module,
    dense_opt: torch.optim.Optimizer,
    epoch: int,
    best: Best,
) -> None:
    """Everything needed to resume after ``epoch``; collective with a process group."""
    if embedding.rank == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
    # CPU copies: a checkpoint written on a GPU loads anywhere.
    extra = {
        "epoch": epoch,
        "model": {key: value.cpu() for key, value in model.state_dict().items()},
        "dense_optimizer": _to_cpu(dense_opt.state_dict()),
        "best": best.state(),
    }
    graphemb.save(path, [embedding], sparse_opt, extra=extra)


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_cpu(item) for item in value]
    return value


def load_checkpoint(
    path: Path,
    embedding: NodeEmbedding,
    sparse_opt: SparseAdam,
    model: torch.nn.Module,
    dense_opt: torch.optim.Optimizer,
) -> tuple[int, Best]:
    """Restore a checkpoint; returns the last finished epoch and the best accuracy so far."""
    extra = graphemb.load(path, [embedding], sparse_opt)["extra"]
    model.load_state_dict(extra["model"])  # copied onto the model's device
    dense_opt.load_state_dict(extra["dense_optimizer"])  # state moved to its parameters'
    return int(extra["epoch"]), Best(extra["best"])


def resumed_line(path: Path, done: int, best: Best) -> str:
    """What a resumed run prints first."""
    return f"RESUMED from {path} after epoch {done} (best val {best.val:.4f} at epoch {best.epoch})"


def resume_from_checkpoint(
    args: argparse.Namespace,
    embedding: NodeEmbedding | None,
    sparse_opt: SparseAdam | None,
    model: torch.nn.Module,
    dense_opt: torch.optim.Optimizer,
    show: bool = True,
) -> Progress:
    """The run's start: restored from ``args.checkpoint`` with ``--resume`` (and the
    :func:`resumed_line` printed when ``show``), else epoch 1 and no best yet."""
    if not args.resume:
        return Progress()
    assert embedding is not None and sparse_opt is not None  # finish_arguments checked
    done, best = load_checkpoint(args.checkpoint, embedding, sparse_opt, model, dense_opt)
    if show:
        print(resumed_line(args.checkpoint, done, best), flush=True)
    return Progress(done + 1, best)


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
    parser = build_parser()
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
