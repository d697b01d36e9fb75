"""Hybrid parallelism: NodeEmbedding model-parallel, dense layers data-parallel with DDP.

The whole model -- embedding included, as a plain attribute -- is wrapped in
DistributedDataParallel, which therefore only ever sees the dense parameters. Each step
accumulates three micro-batches under ``no_sync()`` (embedding lookups in each), and one
dense head is used by rank 0 only (``find_unused_parameters=True``). Two ranks must end
with the dense weights and the embedding table of ONE process trained on the union of the
micro-batches with the loss ``sum over ranks and micro-batches / N``.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from _multiprocess import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from graphemb import NodeEmbedding, Partition
from graphemb.optim import SparseSGD

pytestmark = pytest.mark.multiprocess

NUM, DIM, CLASSES, STEPS, MICRO, BATCH = 29, 6, 3, 5, 3, 8


class Model(nn.Module):
    def __init__(self, embedding: NodeEmbedding):
        super().__init__()
        self.embedding = embedding
        torch.manual_seed(0)
        self.mlp = nn.Sequential(nn.Linear(DIM, 16), nn.ReLU(), nn.Linear(16, CLASSES))
        self.aux = nn.Linear(DIM, CLASSES)

    def forward(self, ids, use_aux: bool):
        h = self.embedding(ids)
        out = self.mlp(h)
        return out + self.aux(h) if use_aux else out


def micro_batch(step, rank, micro):
    gen = torch.Generator().manual_seed(100 * step + 10 * rank + micro)
    return torch.randint(0, NUM, (BATCH,), generator=gen), torch.randint(
        0, CLASSES, (BATCH,), generator=gen
    )


def make_training(embedding):
    embedding.all_set_embedding(torch.randn(NUM, DIM, generator=torch.Generator().manual_seed(3)))
    model = Model(embedding)
    # SGD, not Adam: Adam is invariant to a constant gradient scale, and a wrong
    # division by the world size must not go unnoticed.
    return model, SparseSGD([embedding], lr=0.5)


def hybrid_worker(rank, world_size, storage):
    partition = Partition.range(NUM, [0, 10, NUM]) if storage == "partitioned" else None
    embedding = NodeEmbedding(NUM, DIM, "hybrid", partition=partition, timeout=30)
    model, sparse_opt = make_training(embedding)
    ddp = DistributedDataParallel(model, find_unused_parameters=True)
    assert {n for n, _ in ddp.named_parameters()} == {
        f"module.{n}" for n, _ in model.named_parameters()
    }
    dense_opt = torch.optim.Adam(ddp.parameters(), lr=0.01)
    for step in range(STEPS):
        for micro in range(MICRO):
            sync = micro == MICRO - 1  # DDP all-reduces on the last micro-batch only
            with contextlib.nullcontext() if sync else ddp.no_sync():
                ids, labels = micro_batch(step, rank, micro)
                loss = nn.functional.cross_entropy(ddp(ids, use_aux=rank == 0), labels)
                loss.backward()
        dense_opt.step()
        sparse_opt.step()
        dense_opt.zero_grad()
    return {
        k: v.detach().clone() for k, v in model.state_dict().items()
    }, embedding.all_get_embedding()


def train_one_process(world_size):
    embedding = NodeEmbedding(NUM, DIM, "hybrid-oracle")
    model, sparse_opt = make_training(embedding)
    dense_opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(STEPS):
        total = 0
        for rank in range(world_size):
            for micro in range(MICRO):
                ids, labels = micro_batch(step, rank, micro)
                total = total + nn.functional.cross_entropy(model(ids, use_aux=rank == 0), labels)
        (total / world_size).backward()
        dense_opt.step()
        sparse_opt.step()
        dense_opt.zero_grad()
    return model.state_dict(), embedding.all_get_embedding()


@pytest.mark.parametrize("storage", ["shared", "partitioned"])
def test_ddp_dense_plus_model_parallel_embedding_equals_one_process(storage):
    results = run_ranks(hybrid_worker, 2, storage)
    dense_oracle, table_oracle = train_one_process(2)
    assert not torch.equal(
        table_oracle, make_training(NodeEmbedding(NUM, DIM, "x"))[0].embedding.weight
    )
    for dense, table in results:
        assert dense.keys() == dense_oracle.keys()
        for name in dense_oracle:
            torch.testing.assert_close(dense[name], dense_oracle[name], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(table, table_oracle, rtol=1e-5, atol=1e-6)
