"""What every subcommand shares about its arguments: how ``--help`` is laid out, the
value types argparse checks (a bad value is a one-line usage error naming it), the
defaults (read from the library functions' signatures, so that the command line has none of
its own) and the file formats (read from :mod:`graphemb.io.formats`)."""

from __future__ import annotations

import argparse
import inspect
import math
from collections.abc import Callable
from typing import Any

from ..io import formats as registry

__all__ = [
    "HelpFormatter",
    "add_file_option",
    "default_of",
    "format_choices",
    "formats_help",
    "fractions",
    "positive_float",
    "positive_int",
]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default, except where there is none (``None``) or the
    help text already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def fractions(text: str) -> tuple[float, ...]:
    """Comma-separated numbers, each in (0, 1)."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None
    bad = [v for v in values if not 0 < v < 1]
    if bad:
        raise argparse.ArgumentTypeError(f"fractions must lie in (0, 1), got {bad[0]}")
    return values


def default_of(function: Callable[..., Any], parameter: str) -> Any:
    """The default of ``function``'s ``parameter``: an option's default, taken from the
    library call it feeds.

    Raises
    ------
    ValueError
        ``parameter`` is not one of ``function``'s or has no default.
    """
    found = inspect.signature(function).parameters.get(parameter)
    if found is None or found.default is inspect.Parameter.empty:
        raise ValueError(f"{function.__qualname__} has no parameter {parameter!r} with a default")
    return found.default


def format_choices(kind: str) -> tuple[str, ...]:
    """The names of the registered formats of ``kind`` (``"graph"``), for ``choices=``."""
    return tuple(f.name for f in registry.formats(kind))


def formats_help(kind: str, what: str) -> str:
    """``--help`` text of a file option: ``what``, then each registered format of ``kind``
    with its description and suffixes."""
    parts = [
        f"{f.name} ({' '.join(f.suffixes) or 'named only'}) = {f.description}"
        for f in registry.formats(kind)
    ]
    # argparse expands %-specifiers in help texts
    return f"{what}, format from the suffix: {'; '.join(parts)}".replace("%", "%%")


def add_file_option(
    parser: argparse._ActionsContainer,
    flag: str,
    format_flag: str,
    *,
    kind: str,
    what: str,
    function: Callable[..., Any],
    otherwise: str = "",
) -> None:
    """A required file option (``--input``) and its format option (``--format``): the
    registered formats of ``kind`` as choices and in the help, the format's default that
    of ``function``'s ``format`` parameter (``otherwise``: what an unknown suffix is)."""
    parser.add_argument(flag, required=True, metavar="FILE", help=formats_help(kind, what))
    parser.add_argument(
        format_flag,
        choices=format_choices(kind),
        default=default_of(function, "format"),
        help=f"format of {flag} (default: from its suffix{otherwise})",
    )
