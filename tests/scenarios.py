"""The multi-process training scenario and its single-process oracle.

N ranks each train on their own batches with a local mean loss; graphemb must end with the
same tables and optimizer states as ONE process that trains on the union of the batches
with the global mean loss ``sum_r local_loss_r / N`` (the semantics of DDP). The batches
make that hard to fake: duplicate ids within a rank, ids shared across ranks (row 0 is in
every batch), one rank with an empty batch at one step, and one embedding that only rank 0
uses, at even steps only. Every embedding has its own optimizer (Adam, Adagrad, row-wise
Adagrad, SGD), so one job also runs several embeddings and optimizers side by side.
"""

from __future__ import annotations

import torch

from graphemb import NodeEmbedding
from graphemb.optim import SparseAdagrad, SparseAdam, SparseRowWiseAdagrad, SparseSGD

NUM, DIM, STEPS, LOCAL_BATCH = 37, 4, 20, 12  # 37 rows: uneven parts for 2, 3 and 4 ranks
EMPTY_STEP = 3  # the last rank has no ids at this step

OPTIMIZERS = {
    "adam": lambda embs: SparseAdam(embs, lr=0.05, betas=(0.8, 0.95), eps=1e-6),
    "adagrad": lambda embs: SparseAdagrad(embs, lr=0.1),
    "rowwise": lambda embs: SparseRowWiseAdagrad(embs, lr=0.1),
    "sgd": lambda embs: SparseSGD(embs, lr=0.2),
}
RARE = "rare"  # an extra Adam embedding used by rank 0 at even steps only


def initial_table(name: str) -> torch.Tensor:
    seed = sum(map(ord, name))
    return torch.randn(NUM, DIM, generator=torch.Generator().manual_seed(seed))


def batch(step: int, rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids and regression targets of ``rank`` at ``step``."""
    gen = torch.Generator().manual_seed(1000 * step + 10 * rank + world_size)
    if rank == world_size - 1 and step == EMPTY_STEP:
        return torch.empty(0, dtype=torch.int64), torch.empty(0, DIM)
    ids = torch.cat([torch.tensor([0]), torch.randint(0, NUM, (LOCAL_BATCH - 1,), generator=gen)])
    return ids, torch.randn(LOCAL_BATCH, DIM, generator=gen)


def local_loss(embedding: NodeEmbedding, ids: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    rows = embedding(ids.view(1, -1))  # ids of any shape: here (1, b)
    if ids.numel() == 0:
        return rows.sum()  # zero, but still a lookup (collective when partitioned)
    return ((rows[0] - target) ** 2).sum() / ids.numel()


def build(make_embedding) -> tuple[dict, dict]:
    """Embeddings (set to their initial tables) and their optimizers, by name."""
    embeddings, optimizers = {}, {}
    for name in [*OPTIMIZERS, RARE]:
        embeddings[name] = make_embedding(name)
        embeddings[name].all_set_embedding(initial_table(name))
        optimizers[name] = OPTIMIZERS.get(name, OPTIMIZERS["adam"])([embeddings[name]])
    return embeddings, optimizers


def uses_rare(step: int, rank: int) -> bool:
    return rank == 0 and step % 2 == 0


def train_steps(
    embeddings, optimizers, rank: int, world_size: int, steps, data_world: int | None = None
) -> None:
    """Train ``steps`` of the scenario whose batches come from ``data_world`` data ranks
    (default: ``world_size``), on process ``rank`` of ``world_size``.

    Process ``rank`` takes the data ranks ``rank, rank + world_size, ...``; its loss is
    scaled by ``world_size / data_world`` so that graphemb's division by the world size
    yields the global mean over data ranks whatever the number of processes.
    """
    data_world = data_world or world_size
    mine = range(rank, data_world, world_size)
    scale = world_size / data_world
    for step in steps:
        loss = 0
        uses = False
        for data_rank in mine:
            ids, target = batch(step, data_rank, data_world)
            loss = loss + sum(local_loss(embeddings[n], ids, target) for n in OPTIMIZERS)
            if uses_rare(step, data_rank):
                loss = loss + local_loss(embeddings[RARE], ids, target)
                uses = True
        if not mine:  # a process without data still looks up (collective when partitioned)
            loss = sum(embeddings[n](torch.empty(0, dtype=torch.int64)).sum() for n in OPTIMIZERS)
        if not uses and embeddings[RARE].storage.collective_lookups:
            embeddings[RARE](torch.empty(0, dtype=torch.int64))
        (loss * scale).backward()
        for opt in optimizers.values():
            opt.step()


def train_rank(rank: int, world_size: int, make_embedding) -> dict:
    """What each rank of the job runs; returns gathered tables and states, by name."""
    embeddings, optimizers = build(make_embedding)
    train_steps(embeddings, optimizers, rank, world_size, range(STEPS))
    return snapshot(embeddings, optimizers)


def train_union(world_size: int) -> dict:
    """The oracle: one process, every rank's batch, loss = sum of local losses / N."""
    embeddings, optimizers = build(lambda name: NodeEmbedding(NUM, DIM, name))
    train_steps(embeddings, optimizers, 0, 1, range(STEPS), data_world=world_size)
    return snapshot(embeddings, optimizers)


def snapshot(embeddings, optimizers) -> dict:
    out = {}
    for name, emb in embeddings.items():
        state = optimizers[name].state_dict()["state"][0]
        out[name] = {"weight": emb.all_get_embedding(), **state}
    return out


def assert_same_training(result: dict, oracle: dict, exact: bool = False) -> None:
    """Float32 tables and states equal the oracle's up to the order of summation of
    duplicate-row gradients (coalesced per rank, then at the owner): rtol 1e-5, atol 1e-6.
    Step counts are always exact; with ``exact=True`` everything is."""
    assert result.keys() == oracle.keys()
    for name in oracle:
        assert result[name].keys() == oracle[name].keys(), name
        for key, expected in oracle[name].items():
            actual = result[name][key]
            if exact or expected.dtype == torch.int64:
                assert torch.equal(actual, expected), f"{name}.{key}"
            else:
                torch.testing.assert_close(
                    actual,
                    expected,
                    rtol=1e-5,
                    atol=1e-6,
                    msg=lambda m, name=name, key=key: f"{name}.{key}: {m}",
                )
    assert not torch.equal(oracle["adam"]["weight"], initial_table("adam")), "nothing trained"
