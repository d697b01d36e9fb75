"""Run a function on N real processes that form a process group over loopback.

:class:`LocalRanks` keeps a pool of worker processes and runs *jobs* on them: a job is
``fn(rank, world_size, *args)`` on ``world_size`` workers that have joined one process group.
Starting Python and importing torch costs seconds per process, and a test suite or a
benchmark runs many jobs, so the workers are started once and reused. They are fresh
processes forked by a fork server (``forkserver`` start method) that has imported torch and
nothing else -- never a fork of the calling process, and no CUDA is initialised before the
fork -- so starting the pool, and starting it anew after a failure, costs a fork instead of a
torch import per worker.

For each job the parent hosts a fresh TCPStore on a free port chosen by the OS (port 0,
never a fixed one); the ranks join it with ``init_process_group(store=...)`` -- so it is the
group's default store, as under ``torchrun`` -- run the function, and destroy the group
again. The parent keeps the store (:attr:`RankJob.store`): a long job such as a benchmark's
rank loop can take commands through it while it runs. Each rank's return value comes back
to the caller; an exception in any rank fails the job with that rank's traceback, a rank
whose process died fails it as soon as the death is seen, and a job that outlives its
``timeout`` fails. After any failure the pool is killed and started anew on the next job,
so no job inherits a broken process.

Example::

    >>> from graphemb.testing import LocalRanks
    >>> def worker(rank, world_size):
    ...     import torch, torch.distributed as dist
    ...     t = torch.tensor([rank + 1.0])
    ...     dist.all_reduce(t)
    ...     return t.item()
    >>> with LocalRanks() as ranks:                          # doctest: +SKIP
    ...     ranks.run(worker, 2)
    [3.0, 3.0]
"""

from __future__ import annotations

import gc
import io
import queue
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

__all__ = ["LocalRanks", "RankFailed", "RankJob", "current_store"]

_POLL_S = 0.2  # how often a waiting parent checks that a silent rank is still alive
_AFTER_FAILURE_S = 15.0  # the other ranks may wait on a failed one: give them little time

# In a worker: the store of the job it runs (see current_store).
_JOB_STORE: dist.Store | None = None


class RankFailed(AssertionError):
    """A rank raised or died, or the job did not finish in time.

    An ``AssertionError``, so that a test whose ranks fail is reported as a failed test
    with every failed rank's traceback.
    """


def current_store() -> dist.Store:
    """In a rank of a job: the job's TCPStore (the one the parent holds as
    :attr:`RankJob.store`), for exchanges with the parent while the job runs."""
    if _JOB_STORE is None:
        raise RuntimeError("current_store() is called inside a job of LocalRanks only")
    return _JOB_STORE


class RankJob:
    """A job running on the ranks of a :class:`LocalRanks` pool (from
    :meth:`LocalRanks.submit`).

    Attributes
    ----------
    store : torch.distributed.TCPStore
        The job's store, hosted by this process; the ranks' default store.
    world_size : int
    """

    def __init__(self, pool: LocalRanks, world_size: int, timeout: float) -> None:
        self._pool = pool
        self.world_size = world_size
        self.timeout = timeout
        self.store = dist.TCPStore(
            "127.0.0.1",
            0,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout),
        )
        self._deadline = time.monotonic() + timeout
        self._outcomes: list[tuple[str, Any] | None] = [None] * world_size
        self._done = False

    def check(self, waiting_for: str) -> None:
        """Raise :class:`RankFailed` now if a rank has failed or died, or the job's timeout
        has passed; ``waiting_for`` says what the caller was waiting for."""
        for rank in range(self.world_size):
            if self._outcomes[rank] is None:
                self._outcomes[rank] = self._pool._poll(rank, 0.0)
        errors = self._errors()
        if not errors and time.monotonic() > self._deadline:
            errors = [f"no answer within {self.timeout:g} s"]
        if errors:
            self._fail(f"while waiting for {waiting_for}: " + "\n".join(errors))

    def result(self) -> list:
        """Wait for every rank; their return values, by rank. Raises :class:`RankFailed`
        with each failed rank's traceback when a rank raised, died or ran out of time."""
        if self._done:
            raise RuntimeError("the result of this job was already collected")
        deadline = self._deadline
        pending = [r for r in range(self.world_size) if self._outcomes[r] is None]
        while pending:
            # Round-robin, so that a rank that died is seen while others still run.
            wait = _POLL_S / len(pending)
            for rank in pending:
                self._outcomes[rank] = self._pool._poll(rank, wait)
            pending = [r for r in pending if self._outcomes[r] is None]
            if self._errors():  # the others may wait on the failed rank: little time left
                deadline = min(deadline, time.monotonic() + _AFTER_FAILURE_S)
            if pending and time.monotonic() > deadline:
                late = (
                    f"still running {_AFTER_FAILURE_S:g}s after another rank failed"
                    if self._errors()
                    else f"did not finish within {self.timeout:g}s"
                )
                for rank in pending:
                    self._outcomes[rank] = ("error", late)
                pending = []
        errors = self._errors()
        if errors:
            self._fail("\n".join(errors))
        self._done = True
        return [torch.load(io.BytesIO(o[1]), weights_only=False) for o in self._outcomes]  # type: ignore[index]

    def _errors(self) -> list[str]:
        return [
            f"rank {rank}: {outcome[1]}"
            for rank, outcome in enumerate(self._outcomes)
            if outcome is not None and outcome[0] == "error"
        ]

    def _fail(self, message: str) -> None:
        self._done = True
        self._pool.shutdown()
        raise RankFailed(message)


class LocalRanks:
    """A pool of worker processes that run jobs as the ranks of a process group on this
    machine (loopback, gloo by default).

    Parameters
    ----------
    preload : tuple of str
        Modules the fork server imports once, so that every worker starts with them.
    """

    def __init__(self, preload: tuple[str, ...] = ("torch", "torch.distributed")) -> None:
        self._preload = list(preload)
        self._context: Any = None
        self._tasks: list = []
        self._results: list = []

    def submit(
        self,
        fn: Callable[..., Any],
        world_size: int,
        *args: Any,
        timeout: float = 120.0,
        backend: str = "gloo",
        threads: int = 1,
    ) -> RankJob:
        """Start ``fn(rank, world_size, *args)`` on ``world_size`` ranks, each with
        ``threads`` torch threads; returns at once. ``fn`` and ``args`` must pickle (``fn``
        by reference: a module-level function)."""
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        self._ensure(world_size)
        job = RankJob(self, world_size, timeout)
        for rank in range(world_size):
            task = (fn, rank, world_size, job.store.port, backend, threads, timeout, args)
            self._tasks[rank].put(task)
        return job

    def run(self, fn: Callable[..., Any], world_size: int, *args: Any, **options: Any) -> list:
        """Run ``fn(rank, world_size, *args)`` on ``world_size`` ranks; the ranks' return
        values, by rank (see :meth:`RankJob.result` for failures). ``options``: the keywords
        of :meth:`submit` (``timeout``, ``backend``, ``threads``), with its defaults."""
        return self.submit(fn, world_size, *args, **options).result()

    def pids(self) -> set[int]:
        """Process ids of the workers (empty before the first job)."""
        return set() if self._context is None else {p.pid for p in self._context.processes}

    def shutdown(self) -> None:
        """Kill the workers (the next job starts new ones)."""
        if self._context is None:
            return
        for process in self._context.processes:
            if process.is_alive():
                process.kill()
            process.join()
        self._context, self._tasks, self._results = None, [], []

    def __enter__(self) -> LocalRanks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _poll(self, rank: int, wait: float) -> tuple[str, Any] | None:
        """Rank ``rank``'s report if there is one within ``wait`` seconds; an error when
        its process died (a dead worker never reports: waiting would only waste time)."""
        try:
            return self._results[rank].get(timeout=max(wait, 0.001))
        except queue.Empty:
            pass
        process = self._context.processes[rank]
        if process.is_alive():
            return None
        try:  # a report sent just before dying is still in the pipe
            return self._results[rank].get(timeout=_POLL_S)
        except queue.Empty:
            return ("error", f"rank {rank}'s process died (exit code {process.exitcode})")

    def _ensure(self, world_size: int) -> None:
        if self._context is not None and len(self._tasks) >= world_size:
            return
        self.shutdown()
        size = max(world_size, 4)
        context = mp.get_context("forkserver")
        # Set before the fork server starts (first use); a later call changes nothing.
        context.set_forkserver_preload(self._preload)
        self._tasks = [context.Queue() for _ in range(size)]
        self._results = [context.Queue() for _ in range(size)]
        self._context = mp.start_processes(
            _serve,
            args=(self._tasks, self._results),
            nprocs=size,
            join=False,
            start_method="forkserver",
        )


def _serve(index: int, tasks: list, results: list) -> None:
    # torch's objects (imported by the fork server) live as long as the worker: frozen, the
    # collection at the end of every job never scans them (milliseconds instead of ~0.1 s).
    gc.freeze()
    while True:
        task = tasks[index].get()
        try:
            results[index].put(("ok", _run_one(*task)))
        except BaseException:  # report everything, the parent decides
            results[index].put(("error", traceback.format_exc()))


def _run_one(fn, rank, world_size, port, backend, threads, timeout, args) -> bytes:
    global _JOB_STORE
    torch.set_num_threads(threads)
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    wait = timedelta(seconds=timeout)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=wait)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=wait)
    _JOB_STORE = store
    try:
        result = fn(rank, world_size, *args)
        # The job's garbage goes now, while its store is up: graphemb objects left in
        # reference cycles would otherwise be finalized by a collection during a later job,
        # and a finalizer that reaches this job's store (gone by then) stalls that job for
        # seconds before it gives up.
        gc.collect()
        dist.barrier()  # nobody tears the group down while others still talk to it
    finally:
        _JOB_STORE = None
        dist.destroy_process_group()
    buffer = io.BytesIO()
    torch.save(result, buffer)
    return buffer.getvalue()
