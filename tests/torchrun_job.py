"""A job for `torchrun`: trains the shared scenario with shared-memory embeddings.

Usage: torchrun --standalone --nproc_per_node N torchrun_job.py OUT_PREFIX
Writes OUT_PREFIX.rank<r>.pt. With GRAPHEMB_TEST_HANG_AFTER_STEPS=k every rank prints a
marker after k steps and waits to be killed (for the kill test).
"""

import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenarios  # noqa: E402

from graphemb import NodeEmbedding  # noqa: E402


def main(out_prefix: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    hang_after = int(os.environ.get("GRAPHEMB_TEST_HANG_AFTER_STEPS", "0"))

    def make(name):
        return NodeEmbedding(scenarios.NUM, scenarios.DIM, name, timeout=60)

    if hang_after:
        embeddings, optimizers = scenarios.build(make)
        for step in range(hang_after):
            ids, target = scenarios.batch(step, rank, world_size)
            sum(scenarios.local_loss(e, ids, target) for e in embeddings.values()).backward()
            for opt in optimizers.values():
                opt.step()
        dist.barrier()
        print("GRAPHEMB_TEST_HANGING", flush=True)
        time.sleep(600)  # killed by the test long before
        return
    result = scenarios.train_rank(rank, world_size, make)
    torch.save(result, f"{out_prefix}.rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
