"""How many threads the compiled trainer runs each walk chunk on (:class:`ThreadGovernor`).

Hogwild threads write the same rows of the two tables, so every write moves a cache line
between cores. Where the cores share a cache that costs a little; where they do not -- two
sockets, or a virtual machine whose host moves its virtual CPUs apart -- it can cost more
than the second thread brings: each thread on the shared tables then runs several times
slower, in episodes of seconds, while one thread keeps its speed
(``benchmarks/results/deepwalk_quality.md`` has the measurements). The governor measures
the trainer's own throughput, chunk by chunk, and trains on one thread while that is faster.
"""

from __future__ import annotations

__all__ = ["ThreadGovernor"]


class ThreadGovernor:
    """Chooses ``workers`` or one thread for each walk chunk from measured throughput.

    Products per second are recorded for each chunk (:meth:`record`). The governor trains
    on ``workers`` threads, measures one thread once early in a run of at least
    ``calibrate_after + 2`` chunks (a machine where the threads never help), and moves to
    one thread for a while when a chunk on ``workers`` threads ran slower than one thread
    last did, or, before one thread was measured, at under ``slowdown`` of the fastest such
    chunk (the threads started to contend). While on one thread it tries ``workers`` again
    after ``retry`` chunks, doubling that wait (up to ``longest_retry``) each time they are
    still slower.

    Parameters
    ----------
    workers : int
        Threads requested; 1 disables the governor.
    chunks : int
        Chunks in the run.
    slowdown : float
        Share of the fastest throughput on ``workers`` threads below which one thread is
        tried, in (0, 1).
    calibrate_after : int
        The chunk after which one thread is measured once (the first chunks warm caches).
    retry, longest_retry : int
        Chunks on one thread before ``workers`` are tried again, first and at most.
    """

    def __init__(
        self,
        workers: int,
        chunks: int,
        *,
        slowdown: float = 0.5,
        calibrate_after: int = 2,
        retry: int = 2,
        longest_retry: int = 8,
    ) -> None:
        if workers < 1 or chunks < 0 or not 0 < slowdown < 1 or retry < 1:
            raise ValueError(
                f"need workers >= 1, chunks >= 0, 0 < slowdown < 1 and retry >= 1; got "
                f"{workers}, {chunks}, {slowdown}, {retry}"
            )
        self.workers = workers
        self.slowdown = slowdown
        self.retry = retry
        self.longest_retry = max(longest_retry, retry)
        self._calibrate_at = calibrate_after if chunks >= calibrate_after + 2 else None
        self._fastest_workers = 0.0  # products per second, best chunk on `workers` threads
        self._single = 0.0  # products per second, last chunk on one thread
        self._single_left = 0  # chunks still to train on one thread
        self._wait = retry
        self._chunk = 0

    def threads(self) -> int:
        """The thread count of the next chunk."""
        if self.workers == 1:
            return 1
        if self._chunk == self._calibrate_at or self._single_left > 0:
            return 1
        return self.workers

    def record(self, threads: int, products: int, seconds: float) -> None:
        """Record a chunk trained on ``threads`` threads: ``products`` (context, target)
        products in ``seconds``."""
        self._chunk += 1
        if self.workers == 1 or seconds <= 0 or products <= 0:
            return
        rate = products / seconds
        if threads != self.workers:
            self._single = rate
            self._single_left = max(self._single_left - 1, 0)
            return
        self._fastest_workers = max(self._fastest_workers, rate)
        if self._single > 0 and rate >= self._single:
            self._wait = self.retry  # the threads are worth it (again)
        elif self._single > 0 or rate < self.slowdown * self._fastest_workers:
            # Slower than one thread was, or far slower than the threads were: one thread
            # for a while (which also measures it).
            self._single_left = self._wait
            self._wait = min(2 * self._wait, self.longest_retry)
