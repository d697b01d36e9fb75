"""A loaded machine on purpose: processes that keep cores busy while a benchmark runs.

Timings on a busy machine differ from quiet ones by different amounts per contender (DGL's
OpenMP threads spin and lose their time slices, for one), so a target "under load" needs
a load that every run reproduces: :func:`busy_processes` starts ``count`` processes that
spin, each on whatever core the scheduler gives it, for the duration of a ``with`` block.
"""

from __future__ import annotations

import argparse
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager

#: Seconds to wait for a busy process to exit once told to.
STOP_TIMEOUT = 10.0


def add_busy_option(parser: argparse.ArgumentParser, during: str, verdicts: str) -> None:
    """``--busy N`` (default 0): N processes spinning on the cores ``during`` the named part
    of a run; ``verdicts`` says how the loaded run is judged."""
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        help=f"processes spinning on the cores during {during}: a loaded run, {verdicts} "
        "(the machine must be quiet before it)",
    )


def _spin() -> None:
    while True:
        pass


@contextmanager
def busy_processes(count: int) -> Iterator[list[int]]:
    """Run the block with ``count`` spinning processes beside it (none for 0).

    Yields the processes' ids. They are killed when the block ends, also on an error;
    a process that outlives :data:`STOP_TIMEOUT` seconds raises ``RuntimeError``.
    """
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"busy process count must be an int >= 0, got {count!r}")
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_spin, daemon=True) for _ in range(count)]
    try:
        for process in processes:
            process.start()
        yield [p.pid for p in processes if p.pid is not None]
    finally:
        for process in processes:
            if process.pid is not None:
                process.kill()
        for process in processes:
            if process.pid is None:
                continue
            process.join(STOP_TIMEOUT)
            if process.is_alive():
                raise RuntimeError(
                    f"busy process {process.pid} still runs {STOP_TIMEOUT:g} s after kill"
                )
