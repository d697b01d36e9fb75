"""The compiled gather of table rows (``csrc/storage/gather_rows.cpp``) against
``torch.index_select``, and the lookups that go through it (``index_rows``)."""

from __future__ import annotations

import pytest
import torch

from graphemb import _compiled
from graphemb.distributed.huge_pages import index_rows

kernels = _compiled.compiled_module()
pytestmark = pytest.mark.skipif(
    kernels is None or _compiled.disabled(),
    reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)",
)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.uint8]
)
@pytest.mark.parametrize("row_shape", [(), (5,), (64,), (3, 7)])
def test_rows_equal_index_select(dtype, row_shape):
    gen = torch.Generator().manual_seed(len(row_shape))
    table = (torch.rand(300, *row_shape, generator=gen) * 100).to(dtype)
    ids = torch.randint(0, 300, (1000,), generator=gen)  # duplicates, any order
    out = torch.empty(1000, *row_shape, dtype=dtype)
    assert kernels.gather_rows(table, ids, out) is out
    assert torch.equal(out, torch.index_select(table, 0, ids))


def test_many_rows_on_every_thread_equal_index_select():
    """Enough ids for every thread's share, each share's first rows prefetched before its
    loop and its last 16 not prefetched again."""
    table = torch.randn(50_000, 33)
    ids = torch.randint(0, 50_000, (100_003,), generator=torch.Generator().manual_seed(3))
    out = torch.empty(ids.numel(), 33)
    kernels.gather_rows(table, ids, out)
    assert torch.equal(out, table[ids])


def test_no_ids_write_nothing():
    out = torch.empty(0, 4)
    kernels.gather_rows(torch.randn(10, 4), torch.empty(0, dtype=torch.int64), out)
    assert out.shape == (0, 4)


@pytest.mark.parametrize("bad, position", [(-1, 70_000), (100, 3), (1 << 40, 99_999)])
def test_a_bad_id_is_named_and_nothing_is_written(bad, position):
    table = torch.randn(100, 8)
    ids = torch.randint(0, 100, (100_000,), generator=torch.Generator().manual_seed(0))
    ids[position] = bad
    ids[position + 1 :][:5] = bad  # later bad ids: the first one is named
    out = torch.full((ids.numel(), 8), 7.0)
    with pytest.raises(IndexError, match=rf"ids\[{position}\] = {bad} is out of range .* 100 rows"):
        kernels.gather_rows(table, ids, out)
    assert torch.equal(out, torch.full_like(out, 7.0))


@pytest.mark.parametrize(
    "case, message",
    [
        ("short out", r"out must be torch.float32 of shape \[6, 4\], got torch.float32 of"),
        ("other dtype", r"out must be torch.float32 of shape \[6, 4\], got torch.float64"),
        ("overlap", "out must not overlap table"),
        ("int32 ids", "ids must be int64"),
        ("strided table", "table must be contiguous"),
    ],
)
def test_bad_arguments_are_refused(case, message):
    table = torch.randn(10, 4)
    ids = torch.tensor([0, 1, 2, 3, 4, 5])
    out = torch.empty(6, 4)
    if case == "short out":
        out = torch.empty(5, 4)
    elif case == "other dtype":
        out = torch.empty(6, 4, dtype=torch.float64)
    elif case == "overlap":
        out = table[2:8]
    elif case == "int32 ids":
        ids = ids.int()
    elif case == "strided table":
        table = torch.randn(4, 10).t()
    before = table.clone()
    with pytest.raises((ValueError, TypeError), match=message):
        kernels.gather_rows(table, ids, out)
    assert torch.equal(table, before)


def test_index_rows_takes_the_kernel_for_contiguous_cpu_tables(monkeypatch):
    calls = []
    gather = kernels.gather_rows
    monkeypatch.setattr(kernels, "gather_rows", lambda *a: calls.append(1) or gather(*a))
    table, ids = torch.randn(20, 3), torch.tensor([4, 4, 19, 0])
    assert torch.equal(index_rows(table, ids), table[ids]) and calls == [1]
    assert torch.equal(index_rows(table.t().contiguous().t(), ids), table[ids]) and calls == [1]
    monkeypatch.setenv(_compiled.DISABLE_VARIABLE, "1")
    assert torch.equal(index_rows(table, ids), table[ids]) and calls == [1]
