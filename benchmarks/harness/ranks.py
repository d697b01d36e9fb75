"""``RankPool``: ranks of a gloo process group that run benchmark blocks on command."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import timedelta

from .memory import process_memory
from .phases import profile_phases
from .report import trace_file
from .timing import BlockRunner, time_steps


class RankPool:
    """``world_size`` processes of one gloo process group that run benchmark blocks on command.

    The ranks are one long job of a :class:`graphemb.testing.LocalRanks` pool (the pool the
    test suite uses too): each rank sets its thread count, calls ``build(rank, world_size,
    spec)`` -> dict of :class:`harness.peers.Contender`, and then waits for commands in the
    job's store: run ``count`` timed steps of a contender (all ranks together, after a
    barrier), run one step for its return value, phase-profile it, report its memory, or
    stop. The parent never joins the process group, so it can time single-process contenders
    in between (interleaved with the ranks' blocks; the waiting ranks sleep in the store and
    use no CPU). A rank that raises or dies fails the parent's next wait with
    :class:`graphemb.testing.RankFailed` and the rank's traceback.
    """

    def __init__(
        self,
        build: Callable[[int, int, dict], dict],
        world_size: int,
        spec: dict,
        *,
        threads_per_rank: int = 1,
        timeout: float = 1800.0,
        log: Callable[[str], None] = print,
    ) -> None:
        self.world_size = world_size
        self.timeout = timeout
        self._counter = 0
        from graphemb.testing import LocalRanks  # here: importing the harness imports no graphemb

        self._ranks: LocalRanks | None = LocalRanks()
        t0 = time.perf_counter()
        self._job = self._ranks.submit(
            _rank_main,
            world_size,
            timeout,
            build,
            spec,
            timeout=timeout,
            threads=threads_per_rank,
        )
        self._store = self._job.store
        ready = self._wait("bench/ready", "the ranks to build their contenders")
        self.contenders: dict[str, dict] = ready[0]
        self.pids: list[int] = [answer["pid"] for answer in self._command({"op": "pid"}, "pids")]
        log(
            f"  {world_size} ranks ready in {time.perf_counter() - t0:.1f} s: "
            f"{', '.join(self.contenders) or '(no contenders)'}"
        )

    # ------------------------------------------------------------------ commands
    def _command(self, command: dict, what: str) -> list:
        k = self._counter
        self._counter += 1
        self._store.set(f"bench/cmd/{k}", json.dumps(command))
        answers = self._wait(f"bench/ack/{k}", what)
        # keep the store (this process's memory) flat over long runs: every rank has read it
        self._store.delete_key(f"bench/cmd/{k}")
        return answers

    def runner(self, name: str) -> BlockRunner:
        """Block runner of contender ``name``: per step, the slowest rank's duration."""

        def run(start: int, count: int) -> list[float]:
            answers = self._command(
                {"op": "time", "name": name, "start": start, "count": count},
                f"{name}: {count} steps",
            )
            return [max(a["times"][i] for a in answers) for i in range(count)]

        return run

    def call(self, name: str, index: int) -> list:
        """Every rank's return value of ``step(index)`` of contender ``name`` (untimed; the
        value must be JSON), in rank order: e.g. a first step's loss to compare contenders."""
        command = {"op": "call", "name": name, "start": index}
        return [a["value"] for a in self._command(command, f"{name}: step {index}")]

    def profile(self, name: str, start: int, count: int, trace_dir: str | None = None) -> list:
        """Per-rank phase profile (:func:`harness.phases.profile_phases`) of ``count``
        steps of ``name``; with ``trace_dir`` every rank also writes its trace there."""
        command = {
            "op": "profile",
            "name": name,
            "start": start,
            "count": count,
            "trace_dir": trace_dir,
        }
        return self._command(command, f"{name}: profile")

    def memory(self) -> list[dict]:
        """Every rank's :func:`harness.memory.process_memory`, in rank order."""
        return self._command({"op": "memory"}, "memory samples")

    def close(self) -> None:
        """Stop the ranks (they leave the group cleanly) and the pool."""
        if self._ranks is None:
            return
        try:
            self._store.set(f"bench/cmd/{self._counter}", json.dumps({"op": "stop"}))
            self._job.result()
        finally:
            self._kill()

    def _kill(self) -> None:
        if self._ranks is not None:
            self._ranks.shutdown()
            self._ranks = None

    def __enter__(self) -> RankPool:
        return self

    def __exit__(self, kind, err, tb) -> None:
        if kind is None:
            self.close()
        else:
            self._kill()

    # ------------------------------------------------------------------ waiting
    def _wait(self, key: str, what: str) -> list:
        """Wait until every rank has answered under ``key`` (a counter the ranks increment
        after writing ``key/<rank>``), checking that they are alive; their JSON answers.

        Polls (every 5 ms) rather than blocking in ``store.wait``, whose timeouts log a
        warning each time on some torch versions; the ranks time their own steps, so the
        polling latency is not part of any measurement.
        """
        next_check = 0.0
        while self._store.add(key, 0) < self.world_size:
            time.sleep(0.005)
            now = time.monotonic()
            if now >= next_check:
                next_check = now + 0.5
                self._job.check(what)  # raises RankFailed: a rank failed, died, or timed out
        answers = []
        for r in range(self.world_size):
            answers.append(json.loads(self._store.get(f"{key}/{r}")))
            self._store.delete_key(f"{key}/{r}")
        self._store.delete_key(key)
        return answers


def _rank_main(rank: int, world_size: int, timeout: float, build, spec) -> None:
    import torch.distributed as dist

    from graphemb.testing import current_store

    os.environ.setdefault("DGLBACKEND", "pytorch")
    store = current_store()
    contenders = build(rank, world_size, spec)
    _answer(
        store,
        "bench/ready",
        rank,
        {
            n: {"family": c.family, "optimizer": c.optimizer, "rows_per_step": c.rows_per_step}
            for n, c in contenders.items()
        },
    )
    k = 0
    while True:
        key = f"bench/cmd/{k}"
        store.wait([key], timedelta(seconds=timeout))
        command = json.loads(store.get(key))
        op = command["op"]
        if op == "stop":
            break
        if op == "pid":
            answer: dict = {"pid": os.getpid()}
        elif op == "memory":
            answer = process_memory()
        else:
            contender = contenders[command["name"]]
            dist.barrier()  # every rank starts the block together
            if op == "time":
                answer = {"times": time_steps(contender.step, command["start"], command["count"])}
            elif op == "call":
                answer = {"value": contender.step(command["start"])}
            else:
                path = trace_file(command.get("trace_dir"), f"{command['name']}-rank{rank}")
                answer = profile_phases(
                    contender, command["start"], command["count"], trace_path=path
                )
        _answer(store, f"bench/ack/{k}", rank, answer)
        k += 1
    for contender in contenders.values():
        contender.close()
    contenders.clear()


def _answer(store, key: str, rank: int, value) -> None:
    store.set(f"{key}/{rank}", json.dumps(value))
    store.add(key, 1)  # the parent polls this counter
