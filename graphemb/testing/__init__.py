"""Helpers for testing and benchmarking code that runs on several processes.

* :class:`LocalRanks` -- a reusable pool of worker processes that run a function as the
  ranks of a process group over loopback (free ports, timeouts, every rank's traceback).
"""

from .ranks import LocalRanks, RankFailed, RankJob, current_store

__all__ = ["LocalRanks", "RankFailed", "RankJob", "current_store"]
