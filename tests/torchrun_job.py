"""A job for `torchrun`: trains the shared scenario with shared-memory embeddings.

Usage: torchrun --standalone --nproc_per_node N torchrun_job.py OUT_PREFIX
Writes OUT_PREFIX.rank<r>.pt.
"""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenarios  # noqa: E402

from graphemb import NodeEmbedding  # noqa: E402


def main(out_prefix: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()

    def make(name):
        return NodeEmbedding(scenarios.NUM, scenarios.DIM, name, timeout=60)

    result = scenarios.train_rank(rank, world_size, make)
    torch.save(result, f"{out_prefix}.rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
