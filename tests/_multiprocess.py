"""Run a function on N real processes that form a gloo process group over loopback.

The parent process hosts the TCPStore on a free port chosen by the OS (port 0, never a
fixed one) and keeps it for the duration of the run; ranks connect to it and call
``init_process_group(store=...)``, so the store is the process group's default store, as
under ``torchrun``. Processes are started with ``torch.multiprocessing`` (spawn). Each
rank's return value comes back to the caller; an exception in any rank fails the run with
that rank's traceback, and a run that outlives ``timeout`` is killed and fails.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class RankFailed(AssertionError):
    """A rank raised, or the run did not finish in time."""


def run_ranks(worker, world_size: int, *args, timeout: float = 120.0, backend: str = "gloo"):
    """Run ``worker(rank, world_size, *args)`` on ``world_size`` processes.

    Returns the list of the workers' return values, by rank.
    """
    store = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False,
        timeout=timedelta(seconds=timeout),
    )
    with tempfile.TemporaryDirectory(prefix="graphemb-test-") as result_dir:
        context = mp.start_processes(
            _bootstrap,
            args=(worker, world_size, store.port, backend, result_dir, args),
            nprocs=world_size,
            join=False,
            start_method="spawn",
        )
        deadline = time.monotonic() + timeout
        try:
            while not context.join(timeout=0.5):
                if time.monotonic() > deadline:
                    raise RankFailed(f"ranks did not finish within {timeout}s")
        except mp.ProcessRaisedException as err:
            raise RankFailed(str(err)) from None
        except mp.ProcessExitedException as err:
            raise RankFailed(str(err)) from None
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
                    process.join()
        return [
            torch.load(os.path.join(result_dir, f"rank{r}.pt"), weights_only=False)
            for r in range(world_size)
        ]


def _bootstrap(rank, worker, world_size, port, backend, result_dir, args):
    torch.set_num_threads(1)  # N ranks share this machine's cores
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
    try:
        result = worker(rank, world_size, *args)
        dist.barrier()  # nobody tears the group down while others still talk to it
    finally:
        dist.destroy_process_group()
    torch.save(result, os.path.join(result_dir, f"rank{rank}.pt"))
