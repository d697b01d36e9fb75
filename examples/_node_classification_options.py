"""Command-line options of ``examples/node_classification.py`` (and of
``examples/multi_gpu_graphsage.py``, which adds its process options): the parser, the
checks argparse cannot make, and the defaults that depend on other options."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    _add_switches(
        data, [("--no-features", "learn from the embeddings alone (sbm has no features anyway)")]
    )
    _add_model_arguments(parser)
    _add_training_arguments(parser)
    launch.add_checkpoint_arguments(
        parser,
        "embedding, optimizers and model",
        " (model, optimizers, epoch, best accuracy)",
    )
    return parser


# An option that takes a value: (flag, type, default, help).
Valued = tuple[str, Callable[[str], Any] | None, Any, str]


def _add_valued(group: argparse._ArgumentGroup, options: list[Valued]) -> None:
    """Add each ``(flag, type, default, help)`` of ``options`` to ``group``."""
    for flag, kind, default, explained in options:
        group.add_argument(flag, type=kind, default=default, help=explained)


def _add_switches(group: argparse._ArgumentGroup, switches: list[tuple[str, str]]) -> None:
    """Add each ``(flag, help)`` of ``switches`` to ``group``: off unless given."""
    for flag, explained in switches:
        group.add_argument(flag, action="store_true", help=explained)


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``model`` group: embedding size, layers, dropout."""
    _add_valued(parser.add_argument_group("model"), [
        ("--emb-dim", int, 32, "embedding size (0: no embedding, features only, for comparison)"),
        ("--hidden", int, 64, "hidden layer size"),
        ("--fanouts", None, "10,10", "neighbours sampled per layer, comma-separated (one per "
         "layer, -1: all)"),
        ("--dropout", float, None, f"dropout of every layer's input (default: {DROPOUT_ALONE} "
         f"for embeddings alone, {DROPOUT_WITH_FEATURES} with features)"),
    ])  # fmt: skip


def _add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``training`` group: epochs, batches, learning rates, seed, threads, logging."""
    train = parser.add_argument_group("training")
    _add_valued(train, [
        ("--epochs", int, None, f"training epochs (default: {DEFAULT_EPOCHS}, {QUICK_EPOCHS} "
         "with --quick)"),
        ("--batch-size", int, 32, "training nodes per step (the global batch with several "
         "processes)"),
        ("--lr", float, 0.01, "Adam learning rate, dense layers"),
        ("--weight-decay", float, 5e-4, "Adam weight decay, dense layers"),
        ("--emb-lr", float, None, f"SparseAdam learning rate, embedding (default: {EMB_LR_ALONE} "
         f"for embeddings alone, {EMB_LR_WITH_FEATURES} beside features, which carry most of "
         "the signal: a fast embedding would memorise the few training nodes)"),
        ("--seed", int, 0, "seeds the model, shuffling, sampling, dropout (and the sbm graph)"),
        ("--num-threads", int, 1, "CPU threads per process; Cora's batches are too small for "
         "more to pay off, and idle threads spinning against other processes made a run 10x "
         "slower on a busy 2-core machine"),
        ("--log-every", int, 10, "print a line every N epochs"),
    ])  # fmt: skip
    _add_switches(train, [
        ("--no-progress", "no tqdm progress bar"),
        ("--quick", f"short run for CI: {QUICK_EPOCHS} epochs unless --epochs is given, a line "
         "per epoch"),
    ])  # fmt: skip


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
    _add_file_option(
        files, "--graph",
        "graph file: edge list ('source target [weight]' lines; .txt .csv .edgelist ...), "
        "adjacency list (.adjlist), MATLAB .mat (network, and group as labels), scipy .npz",
    )  # fmt: skip
    files.add_argument(
        "--graph-format",
        choices=sorted(set(GRAPH_FORMATS.values())),
        default=None,
        help="format of --graph (default: from its suffix)",
    )
    _add_switches(files, [
        ("--directed", "the edges of --graph are directed (default: undirected, stored both "
         "ways)"),
    ])  # fmt: skip
    _add_file_option(
        files, "--labels",
        "node labels: 'node label [label ...]' lines or 'node,label' rows (.csv); nodes with "
        "several labels make it multi-label (BCE loss, F1 of the k best labels). Default "
        "with a .mat: its group",
    )  # fmt: skip
    _add_file_option(
        files, "--features",
        "node features: .npy (row r: the node named r) or text ('N F', then 'node f1 ... fF' "
        "lines); default: the embeddings alone",
    )  # fmt: skip
    files.add_argument(
        "--split",
        default="0.5,0.25",
        metavar="TRAIN,VAL",
        help="fractions of the labelled nodes for training and validation; the rest: test",
    )


def _add_file_option(group: argparse._ArgumentGroup, flag: str, explained: str) -> None:
    """An optional file (a path; none by default)."""
    group.add_argument(flag, type=Path, default=None, metavar="FILE", help=explained)
