"""Partition index math against brute-force enumeration."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphemb import Partition

CASES = [
    Partition.remainder(10, 1),
    Partition.remainder(10, 3),
    Partition.remainder(2, 4),  # more parts than rows: parts 2 and 3 own nothing
    Partition.range(10, [0, 3, 3, 10]),  # an empty middle part
    Partition.even_range(11, 4),
    Partition.blocks(23, 3, 4),  # the last round is partial: parts own 8, 8 and 7 rows
    Partition.blocks(5, 3, 4),  # fewer rows than one round: part 2 owns nothing
    Partition.blocks(12, 2, 1),  # blocks of one row: remainder's assignment
]


def brute_force_owners(part: Partition) -> list[int]:
    if part.mode == "remainder":
        return [i % part.num_parts for i in range(part.num_embeddings)]
    if part.mode == "blocks":  # deal the blocks out one at a time
        owners, block = [], part.block_size
        for start in range(0, part.num_embeddings, block):
            turn = start // block
            owners += [turn % part.num_parts] * min(block, part.num_embeddings - start)
        return owners
    b = part.boundaries
    return [
        next(p for p in range(part.num_parts) if b[p] <= i < b[p + 1])
        for i in range(part.num_embeddings)
    ]


@pytest.mark.parametrize("part", CASES, ids=repr)
def test_owner_local_and_global_ids_agree_with_enumeration(part, device):
    owners = brute_force_owners(part)
    ids = torch.arange(part.num_embeddings, device=device)
    assert part.owner(ids).tolist() == owners
    for p in range(part.num_parts):
        mine = [i for i, o in enumerate(owners) if o == p]  # ascending = local order
        assert part.local_size(p) == len(mine)
        assert part.global_ids(p, device=device).tolist() == mine
        local = part.to_local(torch.tensor(mine, dtype=torch.int64, device=device))
        assert local.tolist() == list(range(len(mine)))
        assert part.to_global(local, p).tolist() == mine
    assert sum(part.local_sizes()) == part.num_embeddings


def test_even_range_sizes():
    assert Partition.even_range(11, 4).local_sizes() == [3, 3, 3, 2]


@pytest.mark.parametrize(
    "part",
    [Partition.range(10, [0, 3, 3, 10]), Partition.blocks(10, 3, 2), Partition.remainder(10, 3)],
    ids=repr,
)
def test_round_trip_through_dict_and_equality(part):
    assert Partition.from_dict(part.to_dict()) == part
    assert len({part, Partition.from_dict(part.to_dict())}) == 1
    others = {Partition.remainder(10, 3), Partition.blocks(10, 3, 2), Partition.blocks(10, 3, 5)}
    assert len(others - {part}) == len(others) - (part in others)


def test_a_dict_written_before_blocks_existed_still_loads():
    old = {"mode": "remainder", "num_embeddings": 10, "num_parts": 3, "boundaries": None}
    assert Partition.from_dict(old) == Partition.remainder(10, 3)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Partition.remainder(0, 2), "num_embeddings"),
        (lambda: Partition.remainder(10, 0), "num_parts"),
        (lambda: Partition.blocks(10, 2, 0), "block_size"),
        (lambda: Partition(10, 2, "blocks"), "needs a block_size"),
        (lambda: Partition(10, 2, "remainder", block_size=3), "takes no block_size"),
        (lambda: Partition(10, 2, "range"), "needs boundaries"),
        (lambda: Partition(10, 2, "hash"), "'hash'"),
        (lambda: Partition.range(10, [0, 5]), "end at num_embeddings=10"),
        (lambda: Partition.range(10, [1, 5, 10]), "start at 0"),
        (lambda: Partition.range(10, [0, 7, 5, 10]), "non-decreasing"),
        (lambda: Partition.range(10, [0, 2.5, 10]), "ints"),
        (lambda: Partition(10, 2, "range"), "needs boundaries"),
        (lambda: Partition(10, 3, "range", [0, 5, 10]), "needs 4 boundaries"),
        (lambda: Partition.remainder(10, 2).local_size(2), "part 2 out of range"),
    ],
)
def test_bad_partitions(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "make",
    [
        lambda: Partition.remainder(np.int64(10), np.int32(3)),
        lambda: Partition.remainder(torch.tensor(10), torch.tensor(3)),
        lambda: Partition.range(np.int64(10), np.array([0, 3, 3, 10])),
        lambda: Partition.range(10, torch.tensor([0, 3, 3, 10])),
        lambda: Partition.range(10, [np.int64(0), np.int32(3), 3, torch.tensor(10)]),
        lambda: Partition.even_range(np.int64(11), torch.tensor(4)),
    ],
    ids=[
        "remainder-numpy",
        "remainder-tensor",
        "range-numpy",
        "range-tensor",
        "range-mixed",
        "even-range",
    ],
)
def test_integer_like_sizes_give_the_same_partition(make):
    part = make()
    assert type(part.num_embeddings) is int and type(part.num_parts) is int
    owners = brute_force_owners(part)
    assert part.owner(torch.arange(part.num_embeddings)).tolist() == owners
    for p in (np.int64(1), torch.tensor(1)):
        mine = [i for i, o in enumerate(owners) if o == 1]
        assert part.local_size(p) == len(mine)
        assert part.global_ids(p).tolist() == mine
        assert part.to_global(torch.arange(len(mine)), p).tolist() == mine
    assert Partition.from_dict(part.to_dict()) == part  # plain ints in the description


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Partition.remainder(np.float64(10.0), 2), "num_embeddings.*10.0"),
        (lambda: Partition.remainder(10, True), "num_parts.*True"),
        (lambda: Partition.range(10, np.array([0, 2.5, 10])), "ints"),
        (lambda: Partition.range(10, torch.tensor([0.0, 5.0, 10.0])), "ints"),
        (lambda: Partition.remainder(10, 2).local_size(1.0), "part.*1.0"),
        (lambda: Partition.remainder(10, 2).global_ids(np.int64(2)), "part 2 out of range"),
    ],
)
def test_sizes_that_are_not_integers_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_partitioned_storage_without_a_process_group_is_refused():
    from graphemb.storage.partitioned import PartitionedStorage

    partition = Partition.remainder(10, 2)
    with pytest.raises(ValueError, match="PartitionedStorage 'rows' needs an exchange.*None"):
        PartitionedStorage("rows", 10, torch.device("cpu"), partition)
