"""Starting the ranks of a multi-process example: one place for the examples' launcher.

``examples/deepwalk.py`` and ``examples/multi_gpu_graphsage.py`` run a function ``work(rank,
world_size, local_rank, args)`` on every rank of a process group, whether torchrun started
the processes or the example spawns them itself. ``args`` carries ``device`` ("cpu": gloo,
"cuda": NCCL, one GPU per process), ``timeout`` (seconds) and ``num_threads``, the options
that :func:`add_process_arguments` adds. ``node_classification.py`` shares
:func:`add_dataset_arguments`, :func:`add_checkpoint_arguments` and :func:`check_resume`
with them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from graphemb.distributed.coordination import Coordinator

Work = Callable[[int, int, int, argparse.Namespace], Any]


def add_process_arguments(
    parser: argparse.ArgumentParser,
    *,
    num_procs_default: int | None,
    num_procs_help: str,
    device_help: str,
) -> None:
    """The "processes" options: ``--num-procs``, ``--device``, ``--timeout``."""
    group = parser.add_argument_group("processes")
    group.add_argument("--num-procs", type=int, default=num_procs_default, help=num_procs_help)
    group.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help=device_help)
    group.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds a process waits for the others before failing",
    )


def add_dataset_arguments(parser: argparse.ArgumentParser, note: str = "") -> Any:
    """The "data" options: ``--dataset`` (cora, citeseer or sbm), ``--sbm-nodes`` and
    ``--sbm-communities``; ``note`` ends the help of ``--dataset``. Returns the group, for an
    example's own data options."""
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        choices=["cora", "citeseer", "sbm"],
        default="cora",
        help="a Planetoid citation graph, or a synthetic stochastic block model whose "
        "communities are the classes" + note,
    )
    data.add_argument("--sbm-nodes", type=int, default=5000, help="nodes of the sbm graph")
    data.add_argument("--sbm-communities", type=int, default=5, help="communities of the sbm graph")
    return data


def add_checkpoint_arguments(parser: argparse.ArgumentParser, saved: str, restored: str) -> None:
    """The "checkpoints" options: ``--checkpoint PATH`` (``saved``: what is written there
    after every epoch) and ``--resume`` (``restored``: what comes back from it)."""
    ckpt = parser.add_argument_group("checkpoints")
    ckpt.add_argument(
        "--checkpoint", type=Path, default=None, help=f"save {saved} here after every epoch"
    )
    ckpt.add_argument("--resume", action="store_true", help=f"continue from --checkpoint{restored}")


def check_resume(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors for ``--resume`` without ``--checkpoint`` or without a file there."""
    if args.resume and args.checkpoint is None:
        parser.error("--resume needs --checkpoint PATH")
    if args.resume and not args.checkpoint.exists():
        parser.error(f"--resume: no checkpoint at {args.checkpoint}")


def torchrun_ranks() -> tuple[int, int, int] | None:
    """``(rank, world_size, local_rank)`` when torchrun started this process, else None."""
    if "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    return None


def run_in_group(
    work: Work,
    rank: int,
    world_size: int,
    local_rank: int,
    args: argparse.Namespace,
    store: dist.Store | None = None,
) -> None:
    """Join the process group (from torchrun's environment, or ``store``), run ``work``,
    leave."""
    torch.set_num_threads(args.num_threads)
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)  # before NCCL touches a device
    backend = "nccl" if args.device == "cuda" else "gloo"
    timeout = timedelta(seconds=args.timeout)
    if store is None:  # torchrun: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
        dist.init_process_group(backend, timeout=timeout)
    else:
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=timeout
        )
    # The ranks leave together through the store, not a gloo barrier: nobody tears the group
    # down while the others still use it, and no collective is left in flight at teardown
    # (torch 2.2's gloo could deadlock destroying a group whose last barrier it was freeing).
    # A rank whose work raises skips the wait: its launcher (torchrun, spawn) stops the others.
    coordinator = Coordinator(rank, world_size, timeout)
    finished = f"examples/finished/{coordinator.next_generation('examples/finished')}"
    try:
        work(rank, world_size, local_rank, args)
        coordinator.agree(finished, None, "the example's work")
    finally:
        dist.destroy_process_group()


def _spawned(rank: int, work: Work, world_size: int, port: int, args: argparse.Namespace) -> None:
    store = dist.TCPStore(
        "127.0.0.1", port, is_master=False, timeout=timedelta(seconds=args.timeout)
    )
    run_in_group(work, rank, world_size, rank, args, store)


def spawn(work: Work, args: argparse.Namespace, num_procs: int) -> None:
    """Start ``num_procs`` ranks on this machine running ``work`` and wait for them.

    This process hosts the TCPStore that the ranks meet at, on a port the OS picks (port 0:
    never a fixed, possibly taken one). A rank that fails ends the run: the others are
    stopped and its traceback ends this process. ``work`` must be a module-level function
    (the spawned processes import it).
    """
    store = dist.TCPStore(
        "127.0.0.1",
        0,
        is_master=True,
        wait_for_workers=False,
        timeout=timedelta(seconds=args.timeout),
    )
    context = mp.start_processes(
        _spawned,
        args=(work, num_procs, store.port, args),
        nprocs=num_procs,
        join=False,
        start_method="spawn",
    )
    try:
        # join() returns False while ranks run; a rank's failure raises and stops the rest.
        # Ranks never wait on each other longer than --timeout, so this loop ends.
        while not context.join(timeout=1.0):
            pass
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as error:
        sys.exit(f"a rank failed:\n{error}")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join(timeout=10)


def launch(work: Work, args: argparse.Namespace, num_procs: int) -> None:
    """Run ``work`` on every rank: on this process's rank when torchrun started it, else on
    ``num_procs`` ranks spawned here (with ``--device cuda``, one per visible GPU at most)."""
    ranks = torchrun_ranks()
    if ranks is not None:
        run_in_group(work, *ranks, args)
        return
    if args.device == "cuda" and num_procs > torch.cuda.device_count():
        sys.exit(f"--num-procs {num_procs} needs as many GPUs, {torch.cuda.device_count()} visible")
    spawn(work, args, num_procs)
