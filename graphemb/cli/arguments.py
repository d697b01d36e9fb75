"""What every subcommand shares about its arguments: how ``--help`` is laid out and the
value types argparse checks (a bad value is a one-line usage error naming it)."""

from __future__ import annotations

import argparse
import math

__all__ = ["HelpFormatter", "fractions", "positive_float", "positive_int"]


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
