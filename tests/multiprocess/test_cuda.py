"""CUDA paths: partitioned storage on a GPU under NCCL (world size 1), and CPU
shared-memory tables feeding a GPU model. Skipped without a CUDA device; single-GPU local
storage is covered by the ``device`` fixture of test_optim.py and test_embedding.py."""

from __future__ import annotations

import pytest
import scenarios
import torch
from _multiprocess import run_ranks

from graphemb import NodeEmbedding

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.multiprocess,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def nccl_worker(rank, world_size):
    def make(name):
        return NodeEmbedding(scenarios.NUM, scenarios.DIM, name, device="cuda", timeout=60)

    probe = make("probe")
    assert probe.storage_kind == "partitioned" and probe.weight.is_cuda
    table = torch.randn(scenarios.NUM, scenarios.DIM)
    probe.all_set_embedding(table)
    ids = torch.randint(0, scenarios.NUM, (4, 5), device="cuda")
    looked_up = probe(ids)
    assert looked_up.is_cuda
    return {
        "lookup": (ids.cpu(), looked_up.cpu(), table),
        "training": scenarios.train_rank(rank, world_size, make),
    }


def test_nccl_world_size_one_equals_cpu():
    (result,) = run_ranks(nccl_worker, 1, backend="nccl")
    ids, rows, table = result["lookup"]
    assert torch.equal(rows, table[ids])
    scenarios.assert_same_training(result["training"], scenarios.train_union(1))


def shared_to_gpu_worker(rank, world_size):
    emb = NodeEmbedding(10, 3, "to-gpu", init_func=lambda t: t.fill_(1.0), timeout=30)
    from graphemb.optim import SparseSGD

    opt = SparseSGD([emb], lr=0.5)
    rows = emb(torch.tensor([rank, 9]), device="cuda")
    assert rows.is_cuda and emb.storage_kind == "shared"
    rows.sum().backward()
    opt.step()
    return emb.all_get_embedding()


def test_cpu_shared_memory_table_with_gpu_lookups():
    for table in run_ranks(shared_to_gpu_worker, 2):
        expected = torch.ones(10, 3)
        expected[[0, 1]] -= 0.25  # each hit by one rank: gradient 1, / world size 2
        expected[9] -= 0.5  # hit by both ranks
        assert torch.equal(table, expected)
