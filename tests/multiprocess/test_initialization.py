"""Layout-independent initialisation: ``init_func(table, ids)`` gives the same table on one
process, shared-memory ranks, partitioned ranks and machines of ranks; an init that fails on
a share is one clear error on every rank; chunked parallel filling equals one call.

The oracle of every layout is a plain tensor filled in this process by the same function of
the row ids, without graphemb.
"""

from __future__ import annotations

import functools
import os
import sys

import pytest
import torch
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: scenarios

from _multiprocess import run_ranks  # noqa: E402

import graphemb.storage.initialization as initialization  # noqa: E402
from graphemb import NodeEmbedding, Partition  # noqa: E402
from graphemb.storage.initialization import (  # noqa: E402
    describe_ids,
    fill_by_id,
    takes_ids,
    uniform_by_id,
)

NUM, DIM = 301, 5  # uneven shares on every layout
SEED = 11


def rows_of(rows: torch.Tensor, ids: torch.Tensor) -> None:
    """A user's init: each row a smooth function of its global id."""
    columns = torch.arange(rows.shape[1], dtype=torch.float64)
    rows.copy_(torch.sin(ids.to(torch.float64)[:, None] * 0.37 + columns * 1.3))


def expected_tables() -> dict[str, torch.Tensor]:
    ids = torch.arange(NUM)
    by_function = torch.empty(NUM, DIM)
    rows_of(by_function, ids)
    uniform = torch.empty(NUM, DIM)
    uniform_by_id(-0.5, 0.5, seed=SEED)(uniform, ids)
    return {"function": by_function, "uniform": uniform}


LAYOUTS = {
    # name: (world size, NodeEmbedding keyword arguments, expected storage kind)
    "shared": (2, {}, "shared"),
    "partitioned": (3, {"partition": Partition.remainder(NUM, 3)}, "partitioned"),
    "partitioned-range": (2, {"partition": Partition.range(NUM, [0, 100, NUM])}, "partitioned"),
    "machines": (4, {"machines": [0, 0, 1, 1]}, "hierarchical"),
}


def build_worker(rank, world_size, layout):
    kwargs = LAYOUTS[layout][1]
    tables, kinds = {}, set()
    for name, init in (("function", rows_of), ("uniform", uniform_by_id(-0.5, 0.5, seed=SEED))):
        emb = NodeEmbedding(NUM, DIM, f"init-{name}", init_func=init, timeout=30, **kwargs)
        tables[name] = emb.all_get_embedding()
        kinds.add(emb.storage_kind)
    return tables, kinds


def test_one_process_table_equals_the_oracle():
    expected = expected_tables()
    for name, init in (("function", rows_of), ("uniform", uniform_by_id(-0.5, 0.5, seed=SEED))):
        emb = NodeEmbedding(NUM, DIM, f"init-{name}", init_func=init)
        assert torch.equal(emb.weight, expected[name]), name


@pytest.mark.multiprocess
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_ids_aware_init_gives_the_same_table_on_every_layout(layout):
    world_size, _, kind = LAYOUTS[layout]
    expected = expected_tables()
    for rank, (tables, kinds) in enumerate(run_ranks(build_worker, world_size, layout)):
        assert kinds == {kind}
        for name, table in tables.items():
            assert torch.equal(table, expected[name]), f"{layout}, rank {rank}, init {name}"


def failing_worker(rank, world_size, layout, init_kind):
    kwargs = LAYOUTS[layout][1]
    prepared = torch.randn(NUM, DIM)
    init = {
        "copy a full table": lambda table: table.copy_(prepared),
        "fails on row 0's share": lambda table, ids: 1 / 0 if bool((ids == 0).any()) else None,
    }[init_kind]
    try:
        NodeEmbedding(NUM, DIM, "init-fails", init_func=init, timeout=30, **kwargs)
    except (ValueError, TypeError) as err:
        return type(err).__name__, str(err)
    return None


@pytest.mark.multiprocess
@pytest.mark.parametrize("layout", ["partitioned", "machines"])
def test_a_full_table_copied_by_init_is_one_clear_error_on_every_rank(layout):
    world_size, _, kind = LAYOUTS[layout]
    results = run_ranks(failing_worker, world_size, layout, "copy a full table")
    for rank, result in enumerate(results):
        assert result is not None, f"rank {rank} did not raise"
        kind_name, message = result
        assert kind_name == "ValueError", (rank, message)
        # Every rank's share fails on its own: each names its layout, rows and the way out.
        assert f"{kind} layout" in message and "all_set_embedding" in message, (rank, message)
        assert f"of {NUM}" in message and "rows" in message, (rank, message)


@pytest.mark.multiprocess
def test_an_init_failing_on_one_rank_stops_every_rank_at_once():
    results = run_ranks(failing_worker, 3, "partitioned", "fails on row 0's share")
    kind_name, message = results[0]
    assert kind_name == "ValueError"
    assert "ZeroDivisionError" in message and "rows 0, 3, 6" in message
    for rank in (1, 2):  # their own shares were fine: they name rank 0 and its error
        kind_name, message = results[rank]
        assert kind_name == "ValueError", message
        assert "failed on rank 0" in message and "ZeroDivisionError" in message, message


def test_chunked_parallel_fill_equals_one_call(monkeypatch):
    monkeypatch.setattr(initialization, "ROWS_PER_STREAM", 64)
    monkeypatch.setattr(initialization, "_CHUNK_BYTES", 64 * 3 * 4 * 2)  # 2 streams a chunk
    num = 64 * 50 + 17  # a partial last chunk
    init = uniform_by_id(-1.0, 2.0, seed=5)
    for dtype, rows_per_chunk in ((torch.float32, 128), (torch.bfloat16, 256)):
        whole = torch.empty(num, 3, dtype=dtype)
        init(whole, torch.arange(num))  # one call, one thread
        chunked = torch.zeros(num, 3, dtype=dtype)
        calls: list[int] = []

        def counting(rows, ids, calls=calls):
            calls.append(ids.numel())
            init(rows, ids)

        fill_by_id(chunked, counting, lambda a, b: torch.arange(a, b), workers=3)
        assert len(calls) == -(-num // rows_per_chunk) and sum(calls) == num
        assert torch.equal(chunked, whole)
    # Any subset of ids, in any order (a partition's share): the same rows.
    ids = torch.cat([torch.arange(num - 1, 0, -7), torch.tensor([0])])
    share = torch.empty(ids.numel(), 3, dtype=torch.bfloat16)
    init(share, ids)
    assert torch.equal(share, whole[ids])


def test_fill_by_id_checks_returned_tensors_and_raises_the_first_error():
    table = torch.zeros(10, 2)

    def every_row(start, stop):
        return torch.arange(start, stop)

    fill_by_id(table, lambda rows, ids: ids[:, None].expand(-1, 2).float(), every_row)
    assert torch.equal(table[:, 0], torch.arange(10.0))
    with pytest.raises(ValueError, match=r"returned shape \(3,\)"):
        fill_by_id(table, lambda rows, ids: torch.zeros(3), every_row)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_uniform_by_id_is_uniform_and_seeded(dtype):
    values = torch.empty(4000, 8, dtype=dtype)
    uniform_by_id(-2.0, 3.0, seed=1)(values, torch.arange(4000))
    values = values.float()
    assert -2.0 <= values.min() and values.max() <= 3.0
    if dtype == torch.float32:
        result = stats.kstest(values.flatten().numpy(), stats.uniform(loc=-2.0, scale=5.0).cdf)
        assert result.pvalue > 1e-3, result
    else:  # bfloat16 rounds to a coarse grid: compare moments with the uniform's instead
        assert abs(values.mean() - 0.5) < 0.02 and abs(values.var() - 25 / 12) < 0.05
    other = torch.empty(4000, 8, dtype=dtype)
    uniform_by_id(-2.0, 3.0, seed=2)(other, torch.arange(4000))
    assert not torch.equal(values, other.float())
    # rows of different streams are not copies of each other
    step = initialization.ROWS_PER_STREAM
    assert not torch.equal(values[:8], values[step : step + 8])
    with pytest.raises(ValueError, match="low <= high"):
        uniform_by_id(1.0, 0.0)


def test_two_required_arguments_select_the_ids_aware_form():
    assert takes_ids(lambda table, ids: None)
    assert takes_ids(rows_of)
    assert not takes_ids(lambda table: None)
    assert not takes_ids(torch.nn.init.uniform_)  # (tensor, a=0.0, b=1.0, ...)
    assert not takes_ids(functools.partial(torch.nn.init.normal_, std=0.1))
    assert not takes_ids(torch.Tensor.zero_)  # no signature


def test_describe_ids():
    assert describe_ids(torch.arange(5, 150)) == "rows 5..149"
    assert describe_ids(torch.arange(0, 300, 2)) == "150 rows 0, 2, 4, 6, 8, 10, ..., 298"
    assert describe_ids(torch.tensor([], dtype=torch.int64)) == "no rows"
