"""The compiled sort of a step's rows (``graphemb_kernels.sort_rows``): equal to
``torch.sort(ids, stable=True)`` on ids of every shape the optimizers give it (random,
mostly sorted as a sampled batch lists them, with ties), written into ``out`` when given;
bad ids or outputs refused by name with nothing changed.
"""

from __future__ import annotations

import pytest
import torch

from graphemb.optim import kernels

if kernels.unavailable_reason():
    pytest.skip(kernels.unavailable_reason(), allow_module_level=True)
graphemb_kernels = kernels.module()


@pytest.mark.parametrize(
    "num_rows, count",
    [(1, 5), (2, 40), (1000, 3000), (2**20, 5000), (2**20, 300_000), (2**33, 100_000),
     (2**40 + 7, 2000), (2**62, 3000), (10, 0)],
)  # fmt: skip
def test_sort_rows_equals_torch_stable_sort(num_rows, count):
    """Oracle: torch.sort(stable=True); 0 to 4 radix passes (an odd and an even count of
    them, the result ending in either output), ids and positions beyond one 64-bit word
    (2^62 rows), many duplicates."""
    gen = torch.Generator().manual_seed(num_rows % 1000 + count)
    high = min(num_rows, 2**62)
    ids = torch.randint(0, high, (count,), generator=gen, dtype=torch.int64)
    if count:
        ids[:: max(1, count // 7)] = high - 1  # the largest row, repeated
        ids[1 :: max(1, count // 5)] = 0
    index, order = graphemb_kernels.sort_rows(ids, num_rows)
    expected_index, expected_order = torch.sort(ids, stable=True)
    assert torch.equal(index, expected_index)
    assert torch.equal(order, expected_order)


def _block_layout(gen, num_rows, seeds, layers):
    """Ids as a sampled batch lists them: the seeds in their order, then each layer's new
    sources ascending (some equal to ids before them, which the batch itself never has)."""
    parts = [torch.randint(0, num_rows, (seeds,), generator=gen)]
    for count in layers:
        parts.append(torch.randint(0, num_rows, (count,), generator=gen))
        ties = min(count // 10, seeds)
        parts[-1][:ties] = parts[0][:ties]  # ties with the head
        parts[-1] = parts[-1].sort().values
    return torch.cat(parts)


@pytest.mark.parametrize(
    "make_ids",
    [
        pytest.param(lambda g: _block_layout(g, 10**6, 1024, [4400, 36500, 245000]), id="batch"),
        pytest.param(lambda g: _block_layout(g, 50, 30, [40, 80]), id="few-rows-many-ties"),
        pytest.param(lambda g: torch.arange(5000) // 3, id="sorted-with-ties"),
        pytest.param(lambda g: torch.full((777,), 4), id="all-equal"),
        pytest.param(
            lambda g: torch.cat([torch.arange(500, 0, -1), torch.arange(500)]),
            id="tail-exactly-half",
        ),
        pytest.param(
            lambda g: torch.cat([torch.arange(500, 0, -1), torch.arange(499)]),
            id="tail-just-short-of-half",
        ),
        pytest.param(lambda g: torch.tensor([7]), id="one-id"),
        pytest.param(lambda g: torch.tensor([3, 1]), id="two-descending"),
    ],
)
def test_sort_rows_of_mostly_sorted_ids_equals_torch_stable_sort(make_ids):
    """Ids ending in a long ascending run (merged with their sorted head) and ids that do
    not (radix sorted): oracle torch.sort(stable=True), ties between head and tail
    included."""
    ids = make_ids(torch.Generator().manual_seed(11)).to(torch.int64).contiguous()
    index, order = graphemb_kernels.sort_rows(ids, max(int(ids.max()) + 1, 10**6))
    expected_index, expected_order = torch.sort(ids, stable=True)
    assert torch.equal(index, expected_index)
    assert torch.equal(order, expected_order)


@pytest.mark.parametrize(
    "ids, num_rows, error, message",
    [
        (torch.tensor([0, 5, 2]), 5, IndexError, r"ids\[1\] = 5 is out of range for a table of 5"),
        (torch.tensor([1, -2]), 5, IndexError, r"ids\[1\] = -2 is out of range"),
        (torch.tensor([1, 2], dtype=torch.int32), 5, TypeError, r"ids must be int64"),
        (torch.tensor([[1, 2]]), 5, ValueError, r"ids must have 1 dimension"),
        (torch.tensor([1, 2]), -1, ValueError, r"num_rows must be >= 0, got -1"),
    ],
)
def test_sort_rows_bad_input_names_the_value(ids, num_rows, error, message):
    with pytest.raises(error, match=rf"graphemb_kernels\.sort_rows: {message}"):
        graphemb_kernels.sort_rows(ids, num_rows)


def test_sort_rows_writes_into_out():
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 5000, (20_000,), generator=gen)
    out = (torch.full_like(ids, -7), torch.full_like(ids, -7))
    index, order = graphemb_kernels.sort_rows(ids, 5000, out)
    assert index is out[0] and order is out[1]
    expected_index, expected_order = torch.sort(ids, stable=True)
    assert torch.equal(index, expected_index) and torch.equal(order, expected_order)


@pytest.mark.parametrize(
    "make_out, message",
    [
        (lambda ids: (torch.zeros(3), torch.empty_like(ids)), r"out\[0\] must be int64"),
        (lambda ids: (torch.empty_like(ids), torch.empty(4, dtype=torch.int64)),
         r"out\[1\] must hold 3 ids, as ids does, got 4"),
        (lambda ids: (ids, torch.empty_like(ids)), r"ids, out\[0\] and out\[1\] must not overlap"),
        (lambda ids: (torch.empty(3, 2, dtype=torch.int64)[:, 0], torch.empty_like(ids)),
         r"out\[0\] must be contiguous"),
    ],
)  # fmt: skip
def test_sort_rows_bad_out_names_it_and_changes_nothing(make_out, message):
    ids = torch.tensor([2, 0, 1])
    out = make_out(ids)
    before = [ids.clone(), *(t.clone() for t in out)]
    with pytest.raises((TypeError, ValueError), match=rf"graphemb_kernels\.sort_rows: {message}"):
        graphemb_kernels.sort_rows(ids, 3, out)
    for tensor, old in zip([ids, *out], before, strict=True):
        assert torch.equal(tensor, old)
