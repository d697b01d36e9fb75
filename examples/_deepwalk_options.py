"""The command line of ``examples/deepwalk.py``: options, their defaults and checks."""

from __future__ import annotations

import argparse
import inspect

import _launch as launch
import torch

from graphemb.evaluation import DEEPWALK_RATIOS
from graphemb.skipgram import SHARING, TORCH_LR, train_node_embeddings

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
def build_parser(description: str) -> argparse.ArgumentParser:
    """The example's command line, described by ``description``."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    add_graph_options(parser)
    add_model_options(parser)
    add_training_options(parser)
    add_output_options(parser)
    return parser


def add_graph_options(parser: argparse.ArgumentParser) -> None:
    """--dataset and the walks."""
    launch.add_dataset_arguments(parser, " (features unused)")

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


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The skip-gram: size, window, negatives, subsampling."""
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


def add_training_options(parser: argparse.ArgumentParser) -> None:
    """Epochs, batches, optimizer, learning rate, seed, threads."""
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


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """Evaluation, processes and checkpoints."""
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

    launch.add_checkpoint_arguments(parser, "tables and optimizer state", "")


def parse_args(argv: list[str] | None, description: str) -> argparse.Namespace:
    """The checked options, defaults filled in by ``--optimizer`` and ``--quick``."""
    parser = build_parser(description)
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
