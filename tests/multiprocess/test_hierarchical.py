"""Machine-aware (hierarchical) storage: ranks grouped into machines on one host.

2 machines x 2 ranks must train exactly like one process on the union of the batches
(``scenarios.py``, all four optimizers), checkpoints must move between this layout and a
single process both ways, a killed rank must be named by every survivor, and nothing may be
left in /dev/shm. One test runs each machine's ranks in their own mount and UTS namespaces
(private /dev/shm, own hostname), where the machines are discovered, not given.

This file is also the rank script of that test (``python test_hierarchical.py rank ...``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from datetime import timedelta

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: scenarios

import scenarios  # noqa: E402
from _multiprocess import RankFailed, run_ranks, worker_pids  # noqa: E402

from graphemb import NodeEmbedding, load, save  # noqa: E402
from graphemb.distributed.shm import SHM_DIR  # noqa: E402
from graphemb.distributed.topology import Topology, discover_topology  # noqa: E402

TWO_BY_TWO = [0, 0, 1, 1]
INTERLEAVED = ["b", "a", "b", "a"]  # machines need not be contiguous rank ranges


def our_segments() -> set[str]:
    return {p.name for p in SHM_DIR.glob("graphemb.*")}


@pytest.fixture
def no_leaked_segments():
    before = our_segments()
    yield
    ours = {str(pid) for pid in worker_pids() | {os.getpid()}}
    leaked = [s for s in our_segments() - before if s.rsplit(".", 2)[-2] in ours]
    assert not leaked, f"shared memory segments left behind: {leaked}"


def make(machines, timeout=30):
    return lambda name: NodeEmbedding(
        scenarios.NUM, scenarios.DIM, name, timeout=timeout, machines=machines
    )


def train(embeddings, optimizers, rank, world_size, steps) -> None:
    """The scenario's steps; every rank looks up every embedding (lookups are collective)."""
    for step in steps:
        ids, target = scenarios.batch(step, rank, world_size)
        loss = sum(scenarios.local_loss(embeddings[n], ids, target) for n in scenarios.OPTIMIZERS)
        if scenarios.uses_rare(step, rank):
            loss = loss + scenarios.local_loss(embeddings[scenarios.RARE], ids, target)
        else:
            embeddings[scenarios.RARE](torch.empty(0, dtype=torch.int64))
        loss.backward()
        for opt in optimizers.values():
            opt.step()


# ---------------------------------------------------------------------- topology
def test_topology_groups_ranks_by_label_and_numbers_machines_by_lowest_rank():
    t = Topology.from_machines(INTERLEAVED, rank=3)
    assert (t.num_machines, t.ranks_per_machine, t.machine, t.local_rank) == (2, 2, 1, 1)
    assert t.ranks_of(0) == [0, 2] and t.ranks_of(1) == [1, 3]
    assert t.peers(0) == [0, 1] and t.peers(1) == [2, 3]


def test_unequal_machines_and_wrong_lengths_are_rejected():
    with pytest.raises(ValueError, match=r"same number of ranks, got \[3, 1\]"):
        Topology.from_machines([0, 0, 0, 1], rank=0)
    with pytest.raises(ValueError, match="lists 3 ranks but this is rank 3"):
        Topology.from_machines([0, 0, 1], rank=3)
    with pytest.raises(TypeError, match="one machine label per rank"):
        Topology.from_machines("0011", rank=0)


class _FakeCoordinator:
    rank, world_size = 1, 4


def test_environment_variable_names_machines(monkeypatch):
    monkeypatch.setenv("GRAPHEMB_MACHINES", "x, x, y, y")
    topology = discover_topology(_FakeCoordinator())  # type: ignore[arg-type]
    assert topology.machine_of_rank == (0, 0, 1, 1) and topology.local_rank == 1
    monkeypatch.setenv("GRAPHEMB_MACHINES", "0,1")
    with pytest.raises(ValueError, match="lists 2 ranks, the world size is 4"):
        discover_topology(_FakeCoordinator())  # type: ignore[arg-type]


# ---------------------------------------------------------------------- training
def union_worker(rank, world_size, machines):
    embeddings, optimizers = scenarios.build(make(machines))
    train(embeddings, optimizers, rank, world_size, range(scenarios.STEPS))
    weight = embeddings["adam"].weight
    return scenarios.snapshot(embeddings, optimizers), embeddings["adam"].storage_kind, weight.shape


@pytest.mark.multiprocess
def test_two_machines_of_two_ranks_train_like_one_process(no_leaked_segments):
    # interleaved machines: local ranks and peer groups differ from rank order
    oracle = scenarios.train_union(4)
    for result, kind, shape in run_ranks(union_worker, 4, INTERLEAVED, timeout=90):
        assert kind == "hierarchical"
        # each machine maps its own share only: rows id % 2 == machine (19 or 18 of 37)
        assert shape[0] in (18, 19)
        scenarios.assert_same_training(result, oracle)


def traffic_ids(rank: int) -> torch.Tensor:
    """Ranks of one machine ask for many of the same rows (hubs), each with duplicates."""
    gen = torch.Generator().manual_seed(rank)
    shared = torch.arange(0, 400, 3)  # every rank needs these
    return torch.cat([shared, torch.randint(0, 1000, (300,), generator=gen), shared[:50]])


def traffic_worker(rank, world_size):
    from graphemb.optim import SparseSGD

    emb = NodeEmbedding(1000, 8, "traffic", machines=TWO_BY_TWO, timeout=30)
    opt = SparseSGD([emb], lr=0.1)
    before = emb.storage.bytes_across_machines()
    emb(traffic_ids(rank)).sum().backward()
    opt.step()
    return emb.storage.bytes_across_machines() - before


@pytest.mark.multiprocess
def test_each_remote_row_a_machine_needs_crosses_once_each_way(no_leaked_segments):
    # Oracle: the rows each machine needs from the other, counted once however many of its
    # ranks need them (owner rank of an id: id % 4, with machines [0, 0, 1, 1]).
    machine_of_owner = torch.tensor(TWO_BY_TWO)
    remote_rows = 0
    for machine in (0, 1):
        ranks = [r for r in range(4) if TWO_BY_TWO[r] == machine]
        needed = torch.cat([traffic_ids(r) for r in ranks]).unique()
        remote_rows += int((machine_of_owner[needed % 4] != machine).sum())
    # Pull: an id (8 B) goes out, its row (8 float32) comes back; push: id and gradient row.
    expected = remote_rows * 2 * (8 + 8 * 4)
    sent = run_ranks(traffic_worker, 4, timeout=60)
    assert sum(sent) == expected, (sent, expected)


def growing_worker(rank, world_size):
    """Batches of very different sizes (mailboxes grow), hot rows shared by every rank."""
    emb = NodeEmbedding(3000, 8, "growing-h", timeout=30, machines=TWO_BY_TWO)
    emb.all_set_embedding(torch.ones(3000, 8))
    from graphemb.optim import SparseAdagrad

    opt = SparseAdagrad([emb], lr=0.1)
    for step, size in enumerate([1, 2000, 0, 5000, 5]):
        gen = torch.Generator().manual_seed(10 * step + rank)
        ids = torch.randint(0, 3000, (size,), generator=gen)
        (emb(ids).pow(2).sum() / max(size, 1)).backward()
        opt.step()
    return emb.all_get_embedding()


@pytest.mark.multiprocess
def test_batches_of_changing_sizes_match_one_process(no_leaked_segments):
    from graphemb.optim import SparseAdagrad

    oracle = NodeEmbedding(3000, 8, "growing-oracle")
    oracle.all_set_embedding(torch.ones(3000, 8))
    opt = SparseAdagrad([oracle], lr=0.1)
    for step, size in enumerate([1, 2000, 0, 5000, 5]):
        loss = 0
        for rank in range(4):
            gen = torch.Generator().manual_seed(10 * step + rank)
            loss = loss + oracle(torch.randint(0, 3000, (size,), generator=gen)).pow(2).sum()
        (loss / max(size, 1) / 4).backward()
        opt.step()
    for table in run_ranks(growing_worker, 4, timeout=60):
        torch.testing.assert_close(table, oracle.weight, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- checkpoints
def checkpoint_worker(rank, world_size, single_in, sharded_out, single_out):
    embeddings, optimizers = scenarios.build(make(TWO_BY_TWO))
    for name, emb in embeddings.items():
        load(f"{single_in}-{name}", emb, optimizers[name])
    loaded = scenarios.snapshot(embeddings, optimizers)
    train(embeddings, optimizers, rank, world_size, range(5, 8))
    for name, emb in embeddings.items():
        save(f"{sharded_out}-{name}", emb, optimizers[name], sharded=True)
        save(f"{single_out}-{name}", emb, optimizers[name])
    return loaded, scenarios.snapshot(embeddings, optimizers)


@pytest.mark.multiprocess
def test_checkpoints_move_between_one_process_and_two_machines(tmp_path, no_leaked_segments):
    # One process trains 5 steps and saves; the 2 x 2 job loads, trains 3 more, saves both
    # formats; one process loads those: everything equals the one-process run, bit for bit
    # where nothing was summed (the loaded state) and to the scenario's tolerance after.
    embeddings, optimizers = scenarios.build(lambda n: NodeEmbedding(scenarios.NUM, 4, n))
    scenarios.train_steps(embeddings, optimizers, 0, 1, range(5), data_world=4)
    single_in = tmp_path / "single-in.ckpt"
    for name, emb in embeddings.items():
        save(f"{single_in}-{name}", emb, optimizers[name])
    expected_loaded = scenarios.snapshot(embeddings, optimizers)
    scenarios.train_steps(embeddings, optimizers, 0, 1, range(5, 8), data_world=4)
    expected_end = scenarios.snapshot(embeddings, optimizers)

    sharded, single = tmp_path / "sharded", tmp_path / "single-out"
    results = run_ranks(checkpoint_worker, 4, str(single_in), str(sharded), str(single), timeout=90)
    for loaded, end in results:
        scenarios.assert_same_training(loaded, expected_loaded, exact=True)
        scenarios.assert_same_training(end, expected_end)
    for prefix in (sharded, single):
        fresh, fresh_opts = scenarios.build(lambda n: NodeEmbedding(scenarios.NUM, 4, n))
        for name in fresh:
            load(f"{prefix}-{name}", fresh[name], fresh_opts[name])
        scenarios.assert_same_training(
            scenarios.snapshot(fresh, fresh_opts), results[0][1], exact=True
        )


# ---------------------------------------------------------------------- failures
def killed_worker(rank, world_size):
    embeddings, optimizers = scenarios.build(make(TWO_BY_TWO, timeout=3))
    train(embeddings, optimizers, rank, world_size, range(2))
    if rank == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    train(embeddings, optimizers, rank, world_size, range(2, 4))


@pytest.mark.multiprocess
def test_a_killed_rank_is_named_by_every_survivor(no_leaked_segments):
    with pytest.raises(RankFailed) as failure:
        run_ranks(killed_worker, 4, timeout=16)
    reports = str(failure.value).split("\nrank ")
    survivors = [r for r in reports if "CoordinationError" in r]
    assert len(survivors) == 3, str(failure.value)[-3000:]
    for report in survivors:
        assert "rank(s) [3] (machine(s) [1]) did not report in" in report, report[-1500:]


# ---------------------------------------------------------------------- namespaces
NAMESPACES = (
    shutil.which("unshare") is not None
    and subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "--uts", "true"], capture_output=True
    ).returncode
    == 0
)


@pytest.mark.multiprocess
@pytest.mark.skipif(not NAMESPACES, reason="unshare of user/mount/UTS namespaces unavailable")
def test_machines_in_separate_namespaces_are_discovered_and_train_like_one_process(tmp_path):
    from torch import distributed as dist

    store = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=90)
    )
    machines = []
    for machine, ranks in enumerate([(0, 1), (2, 3)]):
        launch = " & ".join(
            f"{sys.executable} {__file__} rank {r} {store.port} {tmp_path}" for r in ranks
        )
        script = (
            f"mount -t tmpfs tmpfs /dev/shm && hostname machine{machine} && "
            f"{launch} & wait; ls /dev/shm > {tmp_path}/shm-left-{machine}"
        )
        machines.append(
            subprocess.Popen(
                ["unshare", "--user", "--map-root-user", "--mount", "--uts", "sh", "-c", script],
                env={**os.environ, "GLOO_SOCKET_IFNAME": "lo"},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=120)[0] for p in machines]
    oracle = scenarios.train_union(4)
    for rank in range(4):
        path = tmp_path / f"rank{rank}.pt"
        assert path.exists(), "\n".join(o[-2000:] for o in outputs)
        result, kind, hosts = torch.load(path, weights_only=False)
        assert kind == "hierarchical" and hosts == (0, 0, 1, 1)
        scenarios.assert_same_training(result, oracle)
    for machine in range(2):  # each machine's private /dev/shm is empty at the end
        assert (tmp_path / f"shm-left-{machine}").read_text() == ""


def _namespace_rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=4, timeout=timedelta(seconds=60)
    )
    embeddings, optimizers = scenarios.build(
        lambda n: NodeEmbedding(scenarios.NUM, scenarios.DIM, n, timeout=30)
    )
    train(embeddings, optimizers, rank, 4, range(scenarios.STEPS))
    result = scenarios.snapshot(embeddings, optimizers)
    storage = embeddings["adam"].storage
    torch.save((result, storage.kind, storage.topology.machine_of_rank), f"{out}/rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__" and sys.argv[1] == "rank":
    _namespace_rank(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
