"""The test suite's pool of ranks: one :class:`graphemb.testing.LocalRanks` for every
multi-process test (started on first use, killed at exit)."""

from __future__ import annotations

import atexit

from graphemb.testing import LocalRanks, RankFailed

__all__ = ["RankFailed", "run_ranks", "worker_pids"]

_RANKS = LocalRanks()
atexit.register(_RANKS.shutdown)


def worker_pids() -> set[int]:
    """Process ids of the pool's workers (empty before the first job)."""
    return _RANKS.pids()


def run_ranks(worker, world_size: int, *args, timeout: float = 120.0, backend: str = "gloo"):
    """Run ``worker(rank, world_size, *args)`` on ``world_size`` processes; the workers'
    return values, by rank."""
    return _RANKS.run(worker, world_size, *args, timeout=timeout, backend=backend)
