"""Overlap: gradient pushes started by backward, lookups routed ahead by ``prefetch``.

The synchronous path is the reference: with ``overlap=True`` (and prefetching the next
batch's ids while the current one computes) 2 machines x 2 ranks must end with bit-identical
tables and optimizer states, and both must equal one process on the union of the batches.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: scenarios

import scenarios  # noqa: E402
from _multiprocess import run_ranks  # noqa: E402

from graphemb import NodeEmbedding  # noqa: E402
from graphemb.optim import SparseAdam  # noqa: E402

pytestmark = pytest.mark.multiprocess
MACHINES = [0, 0, 1, 1]


def make(overlap: bool):
    suffix = "-overlap" if overlap else "-sync"
    return lambda name: NodeEmbedding(
        scenarios.NUM, scenarios.DIM, name + suffix, timeout=30, machines=MACHINES,
        overlap=overlap,
    )  # fmt: skip


def lookup_ids(step: int, rank: int, world_size: int, name: str) -> torch.Tensor:
    if name == scenarios.RARE and not scenarios.uses_rare(step, rank):
        return torch.empty(0, dtype=torch.int64)
    return scenarios.batch(step, rank, world_size)[0].view(1, -1)


def train(embeddings, optimizers, rank, world_size, prefetch: bool, backwards: int = 1):
    """The scenario; with ``prefetch``, the next step's ids are routed while this step's
    backward and optimizer steps run (rows change in between: they must be read late)."""
    names = list(embeddings)
    if prefetch:
        for name in names:
            embeddings[name].prefetch(lookup_ids(0, rank, world_size, name))
    for step in range(scenarios.STEPS):
        ids, target = scenarios.batch(step, rank, world_size)
        for part in range(backwards):  # several backward passes: gradient accumulation
            loss = sum(
                scenarios.local_loss(embeddings[n], ids, target) / backwards
                for n in scenarios.OPTIMIZERS
            )
            rare = embeddings[scenarios.RARE](lookup_ids(step, rank, world_size, scenarios.RARE))
            if scenarios.uses_rare(step, rank):
                loss = loss + ((rare[0] - target) ** 2).sum() / ids.numel() / backwards
            if prefetch and step + 1 < scenarios.STEPS and part == backwards - 1:
                for name in names:
                    embeddings[name].prefetch(lookup_ids(step + 1, rank, world_size, name))
            loss.backward()
        for opt in optimizers.values():
            opt.step()


def overlap_worker(rank, world_size, backwards):
    sync, sync_opts = scenarios.build(make(overlap=False))
    train(sync, sync_opts, rank, world_size, prefetch=False, backwards=backwards)
    over, over_opts = scenarios.build(make(overlap=True))
    assert over["adam"].storage.overlaps and not sync["adam"].storage.overlaps
    train(over, over_opts, rank, world_size, prefetch=True, backwards=backwards)
    return scenarios.snapshot(sync, sync_opts), scenarios.snapshot(over, over_opts)


def test_overlap_and_prefetch_are_bit_identical_to_the_synchronous_step():
    oracle = scenarios.train_union(4)
    for sync, overlapped in run_ranks(overlap_worker, 4, 1, timeout=90):
        scenarios.assert_same_training(overlapped, sync, exact=True)
        scenarios.assert_same_training(sync, oracle)


def test_several_backward_passes_per_step_train_like_one_process():
    # Rows of the second backward go in the late push: equal up to summation order.
    oracle = scenarios.train_union(4)
    for sync, overlapped in run_ranks(overlap_worker, 4, 2, timeout=90):
        scenarios.assert_same_training(overlapped, oracle)
        scenarios.assert_same_training(sync, oracle)


def misuse_worker(rank, world_size):
    emb = NodeEmbedding(20, 2, "misuse", timeout=30, machines=MACHINES, overlap=True)
    opt = SparseAdam([emb], lr=0.1)
    emb.prefetch(torch.tensor([1, 2]))
    try:
        emb(torch.tensor([2, 1]))
    except ValueError as err:
        wrong_ids = str(err)
    emb(torch.tensor([3])).sum().backward()
    started_by_backward = emb._early_push is not None
    try:
        opt.zero_grad()
    except RuntimeError as err:
        discard = str(err)
    opt.step()
    opt.zero_grad()  # fine again after the step
    with pytest.raises(IndexError, match="node id 20 out of range"):
        emb.prefetch(torch.tensor([20]))
    return wrong_ids, discard, len(emb._prefetches), started_by_backward


def test_misuse_is_reported_clearly():
    for wrong_ids, discard, pending, started in run_ranks(misuse_worker, 4, timeout=60):
        assert started, "backward did not start the gradient push"
        assert "looked up 2 ids that are not the 2 ids of the oldest prefetch" in wrong_ids
        assert "already being pushed" in discard and "overlap=True" in discard
        assert pending == 0


def ahead_worker(rank, world_size):
    table = torch.randn(500, 4, generator=torch.Generator().manual_seed(7))
    emb = NodeEmbedding(500, 4, "ahead", timeout=30, machines=MACHINES, overlap=True)
    emb.all_set_embedding(table)
    # Growing batches (the request mailboxes are replaced on the way), all routed ahead
    # before the first is read; ranks of a machine share many ids.
    batches = [torch.arange(0, 500, 7 - k)[rank % 2 :: 2].flip(0) for k in range(4)]
    for ids in batches:
        emb.prefetch(ids)
    with torch.no_grad():
        return [emb(ids) for ids in batches], [table[ids] for ids in batches]


def test_lookups_prefetched_several_batches_ahead_read_the_right_rows():
    for got, expected in run_ranks(ahead_worker, 4, timeout=60):
        for rows, oracle in zip(got, expected, strict=True):
            assert torch.equal(rows, oracle)


def test_prefetch_without_a_process_group_is_a_checked_no_op():
    emb = NodeEmbedding(5, 2, "single", init_func=lambda t: t.uniform_(-1, 1), overlap=True)
    handle = emb.prefetch(torch.tensor([[4, 0]]))
    assert handle.plan is None and torch.equal(handle.ids, torch.tensor([4, 0]))
    assert torch.equal(emb(torch.tensor([[4, 0]]))[0], emb.weight[[4, 0]])
    with pytest.raises(TypeError, match="must be integers"):
        emb.prefetch(torch.tensor([0.5]))


def loader_worker(rank, world_size):
    from graphemb.graph import Graph
    from graphemb.sampling import NeighborSampler, SeedLoader

    gen = torch.Generator().manual_seed(0)
    graph = Graph.from_edges(torch.randint(0, 60, (300,), generator=gen),
                             torch.randint(0, 60, (300,), generator=gen))  # fmt: skip
    tables = {}
    for overlap in (False, True):
        emb = NodeEmbedding(60, 4, f"loader-{overlap}", timeout=30, machines=MACHINES,
                            overlap=overlap)  # fmt: skip
        emb.all_set_embedding(torch.linspace(-1, 1, 240).view(60, 4))
        opt = SparseAdam([emb], lr=0.05)
        loader = SeedLoader(graph, torch.arange(60), NeighborSampler([3, 3]), 4, shuffle=True,
                            prefetch=overlap, prefetch_rows=emb if overlap else None)  # fmt: skip
        for epoch in range(2):
            loader.set_epoch(epoch)
            for input_nodes, output_nodes, _ in loader:
                rows = emb(input_nodes)
                (rows.pow(2).sum() / output_nodes.numel()).backward()
                opt.step()
        assert not emb._prefetches
        tables[overlap] = (emb.all_get_embedding(), opt.state_dict()["state"][0])
    return tables


def test_seed_loader_prefetches_rows_with_identical_results():
    for tables in run_ranks(loader_worker, 4, timeout=60):
        (sync, sync_state), (over, over_state) = tables[False], tables[True]
        assert torch.equal(sync, over) and not torch.equal(sync[:1], torch.full((1, 4), -1.0))
        assert all(torch.equal(sync_state[k], over_state[k]) for k in sync_state)
