"""``python -m graphemb deepwalk`` and ``node2vec``: embeddings of a graph file.

Reads a graph (:func:`graphemb.io.read_graph`: any registered graph format, see
:mod:`graphemb.io.formats`), trains :func:`graphemb.skipgram.train_node_embeddings` and
writes the rows (:func:`graphemb.io.write_embeddings`): ``.emb`` in word2vec's text format
with the original node names, ``.npy`` in node-id order. The flag names are the reference
node2vec implementation's; every default is read from the signature of the library
function the option feeds (only ``--quiet``, the command line's own output, is its own).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ..io import read_graph, write_embeddings
from ..skipgram import TRAINER_SHARING, TRAINERS, check_duplicates, train_node_embeddings
from .arguments import HelpFormatter, add_file_option, default_of, positive_float, positive_int

__all__ = ["add_parsers", "run_embed"]


def add_parsers(subparsers: Any) -> None:
    """Register the ``deepwalk`` and ``node2vec`` subcommands."""
    for command, summary in (
        ("deepwalk", "DeepWalk: skip-gram on uniform random walks"),
        ("node2vec", "node2vec: skip-gram on biased second-order random walks (--p, --q)"),
    ):
        parser = subparsers.add_parser(
            command,
            help=summary,
            description=(
                f"{summary}. Trains word2vec's skip-gram with negative sampling (dynamic "
                "window, degree**0.75 noise, frequent-node subsampling, one pass of SGD with "
                "a linearly decaying learning rate) and writes one embedding per node."
            ),
            formatter_class=HelpFormatter,
        )
        _add_arguments(parser, node2vec=command == "node2vec")
        parser.set_defaults(run=run_embed, walk=command)


def _trainer_default(name: str) -> Any:
    """The default of :func:`train_node_embeddings`' argument ``name``: the command line
    has no defaults of its own to drift from the library's."""
    return default_of(train_node_embeddings, name)


def _duplicates_rule(text: str) -> str:
    """``--duplicates``: a rule :func:`check_duplicates` accepts (else a usage error)."""
    try:
        check_duplicates(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _add_arguments(parser: argparse.ArgumentParser, *, node2vec: bool) -> None:
    files = parser.add_argument_group("files")
    add_file_option(
        files, "--input", "--format", kind="graph", what="graph file", function=read_graph
    )
    add_file_option(
        files,
        "--output",
        "--output-format",
        kind="embedding",
        what="embeddings, with the input's node names",
        function=write_embeddings,
    )
    files.add_argument(
        "--directed",
        action="store_true",
        default=default_of(read_graph, "directed"),
        help="edges are directed (walks follow them)",
    )
    _add_walk_arguments(parser.add_argument_group("walks"), node2vec=node2vec)
    _add_model_arguments(parser.add_argument_group("skip-gram"))
    run = parser.add_argument_group("run")
    run.add_argument(
        "--workers",
        type=positive_int,
        default=_trainer_default("workers"),
        help="compiled trainer: threads updating the tables without locks; torch trainer: "
        "processes on tables in shared memory (each starts in seconds)",
    )
    run.add_argument(
        "--seed",
        type=int,
        default=_trainer_default("seed"),
        help="seed of walks and initialisation",
    )
    # The command line's own switch: its summary lines have no library counterpart.
    run.add_argument("--quiet", action="store_true", help="no progress bar or summary on stderr")


def _add_positive_ints(
    group: argparse._ArgumentGroup, rows: tuple[tuple[str, str, str], ...]
) -> None:
    """Options ``(flag, parameter of train_node_embeddings, help)`` taking integers >= 1."""
    for flag, name, explained in rows:
        group.add_argument(flag, type=positive_int, default=_trainer_default(name), help=explained)


def _add_walk_arguments(walks: argparse._ArgumentGroup, *, node2vec: bool) -> None:
    _add_positive_ints(
        walks,
        (
            ("--num-walks", "num_walks", "walks per node"),
            ("--walk-length", "walk_length", "nodes per walk"),
        ),
    )
    if node2vec:
        for flag, explained in (("p", "return parameter"), ("q", "in-out parameter")):
            walks.add_argument(
                f"--{flag}", type=positive_float, default=_trainer_default(flag), help=explained
            )
    walks.add_argument(
        "--weighted",
        action="store_true",
        default=_trainer_default("weighted"),
        help="steps in proportion to the edge weights (edge list's third column, .mat/.npz "
        "matrix values); an edge list without weights is refused",
    )


def _add_model_arguments(model: argparse._ArgumentGroup) -> None:
    _add_positive_ints(
        model,
        (
            ("--dimensions", "dimensions", "embedding size"),
            ("--window-size", "window", "largest context distance"),
            ("--negatives", "negatives", "negative samples per (node, context)"),
            ("--epochs", "epochs", "passes, each over fresh walks"),
        ),
    )
    model.add_argument(
        "--sample",
        type=float,
        default=_trainer_default("sample"),
        help="subsampling threshold of frequent nodes (0: off), as word2vec's -sample",
    )
    model.add_argument(
        "--lr",
        type=positive_float,
        default=_trainer_default("lr"),
        help="initial learning rate (default: word2vec's 0.025 for the compiled trainer, "
        "0.035 for the torch trainer's batched steps)",
    )
    model.add_argument(
        "--trainer",
        choices=TRAINERS,
        default=_trainer_default("trainer"),
        help="'compiled' = word2vec's algorithm in C++ threads (--workers of them); 'torch' "
        "= batched torch steps (CUDA, or without the compiled module); 'auto' = compiled "
        "where it can run",
    )
    model.add_argument(
        "--sharing",
        choices=TRAINER_SHARING,
        default=_trainer_default("sharing"),
        help="torch trainer's negatives: 'batch' = blocks drawn per step, each center scored "
        "against another walk's block, weighted to word2vec's expected loss; 'walk' = each "
        "walk's own block; 'position' = K per node shared by its pairs (worse embeddings)",
    )
    model.add_argument(
        "--duplicates",
        type=_duplicates_rule,
        default=_trainer_default("duplicates"),
        metavar="RULE",
        help="torch trainer: how a node repeated within a step moves: 'sum', 'mean', 'sqrt' "
        "or 'cap:C' (the sum, at most C times the mean)",
    )


def run_embed(args: argparse.Namespace) -> int:
    """Read ``--input``, train, write ``--output``; returns the exit code."""
    from ..io.embeddings import embedding_format

    embedding_format(args.output, args.output_format)  # a bad suffix fails before training
    start = time.perf_counter()
    loaded = read_graph(args.input, args.format, directed=args.directed)
    if args.weighted and loaded.graph.edge_weight is None:
        raise ValueError(
            f"--weighted: {args.input} has no edge weights (an edge list needs a third "
            "column; a .mat/.npz matrix whose values are all 1 is unweighted)"
        )
    if not args.quiet:
        print(
            f"{args.input}: {loaded.num_nodes} nodes, {loaded.num_edges} directed edges "
            f"({time.perf_counter() - start:.1f} s)",
            file=sys.stderr,
        )
    # A diverged run raises TrainingDiverged (a ValueError) before anything is written:
    # graphemb.cli.main prints it and exits with 2.
    rows = train_node_embeddings(
        loaded.graph,
        dimensions=args.dimensions,
        walk_length=args.walk_length,
        num_walks=args.num_walks,
        window=args.window_size,
        # deepwalk has no --p/--q: the library's defaults
        **{name: getattr(args, name) for name in ("p", "q") if hasattr(args, name)},
        weighted=args.weighted,
        negatives=args.negatives,
        epochs=args.epochs,
        sample=args.sample,
        lr=args.lr,
        trainer=args.trainer,
        sharing=args.sharing,
        duplicates=args.duplicates,
        workers=args.workers,
        seed=args.seed,
        progress=not args.quiet,
    )
    write_embeddings(args.output, rows, loaded.node_names, args.output_format)
    if not args.quiet:
        print(
            f"wrote {args.output}: {rows.shape[0]} x {rows.shape[1]} "
            f"({time.perf_counter() - start:.1f} s in all)",
            file=sys.stderr,
        )
    return 0
