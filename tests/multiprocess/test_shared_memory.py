"""Shared-memory NodeEmbedding on several processes of one machine (gloo over loopback).

N ranks must train exactly like one process on the union of their batches (see
``scenarios.py``), leave nothing in /dev/shm however they end, never hang, and say which
rank waited for what when something goes wrong.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import scenarios
import torch
import torch.distributed as dist
from _multiprocess import RankFailed, run_ranks, worker_pids

from graphemb import CoordinationError, NodeEmbedding
from graphemb.distributed.shm import SHM_DIR, segment_prefix
from graphemb.optim import SparseAdagrad, SparseAdam, SparseSGD

pytestmark = pytest.mark.multiprocess
TESTS = Path(__file__).resolve().parents[1]  # the support modules


def our_segments() -> set[str]:
    return {p.name for p in SHM_DIR.glob("graphemb.*")}


def creator_pid(segment: str) -> int:
    return int(segment.rsplit(".", 2)[-2])  # graphemb.<name>-<digest>.<pid>.<token>


@pytest.fixture
def no_leaked_segments():
    """No segment created during the test outlives it -- counting only segments of this
    test's processes (pool workers, or processes that are gone), not those of unrelated
    jobs that may run on the same machine."""
    before = our_segments()
    yield
    ours = worker_pids() | {os.getpid()}
    leaked = [
        s for s in our_segments() - before if creator_pid(s) in ours or not _alive(creator_pid(s))
    ]
    assert not leaked, f"shared memory segments left behind: {leaked}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shared_embedding(name: str) -> NodeEmbedding:
    return NodeEmbedding(scenarios.NUM, scenarios.DIM, name, timeout=30)


def union_worker(rank, world_size):
    result = scenarios.train_rank(rank, world_size, shared_embedding)
    kinds = {shared_embedding("probe").storage_kind}
    return result, kinds


@pytest.mark.parametrize("world_size", [2, 4])
def test_ranks_train_like_one_process_on_the_union(world_size, no_leaked_segments):
    results = run_ranks(union_worker, world_size)
    oracle = scenarios.train_union(world_size)
    for result, kinds in results:
        assert kinds == {"shared"}
        scenarios.assert_same_training(result, oracle)


def _no_mail(*args, **kwargs):
    raise AssertionError("a rank alone posted rows to a mailbox or waited at a barrier")


def alone_worker(rank, world_size):
    def make(name):
        emb = shared_embedding(name)
        for method in ("deliver", "deliver_in_place"):
            setattr(emb.storage._mailboxes, method, _no_mail)
        return emb

    barrier, dist.barrier = dist.barrier, _no_mail  # the exchange looks it up at each call
    try:
        result = scenarios.train_rank(rank, world_size, make)
        probe = make("probe")
        probe(torch.tensor([1, 2])).sum().backward()
        optimizer = SparseAdam([probe])
        optimizer.step()  # its state tables too
    finally:
        dist.barrier = barrier
    tables = [probe.weight, *optimizer.state[probe].values()]
    return result, {probe.storage_kind}, {_mapped_file(t.data_ptr()) for t in tables}


def _mapped_file(address: int) -> str:
    """The file mapped at ``address`` in this process ('' for anonymous memory)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)  # range, perms, offset, dev, inode[, path]
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if start <= address < end:
            return fields[5].strip() if len(fields) == 6 else ""
    raise LookupError(f"address {address:#x} is not mapped")


def test_a_rank_alone_trains_as_one_process_without_shared_memory(no_leaked_segments):
    """A process group of one rank owns every row: its tables live in its own memory (no
    segment in /dev/shm, whose size containers often limit), and the step updates them
    without posting its gradient rows to its own mailbox or waiting at a barrier, exactly
    as one process does."""
    ((result, kinds, files),) = run_ranks(alone_worker, 1)
    assert kinds == {"shared"}
    assert not any(str(SHM_DIR) in file for file in files), files
    scenarios.assert_same_training(result, scenarios.train_union(1), exact=True)


def pure_torch_worker(rank, world_size):
    os.environ["GRAPHEMB_DISABLE_KERNELS"] = "1"  # read when an optimizer takes an embedding
    result = scenarios.train_rank(rank, world_size, shared_embedding)
    probe = shared_embedding("backend-probe")
    return result, {SparseAdam([probe]).update_backend(probe)}


def test_pure_torch_update_of_rows_left_in_the_mailboxes(no_leaked_segments):
    """The pushed gradient rows stay in the senders' mailboxes (RowParts); the pure-torch
    backend gathers them into one tensor and must train like one process too."""
    results = run_ranks(pure_torch_worker, 2)
    oracle = scenarios.train_union(2)
    for result, backends in results:
        assert backends == {"torch"}
        scenarios.assert_same_training(result, oracle)


def owned_rows_worker(rank, world_size, num_rows):
    emb = NodeEmbedding(num_rows, 4, "owners", timeout=30)
    opt = SparseAdam([emb], lr=0.1)
    tables = {"weight": emb.weight, **opt.state[emb]}
    # the bytes of the rows this rank writes, per table: [start, stop) of every owned row
    owned = emb.storage.owned_ids()
    spans = {}
    for key, table in tables.items():
        row_bytes = table[0].numel() * table.element_size()
        base = table.data_ptr() % 4096  # offset of the table in its first page
        spans[key] = (base + owned * row_bytes, base + (owned + 1) * row_bytes)
    return owned, spans


def test_each_rank_updates_whole_pages_of_every_table(no_leaked_segments):
    """Shared memory has 4 KiB pages: an owner's rows fill pages of their own in every table
    (weight, moments, 8-byte step counts), and every row has exactly one owner."""
    num_rows = 20_000
    results = run_ranks(owned_rows_worker, 2, num_rows)
    owners = torch.cat([owned for owned, _ in results])
    assert torch.equal(owners.sort().values, torch.arange(num_rows))
    assert abs(len(results[0][0]) - len(results[1][0])) <= 512  # balanced
    for key in results[0][1]:
        pages = []
        for _, spans in results:
            start, stop = spans[key]
            first, last = start // 4096, (stop - 1) // 4096  # pages a row lies on
            pages.append(set(first.tolist()) | set(last.tolist()))
        shared = pages[0] & pages[1]
        assert not shared, f"{key}: pages written by both ranks: {sorted(shared)[:5]}"


def growing_batches_worker(rank, world_size):
    """Batches of very different sizes: mailboxes are replaced by larger ones mid-run."""
    emb = NodeEmbedding(5000, 8, "growing", timeout=30)
    emb.all_set_embedding(torch.ones(5000, 8))
    opt = SparseAdagrad([emb], lr=0.1)
    for step, size in enumerate([1, 3000, 10, 0, 9000, 5]):
        ids = torch.randint(
            0, 5000, (size,), generator=torch.Generator().manual_seed(10 * step + rank)
        )
        loss = emb(ids).pow(2).sum() / max(size, 1)
        loss.backward()
        opt.step()
        live = {s for s in our_segments() if creator_pid(s) == os.getpid()}
    return emb.all_get_embedding(), live


def test_mailboxes_grow_and_are_unlinked_each_step(no_leaked_segments):
    results = run_ranks(growing_batches_worker, 2)
    oracle = NodeEmbedding(5000, 8, "growing-oracle")
    oracle.all_set_embedding(torch.ones(5000, 8))
    opt = SparseAdagrad([oracle], lr=0.1)
    for step, size in enumerate([1, 3000, 10, 0, 9000, 5]):
        loss = 0
        for rank in range(2):
            ids = torch.randint(
                0, 5000, (size,), generator=torch.Generator().manual_seed(10 * step + rank)
            )
            loss = loss + oracle(ids).pow(2).sum() / max(size, 1)
        (loss / 2).backward()
        opt.step()
    for table, live in results:
        torch.testing.assert_close(table, oracle.weight, rtol=1e-5, atol=1e-6)
        assert not live, f"segments still named after a step: {live}"


def init_once_worker(rank, world_size, counter_path):
    def init(table):
        with open(counter_path, "a") as f:
            f.write(f"{rank}\n")
        table.fill_(7.0)

    emb = NodeEmbedding(10, 2, "init-once", init_func=init, timeout=30)
    return emb.weight.clone(), emb.all_get_embedding()


def test_init_func_runs_once_and_every_rank_sees_every_row(tmp_path, no_leaked_segments):
    counter = tmp_path / "calls"
    results = run_ranks(init_once_worker, 3, str(counter))
    assert counter.read_text().split() == ["0"]
    for weight, table in results:
        assert torch.equal(weight, torch.full((10, 2), 7.0)) and torch.equal(table, weight)


def all_set_worker(rank, world_size):
    emb = NodeEmbedding(11, 3, "set-from-all", timeout=30)
    values = torch.arange(33, dtype=torch.float32).view(11, 3)
    emb.all_set_embedding(values)
    return emb.all_get_embedding()


def test_all_set_and_all_get_from_every_rank(no_leaked_segments):
    for table in run_ranks(all_set_worker, 3):
        assert torch.equal(table, torch.arange(33, dtype=torch.float32).view(11, 3))


def collision_worker(rank, world_size):
    first = NodeEmbedding(5, 2, "same-name", timeout=30)
    try:
        NodeEmbedding(5, 2, "same-name", timeout=30)
    except ValueError as err:
        message = str(err)
    else:
        message = None
    del first
    again = NodeEmbedding(5, 2, "same-name", timeout=30)  # re-creation after deletion works
    return message, again.storage_kind


def test_a_live_name_collision_raises_on_every_rank(no_leaked_segments):
    for message, kind in run_ranks(collision_worker, 2):
        assert message is not None and "'same-name/" in message and "already alive" in message
        assert kind == "shared"


def store_timeout_worker(rank, world_size):
    try:
        NodeEmbedding(5, 2, "left" if rank == 0 else "right", timeout=2)
    except CoordinationError as err:
        return str(err)
    return None


def test_store_waits_time_out_naming_rank_and_key(no_leaked_segments):
    left, right = run_ranks(store_timeout_worker, 2)
    # the first shared table of an embedding is its mailbox directory
    assert "rank 0 of 2" in left and "every rank to map shared table 'left/mailboxes'" in left
    assert "shm/left/mailboxes/1/ack/1" in left
    assert "rank 1 of 2" in right and "shm/right/mailboxes/1/meta" in right


def collective_timeout_worker(rank, world_size):
    emb = NodeEmbedding(5, 2, "skip-step", timeout=2)
    opt = SparseSGD([emb], lr=0.1)
    if rank == 1:
        return None  # never calls step()
    emb(torch.tensor([1])).sum().backward()
    try:
        opt.step()
    except CoordinationError as err:
        return str(err)
    return "no error"


def test_a_missing_rank_times_out_with_rank_and_step_named(no_leaked_segments):
    message, _ = run_ranks(collective_timeout_worker, 2)
    assert "rank 0 of 2" in message and "SparseSGD step 1" in message
    assert "NodeEmbedding 'skip-step'" in message


def crash_worker(rank, world_size):
    emb = NodeEmbedding(1000, 16, "crash", timeout=30)
    opt = SparseAdam([emb], lr=0.1)
    emb(torch.tensor([rank])).sum().backward()
    opt.step()
    if rank == 1:
        raise RuntimeError("boom in rank 1")
    opt.step()  # rank 0 fails here: its peer is gone


def test_exception_in_one_rank_leaves_no_segments(no_leaked_segments):
    with pytest.raises(RankFailed, match="boom in rank 1"):
        run_ranks(crash_worker, 2)


def stale_worker(rank, world_size):
    emb = NodeEmbedding(4, 2, "stale", timeout=30)
    return emb.all_get_embedding()


def test_stale_segment_of_a_dead_job_is_replaced_not_attached(no_leaked_segments):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = SHM_DIR / f"{segment_prefix('stale/weight')}{dead.pid}.deadbeef0000"
    stale.write_bytes(torch.full((4, 2), 9.0).numpy().tobytes())
    try:
        tables = run_ranks(stale_worker, 2)
    finally:
        leftover = stale.exists()
        stale.unlink(missing_ok=True)
    assert not leftover, "the stale segment of a dead process was not removed"
    for table in tables:
        assert torch.equal(table, torch.zeros(4, 2)), "attached to the stale segment"


def killed_worker(rank, world_size):
    """Both ranks mid-training -- tables mapped, two steps taken -- then SIGKILL: no clean-up
    code runs."""
    embeddings, optimizers = scenarios.build(shared_embedding)
    scenarios.train_steps(embeddings, optimizers, rank, world_size, range(2))
    dist.barrier()
    os.kill(os.getpid(), signal.SIGKILL)


def test_killed_run_leaves_nothing_and_the_next_run_starts_cleanly(no_leaked_segments):
    """SIGKILL both ranks of a job mid-training -- no clean-up code runs, as when a torchrun
    job is killed -- then run the same names again on fresh processes."""
    with pytest.raises(RankFailed) as failure:
        run_ranks(killed_worker, 2, timeout=60)
    assert str(failure.value).count("process died (exit code -9)") == 2, str(failure.value)
    oracle = scenarios.train_union(2)
    for result, kinds in run_ranks(union_worker, 2):  # fresh workers, the same names
        assert kinds == {"shared"}
        scenarios.assert_same_training(result, oracle)


def run_torchrun(out: Path, world_size: int = 2) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(world_size),
            str(TESTS / "torchrun_job.py"),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def assert_torchrun_result(out: Path, world_size: int) -> None:
    oracle = scenarios.train_union(world_size)
    for rank in range(world_size):
        result = torch.load(f"{out}.rank{rank}.pt", weights_only=False)
        scenarios.assert_same_training(result, oracle)


def test_torchrun_launch_trains_like_one_process(tmp_path, no_leaked_segments):
    run_torchrun(tmp_path / "job")
    assert_torchrun_result(tmp_path / "job", world_size=2)
