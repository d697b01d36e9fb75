"""GraphSAGE with learnable node embeddings on N processes (GPUs, or CPU processes).

The training of ``examples/node_classification.py`` (whose helpers this file reuses), made
data-parallel:

* the dense layers are wrapped in ``DistributedDataParallel`` (DDP averages their gradients);
* the :class:`graphemb.NodeEmbedding` is created by every rank with the same arguments.
  With ``--device cpu`` it lives once in shared memory, mapped by every process; with
  ``--device cuda`` it is partitioned over the GPUs (rank r keeps the rows
  ``id % N == r``, and lookups fetch rows from their owners over NCCL). ``SparseAdam``
  averages the rows' gradients over ranks, as DDP does, and each row's owner updates it;
* every rank holds the graph on its device (with ``--device cuda`` neighbour sampling runs
  on its GPU) and samples its own share of the training nodes (graphemb's ``SeedLoader``
  with ``rank`` and ``world_size``), with ``--batch-size / N`` nodes per step, so that one
  step of N processes sees as many nodes as one step of the single-process example. Every
  rank runs the same number of steps: optimizer steps (and, when partitioned, lookups) are
  collective;
* evaluation is full-graph inference, which every rank runs (the lookups of a partitioned
  embedding are collective); rank 0's accuracies are broadcast and rank 0 prints.

Usage::

    # N GPUs of one machine, torchrun starting the processes
    torchrun --standalone --nproc_per_node 4 examples/multi_gpu_graphsage.py --device cuda
    # CPU processes, started by torchrun or by this script itself
    torchrun --standalone --nproc_per_node 2 examples/multi_gpu_graphsage.py
    python examples/multi_gpu_graphsage.py --num-procs 2
    python examples/multi_gpu_graphsage.py --num-procs 2 --quick --checkpoint runs/c.ckpt
    python examples/multi_gpu_graphsage.py --num-procs 2 --checkpoint runs/c.ckpt --resume

Checkpoints hold the unwrapped model, so this script and the single-process example resume
each other's checkpoints, whatever the number of processes. The last line printed is
``RESULT {json}``, as in the single-process example, with ``world_size`` and ``device``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _launch as launch  # noqa: E402  (examples/_launch.py: options and launcher of ranks)
import node_classification as single  # noqa: E402  (exits with a message without PyG/tqdm)

from graphemb.optim import SparseAdam  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = single.build_parser((__doc__ or "").split("\n\n")[0])
    launch.add_process_arguments(
        parser,
        num_procs_default=None,
        num_procs_help="start this many processes here (default: the number of GPUs with "
        "--device cuda, else 2); ignored under torchrun, which starts them",
        device_help="cpu: gloo, embedding in shared memory; cuda: one GPU per process, NCCL, "
        "embedding partitioned over the GPUs, sampling on each GPU",
    )
    args = single.finish_arguments(parser, parser.parse_args(argv))
    if args.emb_dim == 0:
        parser.error("this example trains an embedding: --emb-dim must be > 0")
    if args.num_procs is not None and args.num_procs < 1:
        parser.error("--num-procs must be >= 1")
    return args


# ---------------------------------------------------------------------------- one rank
def train(rank: int, world_size: int, local_rank: int, args: argparse.Namespace) -> None:
    """The training of one rank, inside an initialised process group."""
    started = time.perf_counter()
    is_main = rank == 0
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")

    data = single.load_data(args, device)
    # Collective: every rank creates the same embedding. CPU: shared memory; CUDA: partitioned.
    embedding = single.make_embedding(
        args, data.graph.num_nodes, device=device, timeout=args.timeout
    )
    assert embedding is not None  # parse_args refuses --emb-dim 0
    model = single.make_model(args, data, embedding)
    # DDP sees model.parameters(): the dense layers only (the embedding is a plain attribute).
    ddp_model = DistributedDataParallel(
        model, device_ids=[local_rank] if device.type == "cuda" else None
    )
    dense_opt = torch.optim.Adam(ddp_model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sparse_opt = SparseAdam([embedding], lr=args.emb_lr)

    progress = single.resume_from_checkpoint(
        args, embedding, sparse_opt, model, dense_opt, show=is_main
    )

    per_rank_batch = max(1, args.batch_size // world_size)
    loader = single.train_loader(
        data, args, rank=rank, world_size=world_size, batch_size=per_rank_batch
    )
    if is_main:
        print(
            single.describe(args, data, embedding) + f"; {world_size} processes on "
            f"{args.device}, {per_rank_batch} nodes per process per step; embedding storage: "
            f"{embedding.storage_kind}",
            flush=True,
        )

    single.train_epochs(
        args,
        model,
        loader,
        data,
        dense_opt,
        sparse_opt,
        embedding,
        progress,
        partial(evaluate, model, data, device),
        trained=ddp_model,
        rank=rank,
        log_note="  (rank 0 loss)",
    )
    if is_main:
        print(single.result_line(args, data, progress, started, world_size=world_size), flush=True)


def evaluate(
    model: torch.nn.Module, data: single.NodeData, device: torch.device
) -> dict[str, float]:
    """Collective: :func:`single.evaluate` on every rank, then rank 0's accuracies everywhere,
    so that best-epoch bookkeeping agrees on every rank."""
    accuracy = single.evaluate(model, data)
    values = torch.tensor([accuracy["val"], accuracy["test"]], dtype=torch.float64, device=device)
    dist.broadcast(values, src=0)
    return {"val": values[0].item(), "test": values[1].item()}


# ---------------------------------------------------------------------------- launcher
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    num_procs = args.num_procs or (torch.cuda.device_count() if args.device == "cuda" else 2)
    launch.launch(train, args, num_procs)  # torchrun's ranks, or num_procs spawned here


if __name__ == "__main__":
    main()
