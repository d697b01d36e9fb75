"""``python -m graphemb deepwalk`` and ``node2vec``: embeddings of a graph file.

Checks every file and flag (:mod:`.preflight`), reads a graph
(:func:`graphemb.io.read_graph`: any registered graph format, see
:mod:`graphemb.io.formats`), trains :func:`graphemb.skipgram.train_node_embeddings` and
writes the rows (:func:`graphemb.io.write_embeddings`): ``.emb`` in word2vec's text format
with the original node names, ``.npy`` in node-id order. The flags are the reference
node2vec implementation's, then graphemb's own (:mod:`.embed_arguments`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ..io import read_graph, write_embeddings
from ..skipgram import CompiledOptions, train_node_embeddings
from .arguments import HelpFormatter, paragraphs
from .embed_arguments import EPILOG, add_embed_arguments, skipgram_changes
from .preflight import check_embed_run

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
            usage="%(prog)s --input FILE --output FILE [options]",
            description=paragraphs(
                f"""{summary}. Trains word2vec's skip-gram with negative sampling (dynamic
                window, degree**0.75 noise, frequent-node subsampling, SGD with a linearly
                decaying learning rate) and writes one embedding per node."""
            ),
            epilog=EPILOG,
            formatter_class=HelpFormatter,
        )
        add_embed_arguments(parser, node2vec=command == "node2vec")
        parser.set_defaults(run=run_embed, walk=command)


def run_embed(args: argparse.Namespace) -> int:
    """Check, read ``--input``, train, write ``--output``; returns the exit code."""
    plan = check_embed_run(args)  # before any work
    start = time.perf_counter()
    loaded = read_graph(args.input, plan.graph_format, directed=args.directed, **plan.read_options)
    if args.weighted and loaded.graph.edge_weight is None:
        raise ValueError(
            f"--weighted: {args.input} has no edge weights (an edge list needs a third column)"
        )
    if not args.quiet:
        for note in loaded.notes:
            print(note, file=sys.stderr)
        print(
            f"{args.input}: {loaded.num_nodes} nodes, {loaded.num_edges} directed edges "
            f"({time.perf_counter() - start:.1f} s); training on {plan.workers} "
            f"worker{'s' if plan.workers > 1 else ''}",
            file=sys.stderr,
        )
    # A diverged run raises TrainingDiverged (a ValueError) before anything is written:
    # graphemb.cli.main prints it and exits with 2.
    rows = train_node_embeddings(
        loaded.graph,
        **skipgram_changes(args),
        weighted=bool(args.weighted),
        backend=args.backend,
        workers=plan.workers,
        compiled_options=CompiledOptions(
            sharing="position" if args.shared_negatives else "pair",
            noise_reuse=args.noise_reuse,
            output_dtype=args.output_table,
        ),
        progress=not args.quiet,
    )
    write_embeddings(args.output, rows, loaded.node_names, plan.output_format)
    if not args.quiet:
        print(
            f"wrote {args.output}: {rows.shape[0]} x {rows.shape[1]} "
            f"({time.perf_counter() - start:.1f} s in all)",
            file=sys.stderr,
        )
    return 0
