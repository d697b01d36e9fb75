"""Partitioned NodeEmbedding over torch.distributed (gloo on CPU here; NCCL in test_cuda).

Each rank stores only its rows; lookups pull rows from their owners and gradients are
pushed to them. 2 and 3 ranks, remainder and range partitions (3 ranks: uneven parts, one
rank without rows), checked against the full table and against one process trained on
the union of the batches.
"""

from __future__ import annotations

import pytest
import scenarios
import torch
from _multiprocess import run_ranks

from graphemb import NodeEmbedding, Partition

pytestmark = pytest.mark.multiprocess

PARTITIONS = {
    "remainder": lambda num, world: Partition.remainder(num, world),
    # 3 ranks: sizes 20, 0, 17 -- uneven, and rank 1 owns nothing
    "range": lambda num, world: Partition.range(
        num, [0, 20, num] if world == 2 else [0, 20, 20, num]
    ),
}


def partitioned_worker(rank, world_size, mode):
    def make(name):
        return NodeEmbedding(
            scenarios.NUM,
            scenarios.DIM,
            name,
            timeout=30,
            partition=PARTITIONS[mode](scenarios.NUM, world_size),
        )

    # lookups of every shape, with duplicates, empty on one rank, batch not divisible by N
    table = torch.randn(scenarios.NUM, scenarios.DIM, generator=torch.Generator().manual_seed(5))
    probe = make("probe")
    probe.all_set_embedding(table)
    gen = torch.Generator().manual_seed(rank)
    requests = [
        torch.randint(0, scenarios.NUM, (7, 3), generator=gen),
        torch.randint(0, scenarios.NUM, (5 + rank,), generator=gen),
        torch.empty(0, dtype=torch.int64) if rank == 1 else torch.tensor([36, 0, 36]),
    ]
    lookups = []
    with torch.no_grad():
        for ids in requests:
            lookups.append((ids, probe(ids)))
    local = (probe.weight.clone(), probe.partition.global_ids(rank))
    return {
        "training": scenarios.train_rank(rank, world_size, make),
        "lookups": lookups,
        "local": local,
        "kind": probe.storage_kind,
        "table": table,
    }


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("mode", ["remainder", "range"])
def test_partitioned_lookups_and_training_equal_one_process(world_size, mode):
    results = run_ranks(partitioned_worker, world_size, mode)
    oracle = scenarios.train_union(world_size)
    owned = []
    for result in results:
        assert result["kind"] == "partitioned"
        table = result["table"]
        for ids, rows in result["lookups"]:
            assert rows.shape == (*ids.shape, scenarios.DIM)
            assert torch.equal(rows, table[ids])
        weight, global_ids = result["local"]
        assert torch.equal(weight, table[global_ids]), "a rank stores rows it does not own"
        owned.append(global_ids)
        scenarios.assert_same_training(result["training"], oracle)
    assert torch.equal(torch.cat(owned).sort().values, torch.arange(scenarios.NUM))
    if mode == "range" and world_size == 3:
        assert owned[1].numel() == 0


ONE_PART = {
    "remainder": lambda num: Partition.remainder(num, 1),
    "blocks": lambda num: Partition.blocks(num, 1, block_size=4),
    "range": lambda num: Partition.range(num, [0, num]),
}


def _no_exchange(*args, **kwargs):
    raise AssertionError("a rank alone exchanged rows")


def alone_worker(rank, world_size, mode):
    def make(name):
        emb = NodeEmbedding(
            scenarios.NUM, scenarios.DIM, name, timeout=30, partition=ONE_PART[mode](scenarios.NUM)
        )
        for method in ("pull", "plan_pull", "push"):
            setattr(emb.storage.exchange, method, _no_exchange)
        return emb

    training = scenarios.train_rank(rank, world_size, make)
    probe = make("probe")
    probe.all_set_embedding(_numbered_table())
    ids = torch.tensor([5, 0, 36, 5])
    with torch.no_grad():
        rows = probe(ids)
        in_place = probe.read_in_place(ids, lambda weight, flat: 2 * weight[flat], lambda g: g)
    return {"training": training, "kind": probe.storage_kind, "rows": rows,
            "in_place": in_place, "weight": probe.weight.clone()}  # fmt: skip


def _numbered_table() -> torch.Tensor:
    return torch.arange(scenarios.NUM * scenarios.DIM, dtype=torch.float32).view(scenarios.NUM, -1)


@pytest.mark.parametrize("mode", list(ONE_PART))
def test_partitioned_alone_trains_as_one_process_without_exchanging(mode):
    """A process group of one rank: every row is the rank's, at its global index, and
    nothing goes through the exchange (its pulls and pushes raise here); the training is
    exactly one process's."""
    (result,) = run_ranks(alone_worker, 1, mode)
    assert result["kind"] == "partitioned"
    scenarios.assert_same_training(result["training"], scenarios.train_union(1), exact=True)
    table = _numbered_table()
    assert torch.equal(result["weight"], table)
    ids = torch.tensor([5, 0, 36, 5])
    assert torch.equal(result["rows"], table[ids])
    assert result["in_place"] is not None and torch.equal(result["in_place"], 2 * table[ids])


def gather_to_one_worker(rank, world_size):
    emb = NodeEmbedding(
        10,
        2,
        "to-one",
        partition=Partition.remainder(10, world_size),
        init_func=lambda t: t.fill_(rank + 1.0),
        timeout=30,
    )
    return emb.all_get_embedding(dst=1)


def test_all_get_embedding_to_one_rank():
    none, table = run_ranks(gather_to_one_worker, 2)
    assert none is None
    # remainder partition: even rows on rank 0 (filled 1.0), odd rows on rank 1 (2.0)
    assert torch.equal(table[:, 0], torch.tensor([1.0, 2.0] * 5))


BAD_PARTITIONS = [
    ({"partition": Partition.remainder(10, 3)}, "3 parts but the world size is 2"),
    ({"partition": Partition.remainder(12, 2)}, "covers 12 rows"),
    ({"partition": "range"}, "graphemb.Partition"),
]


def bad_partition_worker(rank, world_size):
    messages = []
    for kwargs, _ in BAD_PARTITIONS:
        try:
            NodeEmbedding(10, 2, "bad-partition", **kwargs)
        except (ValueError, TypeError) as err:
            messages.append(str(err))
        else:
            messages.append("no error")
    return messages


def test_bad_partition_is_rejected_on_every_rank():
    for messages in run_ranks(bad_partition_worker, 2):
        for (_, expected), actual in zip(BAD_PARTITIONS, messages, strict=True):
            assert expected in actual
