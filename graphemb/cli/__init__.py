"""The ``python -m graphemb`` command line.

Each subcommand module exposes ``add_parsers(subparsers) -> None``, registering its
subcommands with ``set_defaults(run=callable(args) -> int)``. Bad user input (a malformed
file, a value out of range, flags that disagree) ends with a one-line message and exit
code 2, no traceback, nothing written; an interrupt (Ctrl-C) with one line and exit code
130, nothing written.

Example
-------
>>> from graphemb.cli import build_parser
>>> build_parser().parse_args(["score", "--embeddings", "a.emb", "--labels", "l.txt"]).command
'score'
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import embed, info, score
from .arguments import HelpFormatter, Parser

__all__ = ["PROG", "build_parser", "main"]

PROG = "python -m graphemb"

#: The subcommand modules, each with ``add_parsers(subparsers)``.
COMMAND_MODULES = (embed, score, info)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    parser = Parser(
        prog=PROG,
        formatter_class=HelpFormatter,
        description="Node embeddings for graphs: train them, write them, score them.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parsers(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit code: 0 on success (and for ``--help``), 2 for bad input or flags, 1 for
        a missing optional package, 130 when interrupted (each with a one-line message on
        stderr).
    """
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as done:  # --help, or a usage error already printed
        return done.code if isinstance(done.code, int) else 2
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as error:  # bad files or values: the user's to fix
        print(f"{PROG} {args.command}: error: {error}", file=sys.stderr)
        return 2
    except ImportError as error:  # an optional package (scikit-learn, scipy, tqdm)
        print(
            f"{PROG} {args.command}: error: needs an optional package ({error}); install "
            "them with `pip install 'graphemb[examples]'`",
            file=sys.stderr,
        )
        return 1


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, with unknown flags reported by the subcommand's parser (its
    name in the message)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        owner = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                owner = action.choices.get(str(getattr(args, "command", "")), parser)
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args
