"""``python -m graphemb info``: what this install runs with (see :mod:`graphemb.about`)."""

from __future__ import annotations

import argparse

from ..about import about

__all__ = ["add_parsers", "run_info"]


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``info``."""
    parser = subparsers.add_parser(
        "info",
        help="print versions, the compiled kernels (loaded, or why not), SIMD, threads",
        description="What this install runs with: graphemb's and torch's versions, the "
        "compiled kernels (loaded, or why not, and the command that fixes it), the SIMD "
        "level they chose, the thread count and the huge-page settings.",
    )
    parser.set_defaults(run=run_info)


def run_info(args: argparse.Namespace) -> int:
    """Print one ``name: value`` line per setting."""
    report = about()
    width = max(map(len, report))
    for name, value in report.items():
        print(f"{name + ':':<{width + 1}} {value}")
    return 0
