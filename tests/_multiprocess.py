"""Run a function on N real processes that form a process group over loopback.

A pool of worker processes, started on first use, runs every multi-process test: starting
Python and importing torch costs seconds per process here, and the suite runs dozens of
jobs. The workers are fresh processes forked by a fork server (``forkserver`` start method)
that has imported torch and nothing else -- never a fork of the test process, and no CUDA
is initialised before the fork -- so starting the pool, and starting it anew after a
failure, costs a fork instead of a torch import per worker. For each job the parent hosts a
fresh TCPStore on a free port chosen by the OS (port 0, never a fixed one); the ranks join
it with ``init_process_group(store=...)`` -- so it is the process group's default store, as
under ``torchrun`` -- run the function, and destroy the group again. Each rank's return
value comes back to the caller; an exception in any rank fails the run with that rank's
traceback, a rank whose process died fails it as soon as the death is seen, and a job that
outlives ``timeout`` fails. After any failure the pool is killed and started anew, so no
test inherits a broken process.
"""

from __future__ import annotations

import atexit
import gc
import io
import queue
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

_POLL_S = 0.2  # how often a waiting parent checks that a silent rank is still alive


class RankFailed(AssertionError):
    """A rank raised or died, or the job did not finish in time."""


def worker_pids() -> set[int]:
    """Process ids of the pool's workers (empty before the first job)."""
    return _POOL.pids()


def run_ranks(worker, world_size: int, *args, timeout: float = 120.0, backend: str = "gloo"):
    """Run ``worker(rank, world_size, *args)`` on ``world_size`` processes.

    Returns the list of the workers' return values, by rank.
    """
    return _POOL.run(worker, world_size, args, timeout, backend)


class _Pool:
    def __init__(self) -> None:
        self._context = None
        self._tasks: list = []
        self._results: list = []

    def run(self, worker, world_size, args, timeout, backend):
        self._ensure(world_size)
        store = dist.TCPStore(
            "127.0.0.1",
            0,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout),
        )
        for rank in range(world_size):
            self._tasks[rank].put((worker, rank, world_size, store.port, backend, args))
        deadline = time.monotonic() + timeout
        outcomes, failed = [], False
        for rank in range(world_size):
            outcome = self._outcome(rank, deadline, timeout)
            failed |= outcome[0] == "error"
            outcomes.append(outcome)
            if failed:  # the others may wait on the failed rank: give them little time
                deadline = min(deadline, time.monotonic() + 15)
        if failed:
            self.shutdown()
            errors = [f"rank {r}: {o[1]}" for r, o in enumerate(outcomes) if o[0] == "error"]
            raise RankFailed("\n".join(errors))
        return [torch.load(io.BytesIO(o[1]), weights_only=False) for o in outcomes]

    def _outcome(self, rank: int, deadline: float, timeout: float) -> tuple:
        """Rank ``rank``'s report; an error when its process died or the deadline passed.
        A dead worker never reports: waiting for the deadline would only waste the time."""
        process = self._context.processes[rank]
        while True:
            left = deadline - time.monotonic()
            try:
                return self._results[rank].get(timeout=max(0.01, min(left, _POLL_S)))
            except queue.Empty:
                pass
            if not process.is_alive():
                try:  # a report sent just before dying is still in the pipe
                    return self._results[rank].get(timeout=_POLL_S)
                except queue.Empty:
                    return ("error", f"rank {rank}'s process died (exit code {process.exitcode})")
            if left <= 0:
                return ("error", f"rank {rank} did not finish within {timeout}s")

    def _ensure(self, world_size: int) -> None:
        if self._context is not None and len(self._tasks) >= world_size:
            return
        self.shutdown()
        size = max(world_size, 4)
        context = mp.get_context("forkserver")
        # Set before the fork server starts (first use); a later call changes nothing.
        context.set_forkserver_preload(["torch", "torch.distributed"])
        self._tasks = [context.Queue() for _ in range(size)]
        self._results = [context.Queue() for _ in range(size)]
        self._context = mp.start_processes(
            _serve,
            args=(self._tasks, self._results),
            nprocs=size,
            join=False,
            start_method="forkserver",
        )

    def pids(self) -> set[int]:
        return set() if self._context is None else {p.pid for p in self._context.processes}

    def shutdown(self) -> None:
        if self._context is None:
            return
        for process in self._context.processes:
            if process.is_alive():
                process.kill()
            process.join()
        self._context, self._tasks, self._results = None, [], []


def _serve(index, tasks, results):
    torch.set_num_threads(1)  # the ranks share this machine's cores
    # torch's objects (imported by the fork server) live as long as the worker: frozen, the
    # collection at the end of every job never scans them (milliseconds instead of ~0.1 s).
    gc.freeze()
    while True:
        worker, rank, world_size, port, backend, args = tasks[index].get()
        try:
            results[index].put(("ok", _run_one(worker, rank, world_size, port, backend, args)))
        except BaseException:  # report everything, the parent decides
            results[index].put(("error", traceback.format_exc()))


def _run_one(worker, rank, world_size, port, backend, args) -> bytes:
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
    dist.init_process_group(
        backend, store=store, rank=rank, world_size=world_size, timeout=timedelta(seconds=60)
    )
    try:
        result = worker(rank, world_size, *args)
        # The job's garbage goes now, while its store is up: graphemb objects left in
        # reference cycles would otherwise be finalized by a collection during a later job,
        # and a finalizer that reaches this job's store (gone by then; shm._release_name)
        # stalls that job for seconds before it gives up.
        gc.collect()
        dist.barrier()  # nobody tears the group down while others still talk to it
    finally:
        dist.destroy_process_group()
    buffer = io.BytesIO()
    torch.save(result, buffer)
    return buffer.getvalue()


_POOL = _Pool()
atexit.register(_POOL.shutdown)
