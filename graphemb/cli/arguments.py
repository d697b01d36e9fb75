"""What every subcommand shares about its arguments: how ``--help`` is laid out, how a
usage error is reported (one line naming the flag, exit code 2), the value types argparse
checks, the defaults (read from the library functions' signatures, so that the command
line has none of its own) and the file formats (read from :mod:`graphemb.io.formats`)."""

from __future__ import annotations

import argparse
import inspect
import math
import os
import sys
import textwrap
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from ..io import formats as registry

__all__ = [
    "DELIMITER_NAMES",
    "HelpFormatter",
    "Parser",
    "add_file_option",
    "available_cores",
    "checked_value",
    "default_of",
    "delimiter",
    "format_choices",
    "formats_help",
    "fractions",
    "int_at_least",
    "nonnegative_float",
    "paragraphs",
    "positive_float",
    "positive_int",
]

#: ``--delimiter`` names for separators that are awkward to type in a shell.
DELIMITER_NAMES = {
    "tab": "\t",
    "comma": ",",
    "space": " ",
    "semicolon": ";",
    "pipe": "|",
}

Number = TypeVar("Number", int, float)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` shows each option's default, except where there is none (``None``), for
    switches, or where the help text already says it; descriptions and epilogs keep their
    paragraphs (see :func:`paragraphs`)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.nargs == 0 or "default" in (action.help or ""):
            return action.help  # no default, a switch, or said in the help already
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr, naming the flag, and
    exit code 2 (argparse's own print the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see --help)`` and exit with 2."""
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def paragraphs(*texts: str, width: int = 88) -> str:
    """Texts filled to ``width`` columns, a blank line between them (for descriptions and
    epilogs, which :class:`HelpFormatter` keeps as they are)."""
    return "\n\n".join(textwrap.fill(" ".join(t.split()), width) for t in texts)


def available_cores() -> int:
    """The CPU cores this process may run on (``os.sched_getaffinity``, else
    ``os.cpu_count()``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def checked_value(
    convert: Callable[[str], Number], accept: Callable[[Number], bool], expected: str
) -> Callable[[str], Number]:
    """An argparse type: ``convert(text)`` if it converts and ``accept`` takes it, else the
    error ``expected EXPECTED, got 'TEXT'`` (argparse prefixes the flag)."""

    def parse(text: str) -> Number:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    parse.__name__ = expected
    return parse


def int_at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: an integer ``>= minimum`` (``why`` explains the bound in the
    error)."""
    reason = f" ({why})" if why else ""
    return checked_value(int, lambda value: value >= minimum, f"an integer >= {minimum}{reason}")


#: An integer >= 1.
positive_int = checked_value(int, lambda value: value >= 1, "a positive integer")
#: A finite number >= 0.
nonnegative_float = checked_value(float, lambda value: 0 <= value < math.inf, "a number >= 0")
#: A finite number > 0.
positive_float = checked_value(float, lambda value: 0 < value < math.inf, "a positive number")


def delimiter(text: str) -> str:
    """A field separator: one of :data:`DELIMITER_NAMES` or the text itself, with ``\\t``
    read as a tab."""
    if text.lower() in DELIMITER_NAMES:
        return DELIMITER_NAMES[text.lower()]
    value = text.replace("\\t", "\t")
    if not value or "\n" in value or "\r" in value:
        raise argparse.ArgumentTypeError(
            f"expected a separator such as ',' or one of {', '.join(DELIMITER_NAMES)}, got {text!r}"
        )
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
    format_group: argparse._ActionsContainer | None = None,
) -> None:
    """A required file option (``--input``) and its format option (``--format``, in
    ``format_group`` if given): the registered formats of ``kind`` as choices and in the
    help, the format's default that of ``function``'s ``format`` parameter (``otherwise``:
    what an unknown suffix is)."""
    parser.add_argument(flag, required=True, metavar="FILE", help=formats_help(kind, what))
    (parser if format_group is None else format_group).add_argument(
        format_flag,
        choices=format_choices(kind),
        default=default_of(function, "format"),
        help=f"format of {flag} (default: from its suffix{otherwise})",
    )
