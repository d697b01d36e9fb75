"""graphemb.testing.LocalRanks, the pool of ranks every multi-process test and benchmark
runs on: results by rank, failures named by rank, death seen at once, the pool restarted."""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch.distributed as dist

from graphemb.testing import LocalRanks, RankFailed, current_store

pytestmark = pytest.mark.multiprocess


def _all_reduce_rank_squares(rank, world_size):
    value = torch.tensor([float(rank * rank)])
    dist.all_reduce(value)
    return {"rank": rank, "world": world_size, "sum": value.item(), "pid": os.getpid()}


def _raise_on_rank_one(rank, world_size):
    if rank == 1:
        raise ValueError("boom in rank 1")
    return rank


def _die_on_rank_one(rank, world_size):
    if rank == 1:
        os._exit(3)
    time.sleep(30)  # the others would wait on rank 1 for longer than the test allows
    return rank


def _answer_through_the_store(rank, world_size):
    store = current_store()
    store.set(f"from/{rank}", str(rank * 10))
    store.wait(["go"])
    return store.get("go").decode()


@pytest.fixture
def ranks():
    pool = LocalRanks()
    yield pool
    pool.shutdown()


def test_every_rank_returns_its_value_in_rank_order(ranks):
    results = ranks.run(_all_reduce_rank_squares, 3)
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert all(r["world"] == 3 for r in results)
    assert all(r["sum"] == 0 + 1 + 4 for r in results)  # computed here, not by the pool
    assert len({r["pid"] for r in results}) == 3
    assert {r["pid"] for r in results} <= ranks.pids()


def test_a_raising_rank_fails_the_job_with_its_traceback_and_the_pool_recovers(ranks):
    with pytest.raises(RankFailed, match=r"(?s)rank 1: .*ValueError: boom in rank 1"):
        ranks.run(_raise_on_rank_one, 2)
    assert ranks.pids() == set()  # killed after the failure ...
    assert [r["rank"] for r in ranks.run(_all_reduce_rank_squares, 2)] == [0, 1]  # ... renewed


def test_a_dead_rank_is_named_at_once_not_after_the_timeout(ranks):
    started = time.monotonic()
    with pytest.raises(RankFailed, match=r"rank 1's process died \(exit code 3\)"):
        ranks.run(_die_on_rank_one, 2, timeout=60)
    assert time.monotonic() - started < 30  # the survivor still sleeps: nobody waited on it


def test_the_parent_talks_to_a_running_job_through_its_store(ranks):
    job = ranks.submit(_answer_through_the_store, 2)
    job.store.wait(["from/0", "from/1"])
    assert [job.store.get(f"from/{r}") for r in (0, 1)] == [b"0", b"10"]
    job.store.set("go", "done")
    assert job.result() == ["done", "done"]


def test_current_store_outside_a_job_is_an_error():
    with pytest.raises(RuntimeError, match="inside a job"):
        current_store()
