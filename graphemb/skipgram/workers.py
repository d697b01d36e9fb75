"""The torch trainer's processes: one training loop per process, and N of them on tables in
shared memory.

:func:`train_process` is the loop of one process over its share of every walk chunk;
:func:`train_in_processes` starts ``workers`` of them (spawned, one core each, a gloo
group for the shared-memory tables) and returns the center rows rank 0 copies out.
"""

from __future__ import annotations

from datetime import timedelta

import torch

from ..distributed.coordination import DEFAULT_TIMEOUT
from ..graph import Graph
from .compiled import check_finite, learning_rate
from .model import SkipGram
from .schedule import Settings, chunks, noise_and_keep, progress_bar, train_step, walker
from .step import fast_matmul_dtype
from .windows import subsample_walks

__all__ = ["free_port", "train_in_processes", "train_process"]


def train_process(rank: int, world_size: int, graph: Graph, settings: Settings) -> torch.Tensor:
    """The training loop of one process: its share of every chunk of walks.

    With several processes the tables live once in shared memory and every process
    writes its SGD steps into them without locks (word2vec's threads do the same); the
    learning rate decays with the process's own progress, equal shares keeping all in
    step.

    Returns
    -------
    Tensor of float32, shape (N, D)
        A copy of the center rows.
    """
    from ..optim import SparseSGD  # the optimizers load only for the layouts that need one

    device = graph.device
    walks_of = walker(graph, settings)
    noise, keep = noise_and_keep(graph, settings)
    model = SkipGram(
        graph.num_nodes,
        settings.dimensions,
        settings.window,
        settings.name,
        device=device,
        seed=settings.seed,
        sharing=settings.sharing,
        num_negatives=settings.negatives,
    )
    # The fused step (no autograd, no optimizer) where it applies; SparseSGD otherwise.
    optimizer = None if model.fused_step else SparseSGD(model.embeddings, lr=settings.lr)
    matmul_dtype = settings.matmul_dtype
    if matmul_dtype == "auto":
        matmul_dtype = fast_matmul_dtype(str(device.type))
    generator = torch.Generator(device=device).manual_seed(settings.seed * 1_000_003 + rank)
    order_generator = torch.Generator().manual_seed(settings.seed)  # same order everywhere
    total = settings.epochs * settings.num_walks * graph.num_nodes * settings.passes
    done = 0
    with progress_bar(total, settings.progress and rank == 0) as shown:
        for index, count, starts in chunks(graph, settings, order_generator):
            mine = starts.tensor_split(world_size)[rank].to(device)
            drawn = walks_of(mine, settings.walk_length - 1, generator=generator)
            for _ in range(settings.passes):  # SGD passes over the same walks
                walks = subsample_walks(drawn, keep, generator=generator)
                for batch in walks.split(settings.batch_walks):
                    train_step(
                        model,
                        batch,
                        noise,
                        lr=learning_rate(settings.lr, done, total),
                        generator=generator,
                        optimizer=optimizer,
                        block_size=settings.walk_negatives,
                        matmul_dtype=matmul_dtype,  # type: ignore[arg-type]
                        duplicates=settings.duplicates,
                    )
                    done += batch.shape[0] * world_size
                    shown.update(batch.shape[0] * world_size)
            where = f"in walk chunk {index + 1} of {count}"
            check_finite(model.center.weight.detach(), settings.lr, where)
            check_finite(model.context.weight.detach(), settings.lr, where)
    return model.center.weight.detach().clone()


def train_in_processes(graph: Graph, settings: Settings, workers: int) -> torch.Tensor:
    """:func:`train_process` in ``workers`` spawned processes on shared-memory tables (CPU).

    Returns
    -------
    Tensor of float32, shape (N, D), in shared memory
        The center rows.
    """
    import torch.multiprocessing as mp

    out = torch.empty(graph.num_nodes, settings.dimensions).share_memory_()
    port = free_port()
    mp.start_processes(
        _worker,
        args=(workers, port, graph, settings, out),
        nprocs=workers,
        join=True,
        start_method="spawn",
    )
    return out


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for the workers' process group)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _worker(
    rank: int, world_size: int, port: int, graph: Graph, settings: Settings, out: torch.Tensor
) -> None:
    """One of ``world_size`` training processes on tables in shared memory."""
    import torch.distributed as dist

    torch.set_num_threads(1)  # one core per process: they share the machine
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=DEFAULT_TIMEOUT.total_seconds()),
    )
    try:
        table = train_process(rank, world_size, graph, settings)
        if rank == 0:
            out.copy_(table)
        dist.barrier()
    finally:
        dist.destroy_process_group()
