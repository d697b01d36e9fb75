"""Partition index math against brute-force enumeration."""

from __future__ import annotations

import pytest
import torch

from graphemb import Partition

CASES = [
    Partition.remainder(10, 1),
    Partition.remainder(10, 3),
    Partition.remainder(2, 4),          # more parts than rows: parts 2 and 3 own nothing
    Partition.range(10, [0, 3, 3, 10]),  # an empty middle part
    Partition.even_range(11, 4),
]


def brute_force_owners(part: Partition) -> list[int]:
    if part.mode == "remainder":
        return [i % part.num_parts for i in range(part.num_embeddings)]
    b = part.boundaries
    return [next(p for p in range(part.num_parts) if b[p] <= i < b[p + 1])
            for i in range(part.num_embeddings)]


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


def test_round_trip_through_dict_and_equality():
    part = Partition.range(10, [0, 3, 3, 10])
    assert Partition.from_dict(part.to_dict()) == part
    assert part != Partition.remainder(10, 3)
    assert len({part, Partition.from_dict(part.to_dict())}) == 1


@pytest.mark.parametrize("make, message", [
    (lambda: Partition.remainder(0, 2), "num_embeddings"),
    (lambda: Partition.remainder(10, 0), "num_parts"),
    (lambda: Partition(10, 2, "hash"), "'hash'"),
    (lambda: Partition.range(10, [0, 5]), "end at num_embeddings=10"),
    (lambda: Partition.range(10, [1, 5, 10]), "start at 0"),
    (lambda: Partition.range(10, [0, 7, 5, 10]), "non-decreasing"),
    (lambda: Partition.range(10, [0, 2.5, 10]), "ints"),
    (lambda: Partition(10, 2, "range"), "needs boundaries"),
    (lambda: Partition(10, 3, "range", [0, 5, 10]), "needs 4 boundaries"),
    (lambda: Partition.remainder(10, 2).local_size(2), "part 2 out of range"),
])
def test_bad_partitions(make, message):
    with pytest.raises(ValueError, match=message):
        make()
