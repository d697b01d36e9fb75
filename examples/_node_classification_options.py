"""Command-line options of ``examples/node_classification.py`` (and of
``examples/multi_gpu_graphsage.py``, which adds its process options): the parser, the
checks argparse cannot make, and the defaults that depend on other options."""

from __future__ import annotations

import argparse
from pathlib import Path

import _launch as launch  # examples/_launch.py (on the path: the examples' folder)
import torch

DEFAULT_EPOCHS = 40
EMB_LR_ALONE = 0.01
EMB_LR_WITH_FEATURES = 1e-4
# Beside 1433 features the 140 training nodes of Cora are fitted within a few epochs: more
# dropout regularises (measured, mean of 3 seeds: 0.800 at 0.5, 0.816 at 0.7).
DROPOUT_ALONE = 0.5
DROPOUT_WITH_FEATURES = 0.7
# Short mode for CI: few epochs, a few seconds of training.
QUICK_EPOCHS = 10


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except the None and False of options whose help explains them."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False:
            return action.help or ""
        return super()._get_help_string(action)


def build_parser(description: str) -> argparse.ArgumentParser:
    """Options shared by both examples; ``description``: the example's, for ``--help``."""
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=_HelpFormatter,
    )
    data = launch.add_dataset_arguments(parser)
    data.add_argument(
        "--no-features",
        action="store_true",
        help="learn from the embeddings alone (sbm has no features anyway)",
    )
    _add_model_arguments(parser)
    _add_training_arguments(parser)
    launch.add_checkpoint_arguments(
        parser,
        "embedding, optimizers and model",
        " (model, optimizers, epoch, best accuracy)",
    )
    return parser


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``model`` group: embedding size, layers, dropout."""
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


def _add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``training`` group: epochs, batches, learning rates, seed, threads, logging."""
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
