"""``python -m graphemb score``: Micro/Macro-F1 of embeddings on node labels.

The DeepWalk protocol (:mod:`graphemb.evaluation`): one-vs-rest logistic regression
trained on a fraction of the labelled nodes, scored on the rest, averaged over random
splits; multi-label nodes get their ``k`` most probable labels.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..io import read_embeddings, read_labels
from .arguments import HelpFormatter, add_file_option, default_of, fractions, positive_int
from .preflight import check_input, file_format

__all__ = ["add_parsers", "run_score"]


def add_parsers(subparsers: Any) -> None:
    """Register the ``score`` subcommand."""
    from ..evaluation import DEEPWALK_RATIOS, DEEPWALK_REPEATS, node_classification_f1

    parser = subparsers.add_parser(
        "score",
        help="Micro/Macro-F1 of node embeddings on node labels",
        description=(
            "Train one-vs-rest logistic regression on the embeddings of a fraction of the "
            "labelled nodes and print Micro- and Macro-F1 on the others, at each fraction "
            "(the DeepWalk evaluation). Multi-label nodes get their k most probable labels, "
            "k being their number of labels."
        ),
        formatter_class=HelpFormatter,
    )
    add_file_option(
        parser, "--embeddings", "--format", kind="embedding", what="embeddings",
        function=read_embeddings,
    )  # fmt: skip
    add_file_option(
        parser, "--labels", "--labels-format", kind="label",
        what="labels, matched to the embeddings by node name (unlabelled nodes are not scored)",
        function=read_labels, otherwise=", else text",
    )  # fmt: skip
    parser.add_argument(
        "--ratios",
        type=fractions,
        default=DEEPWALK_RATIOS,
        metavar="R[,R...]",
        help="fractions of labelled nodes to train on, each in (0, 1) (default: "
        f"{','.join(map(str, DEEPWALK_RATIOS))}, the DeepWalk protocol's)",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=DEEPWALK_REPEATS,
        help="random splits per fraction (default: %(default)s, the DeepWalk protocol's)",
    )
    for name, options in (
        ("seed", {"type": int, "help": "seed of the splits"}),
        ("normalize", {"action": "store_true", "help": "scale every embedding to unit length"}),
    ):
        default = default_of(node_classification_f1, name)
        parser.add_argument(f"--{name}", default=default, **options)
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument(
        "--multi-label",
        dest="multi_label",
        action="store_const",
        const=True,
        default=default_of(read_labels, "multi_label"),
        help="treat the labels as multi-label (default: iff some node has several)",
    )
    kind.add_argument(
        "--single-label",
        dest="multi_label",
        action="store_const",
        const=False,
        help="require one label per node",
    )
    parser.set_defaults(run=run_score)


def run_score(args: argparse.Namespace) -> int:
    """Print the F1 table; returns the exit code."""
    from tqdm import tqdm

    from ..evaluation import format_f1_table, node_classification_f1

    check_input("--embeddings", args.embeddings)  # every check before any work
    check_input("--labels", args.labels)
    embedding_format = file_format("--embeddings", "embedding", args.embeddings, args.format)
    label_format = file_format("--labels", "label", args.labels, args.labels_format, default="text")
    embeddings, names = read_embeddings(args.embeddings, embedding_format.name)
    labels = read_labels(args.labels, names, label_format.name, multi_label=args.multi_label)
    nodes = labels.nodes
    kind = "multi-label" if labels.multi_label else "single-label"
    print(
        f"{len(names)} embeddings of dimension {embeddings.shape[1]}; {len(nodes)} labelled "
        f"nodes, {labels.num_classes} classes ({kind}); {args.repeats} splits per fraction"
    )
    scores = []
    for ratio in tqdm(args.ratios, desc="scoring", unit="fraction", leave=False):
        scores += node_classification_f1(
            embeddings,
            labels.values,
            (ratio,),
            repeats=args.repeats,
            seed=args.seed,
            nodes=nodes,
            normalize=args.normalize,
        )
    print(format_f1_table(scores))
    return 0
