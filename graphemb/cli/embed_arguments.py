"""The flags of ``python -m graphemb deepwalk`` and ``node2vec``, in ``--help``'s groups.

The first group is the reference node2vec implementation's command line
(aditya-grover/node2vec ``main.py``), with its flag names, meanings and order: ``--input
--output --dimensions --walk-length --num-walks --window-size --iter --workers --p --q
--weighted/--unweighted --directed/--undirected``. Then how the graph file is read
(PecanPy's ``--delimiter`` and ``--implicit_ids`` among them), how the embeddings are
written, and graphemb's own training options. Every default is the library's (the reader's
signature, :class:`~graphemb.skipgram.SkipGramOptions`), except ``--workers`` (this
machine's cores, as the reference tools run on all of them).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..io import read_graph, write_embeddings
from ..io.edge_list import read_edge_list
from ..skipgram import Backend, CompiledOptions, SkipGramOptions
from ..skipgram.options import FRESH_NOISE_TABLE_BYTES, LARGE_TABLE_NOISE_REUSE, OUTPUT_DTYPES
from .arguments import (
    add_file_option,
    available_cores,
    default_of,
    delimiter,
    int_at_least,
    nonnegative_float,
    paragraphs,
    positive_float,
    positive_int,
)

__all__ = ["EPILOG", "SkipGramFlag", "add_embed_arguments", "skipgram_changes"]

#: How a graph file is read, and the exit codes: the end of ``--help``.
EPILOG = paragraphs(
    """Edge lists: one edge per line, 'source target [weight]', separated by whitespace, or
    by commas in a .csv file or a file whose first line is comma-separated (--delimiter
    sets it). '#' starts a comment anywhere, '%' at the start of a line (Matrix Market,
    KONECT). Node names are any tokens; integer names keep their values, others are
    numbered in order of appearance.""",
    """Header: a first line that does not parse as an edge while the next line does is read
    as a header and skipped, and a note says so (e.g. 'source target' above '1 2', 'a b
    weight' above 'a b 0.5', or column names such as 'from to' whose names appear nowhere
    else). Otherwise the first line is an edge. --header skips the first line always,
    --no-header never.""",
    """Duplicate edges and self loops: a line repeated (or 'a b' and 'b a' in an undirected
    graph) is a parallel edge, which walks take as often as it is listed; a self loop
    'a a' is an edge on which a walk stays at 'a' (a note counts them). --merge-duplicates
    keeps one edge per pair of nodes with the sum of their weights; --drop-self-loops
    drops self loops.""",
    """Weights: unweighted by default, as the reference node2vec: a third column is then
    ignored, not read. --weighted makes each step follow an edge in proportion to its
    weight; NaN, infinite and negative weights are refused, as is a file whose weights
    are all 0.""",
    """Every file and flag is checked before the graph is read. Exit codes: 0 done; 2 a
    bad file or flag (one line naming the file and line, or the flag; nothing written);
    1 a missing optional package; 130 interrupted (Ctrl-C; nothing written).""",
)


@dataclass(frozen=True)
class SkipGramFlag:
    """A flag that sets a field of :class:`~graphemb.skipgram.SkipGramOptions`, whose
    default is the field's.

    Attributes
    ----------
    flag : str
        As typed (``"--window-size"``); the parsed value is under its name (``window_size``).
    option : str
        The field it sets (``"window"``).
    type : callable
        The argparse type that checks the value.
    metavar, help : str
        For ``--help``.
    """

    flag: str
    option: str
    type: Callable[[str], Any]
    metavar: str
    help: str

    @property
    def dest(self) -> str:
        """Where argparse puts the value: the flag's name with ``_`` for ``-``."""
        return self.flag.lstrip("-").replace("-", "_")

    def add_to(self, group: argparse._ActionsContainer) -> None:
        """Add the flag to ``group``."""
        default = getattr(SkipGramOptions(), self.option)
        group.add_argument(
            self.flag, type=self.type, default=default, metavar=self.metavar, help=self.help
        )


#: The reference node2vec's skip-gram flags, in its order.
REFERENCE_FLAGS = (
    SkipGramFlag("--dimensions", "dimensions", positive_int, "D", "embedding size"),
    SkipGramFlag(
        "--walk-length", "walk_length",
        int_at_least(2, "a walk of one node has no context to train on"), "L",
        "nodes per walk, at least 2",
    ),
    SkipGramFlag("--num-walks", "num_walks", positive_int, "R", "walks started from each node"),
    SkipGramFlag("--window-size", "window", positive_int, "K", "largest context distance"),
    SkipGramFlag(
        "--iter", "passes", positive_int, "N",
        "passes of SGD over the same walks (gensim's epochs; --epochs draws fresh walks "
        "instead)",
    ),
)  # fmt: skip
#: node2vec's walk parameters (not deepwalk's).
NODE2VEC_FLAGS = (
    SkipGramFlag("--p", "p", positive_float, "P", "return parameter"),
    SkipGramFlag("--q", "q", positive_float, "Q", "in-out parameter"),
)
#: graphemb's own skip-gram flags.
TRAINING_FLAGS = (
    SkipGramFlag(
        "--negatives", "negatives", positive_int, "N", "negative samples per (node, context)"
    ),
    SkipGramFlag(
        "--epochs", "epochs", positive_int, "N",
        "rounds of walks, each drawing --num-walks fresh walks per node (not --iter, which "
        "repeats SGD over the same walks)",
    ),
    SkipGramFlag(
        "--sample", "sample", nonnegative_float, "T",
        "subsampling threshold of frequent nodes (0: off), as word2vec's -sample",
    ),
    SkipGramFlag(
        "--lr", "lr", positive_float, "RATE",
        "initial learning rate, falling linearly to 1/250 of it (word2vec's alpha)",
    ),
)  # fmt: skip
SEED_FLAG = SkipGramFlag(
    "--seed", "seed", int_at_least(0), "S",
    "seed of walks and initialisation (the result depends only on it with --workers 1)",
)  # fmt: skip


def skipgram_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~graphemb.skipgram.SkipGramOptions` fields that the parsed ``args`` set
    (``--p``/``--q`` where the command has them), by field name."""
    flags = (*REFERENCE_FLAGS, *NODE2VEC_FLAGS, *TRAINING_FLAGS, SEED_FLAG)
    return {flag.option: getattr(args, flag.dest) for flag in flags if hasattr(args, flag.dest)}


def add_embed_arguments(parser: argparse.ArgumentParser, *, node2vec: bool) -> None:
    """The flags of ``deepwalk`` (``node2vec=False``: no ``--p``/``--q``) or ``node2vec``."""
    reference = parser.add_argument_group(
        "node2vec's flags (the reference implementation's names and meanings)"
    )
    reading = parser.add_argument_group("reading the graph file")
    writing = parser.add_argument_group("writing the embeddings")
    _add_reference_flags(reference, reading, writing, node2vec=node2vec)
    _add_reading_flags(reading)
    _add_model_flags(parser.add_argument_group("skip-gram training (graphemb's own)"))
    run = parser.add_argument_group("run")
    SEED_FLAG.add_to(run)
    # The command line's own switch: its summary lines have no library counterpart.
    run.add_argument(
        "--quiet", action="store_true", help="no progress bar, notes or summary on stderr"
    )


def _add_reference_flags(
    group: argparse._ArgumentGroup,
    reading: argparse._ArgumentGroup,
    writing: argparse._ArgumentGroup,
    *,
    node2vec: bool,
) -> None:
    """The reference node2vec's flags, in its order (``--format`` goes to ``reading``,
    ``--output-format`` to ``writing``)."""
    add_file_option(
        group, "--input", "--format", kind="graph", what="graph file", function=read_graph,
        format_group=reading,
    )  # fmt: skip
    add_file_option(
        group,
        "--output",
        "--output-format",
        kind="embedding",
        what="embeddings, with the input's node names",
        function=write_embeddings,
        format_group=writing,
    )
    for option in REFERENCE_FLAGS:
        option.add_to(group)
    group.add_argument(
        "--workers",
        type=int_at_least(0),
        default=None,
        metavar="W",
        help="CPU threads that train (the compiled backend's lock-free threads, or torch's "
        f"threads); 0 or default: this machine's cores ({available_cores()} here)",
    )
    for option in NODE2VEC_FLAGS if node2vec else ():
        option.add_to(group)
    _add_switch(
        group, "weighted", None,
        ("steps in proportion to the edge weights (an edge list's third column, a matrix's "
         "values); a file without weights is refused"),
        "ignore any weights (default: unweighted, as the reference)",
    )  # fmt: skip
    _add_switch(
        group, "directed", default_of(read_graph, "directed"),
        "edges are directed: walks follow them",
        "each edge is walked both ways (default)",
    )  # fmt: skip


def _add_switch(group: argparse._ArgumentGroup, name: str, default: Any, on: str, off: str) -> None:
    """``--NAME`` / ``--unNAME`` (or ``--no-NAME``): one of the two, or neither."""
    negative = f"--un{name}" if name in ("weighted", "directed") else f"--no-{name}"
    pair = group.add_mutually_exclusive_group()
    pair.add_argument(
        f"--{name}", dest=name, action="store_const", const=True, default=default, help=on
    )
    pair.add_argument(
        negative, dest=name, action="store_const", const=False, default=default, help=off
    )


def _add_reading_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--delimiter",
        type=delimiter,
        default=default_of(read_edge_list, "delimiter"),
        metavar="SEP",
        help="field separator of an edge or adjacency list, e.g. ',' or tab, comma, space, "
        "semicolon, pipe ('\\t' is a tab) (default: whitespace; ',' for .csv files and "
        "comma-separated first lines)",
    )
    _add_switch(
        group, "header", default_of(read_edge_list, "header"),
        "the first line of an edge list is a header (default: detected, see below)",
        "the first line of an edge list is an edge",
    )  # fmt: skip
    for flag, name, explained in (
        ("--implicit_ids", "implicit_ids", "integer node names are the ids (PecanPy's flag): "
         "node k is row k of the output, ids missing from the file are rows of nodes "
         "without edges; every name must be an integer >= 0"),
        ("--merge-duplicates", "merge_duplicates", "one edge per pair of nodes (per "
         "direction if --directed), its weight the sum of its duplicates' (default: "
         "parallel edges)"),
        ("--drop-self-loops", "drop_self_loops", "drop edges from a node to itself (default: "
         "kept)"),
    ):  # fmt: skip
        aliases = (flag, "--implicit-ids") if name == "implicit_ids" else (flag,)
        group.add_argument(
            *aliases,
            dest=name,
            action="store_true",
            default=default_of(read_edge_list, name),
            help=explained,
        )


def _add_model_flags(model: argparse._ArgumentGroup) -> None:
    for option in TRAINING_FLAGS:
        option.add_to(model)
    model.add_argument(
        "--backend",
        choices=[backend.value for backend in Backend],
        default=Backend.AUTO.value,
        help="'compiled' = word2vec's algorithm in C++ threads; 'torch' = the same updates in "
        "batched torch rounds (CUDA, or without the compiled kernels); 'auto' = compiled "
        "where it can run",
    )
    model.add_argument(
        "--shared-negatives",
        action="store_true",
        help="compiled backend: draw the --negatives noise nodes once per walk position for "
        "all the contexts of its window (HogBatch) instead of once per (context, node) pair: "
        "fewer random reads of rows, faster once the tables outgrow the CPU caches",
    )
    model.add_argument(
        "--noise-reuse",
        type=positive_int,
        default=CompiledOptions().noise_reuse,
        metavar="R",
        help="compiled backend: take noise nodes from a small per-thread pool of fresh draws "
        "that stays in the CPU cache, each fresh draw serving R noise nodes (1 = word2vec, "
        "every noise node a fresh draw); each still follows the noise distribution. Default: "
        f"1 while the output table (nodes x dimensions floats) is at most "
        f"{FRESH_NOISE_TABLE_BYTES >> 20} MiB, {LARGE_TABLE_NOISE_REUSE} beyond, where each "
        "fresh draw is a read from memory",
    )
    model.add_argument(
        "--output-table",
        choices=list(OUTPUT_DTYPES),
        default=CompiledOptions().output_dtype,
        help="compiled backend: the type of word2vec's output table (the written embeddings "
        "are the input table's, always float32): float24 takes 3/4 of the memory, bfloat16 "
        "half, both trained in float32 arithmetic with stochastic rounding, for graphs whose "
        "float32 tables do not fit; both train slower, and bfloat16 costs F1 (default: "
        "float32)",
    )
