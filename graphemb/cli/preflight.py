"""The checks a command makes before any work: its files can be read and written, their
formats are known, the flags apply to the formats and agree with each other.

Each failure is a :class:`UsageError` naming the flag and the user's path, which
:func:`graphemb.cli.main` prints as one line with exit code 2, before the graph is read
and before anything is written.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from ..io import formats as registry
from ..io.paths import check_readable_file, check_writable_file
from ..io.read import reader_options
from .arguments import available_cores

__all__ = ["EmbedPlan", "UsageError", "check_embed_run", "check_input", "file_format"]


class UsageError(ValueError):
    """A flag or file that a command cannot start with."""


@dataclass(frozen=True)
class EmbedPlan:
    """What ``deepwalk``/``node2vec`` will do, once checked.

    Attributes
    ----------
    graph_format, output_format : str
        The registered formats of ``--input`` and ``--output``.
    read_options : dict
        Keyword arguments of :func:`graphemb.io.read_graph`'s reader.
    workers : int
        ``--workers`` resolved (0 or none given: this machine's cores).
    """

    graph_format: str
    output_format: str
    read_options: dict[str, Any]
    workers: int


def check_input(flag: str, path: str) -> None:
    """``path`` (given as ``flag``) is a file this process may read, else a UsageError."""
    try:
        check_readable_file(path)
    except OSError as error:
        raise UsageError(f"{flag}: {error}") from None


def file_format(
    flag: str,
    kind: str,
    path: str,
    format: str | None,
    *,
    format_flag: str = "--format",
    default: str | None = None,
) -> registry.Format:
    """The format of ``path`` (given as ``flag``), named by ``format_flag`` or from its
    suffix, else a UsageError naming ``flag`` and the known suffixes."""
    try:
        return registry.find_format(kind, path, format, default=default)
    except ValueError:
        suffixes = sorted(s for f in registry.formats(kind) for s in f.suffixes)
        names = [f.name for f in registry.formats(kind)]
        raise UsageError(
            f"{flag}: cannot tell the {kind} format of {path!r} from its suffix (known: "
            f"{', '.join(suffixes)}); name one with {format_flag} {{{','.join(names)}}}"
        ) from None


def check_embed_run(args: argparse.Namespace) -> EmbedPlan:
    """Every check of ``deepwalk``/``node2vec`` that needs no reading of the graph."""
    check_input("--input", args.input)
    graph_format = file_format("--input", "graph", args.input, args.format).name
    try:
        check_writable_file(args.output)
    except OSError as error:
        raise UsageError(f"--output: {error}") from None
    if os.path.exists(args.output) and os.path.samefile(args.output, args.input):
        raise UsageError(f"--output: {args.output!r} is the --input file; name another")
    output = file_format(
        "--output", "embedding", args.output, args.output_format, format_flag="--output-format"
    )
    if output.writer is None:
        raise UsageError(f"--output: the {output.name} format is read only ({args.output!r})")
    return EmbedPlan(
        graph_format,
        output.name,
        _read_options(args, graph_format),
        _workers(args),
    )


def _given_reading_flags(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """``reader option -> (flag as typed, value)`` of the reading flags the user gave."""
    given: dict[str, tuple[str, Any]] = {}
    if args.delimiter is not None:
        given["delimiter"] = ("--delimiter", args.delimiter)
    if args.header is not None:
        given["header"] = ("--header" if args.header else "--no-header", args.header)
    if args.weighted is not None:
        given["weighted"] = ("--weighted" if args.weighted else "--unweighted", args.weighted)
    for name in ("implicit_ids", "merge_duplicates", "drop_self_loops"):
        if getattr(args, name):
            flag = "--implicit_ids" if name == "implicit_ids" else "--" + name.replace("_", "-")
            given[name] = (flag, True)
    return given


def _read_options(args: argparse.Namespace, graph_format: str) -> dict[str, Any]:
    """The reader's keyword arguments; a UsageError for a flag that its format does not
    take (``--unweighted`` is no error: such formats carry no weights)."""
    accepted = reader_options(graph_format)
    options: dict[str, Any] = {}
    for option, (flag, value) in _given_reading_flags(args).items():
        if accepted is None or option in accepted:
            options[option] = value
        elif flag != "--unweighted":
            takers = [f.name for f in registry.formats("graph") if _takes(f.name, option)]
            raise UsageError(
                f"{flag} does not apply to {graph_format} files ({args.input!r}); it applies "
                f"to: {', '.join(takers) or 'no format'}"
            )
    if "weighted" not in options and accepted is not None and "weighted" in accepted:
        options["weighted"] = False  # the reference's default: weights ignored
    return options


def _takes(graph_format: str, option: str) -> bool:
    accepted = reader_options(graph_format)
    return accepted is None or option in accepted


def _workers(args: argparse.Namespace) -> int:
    """``--workers`` resolved (0 or none: this machine's cores); a UsageError where
    ``--backend compiled`` cannot run."""
    from ..skipgram.backends import compiled_kernel

    if args.backend == "compiled" and compiled_kernel() is None:
        raise UsageError(
            "--backend compiled: the compiled kernels are not available here (not built, or "
            "GRAPHEMB_DISABLE_KERNELS is set); use --backend auto or torch"
        )
    return int(args.workers or available_cores())
