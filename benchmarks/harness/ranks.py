"""``RankPool``: ranks of a gloo process group that run benchmark blocks on command."""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch

from .memory import process_memory
from .phases import profile_phases
from .report import trace_file
from .timing import BlockRunner, time_steps


class RankFailure(RuntimeError):
    """A rank of a RankPool raised, died, or did not answer in time."""


class RankPool:
    """``world_size`` processes of one gloo process group that run benchmark blocks on command.

    The parent hosts a TCPStore on a port the OS picks (port 0) and starts the ranks with
    ``torch.multiprocessing`` (spawn); each rank sets its thread count, joins the process
    group through that store (it becomes the group's default store, as under torchrun),
    calls ``build(rank, world_size, spec)`` -> dict of :class:`harness.peers.Contender`, and
    then waits for commands: run ``count`` timed steps of a contender (all ranks together,
    after a barrier), phase-profile it, report its memory, or stop. The parent never joins
    the process group, so it can time single-process contenders in between (interleaved
    with the ranks' blocks; the waiting ranks sleep in the store and use no CPU).
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
        import torch.distributed as dist
        import torch.multiprocessing as mp

        self.world_size = world_size
        self.timeout = timeout
        self._counter = 0
        self._store = dist.TCPStore(
            "127.0.0.1",
            0,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout),
        )
        self._context: Any = mp.start_processes(
            _rank_main,
            args=(world_size, self._store.port, threads_per_rank, timeout, build, spec),
            nprocs=world_size,
            join=False,
            start_method="spawn",
        )
        t0 = time.perf_counter()
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
        """Stop the ranks (they leave the group cleanly and exit) and the store."""
        if self._context is None:
            return
        try:
            self._store.set(f"bench/cmd/{self._counter}", json.dumps({"op": "stop"}))
            deadline = time.monotonic() + 120
            while not self._context.join(timeout=0.5):
                if time.monotonic() > deadline:
                    raise RankFailure("ranks did not exit within 120 s of 'stop'")
        finally:
            self._kill()

    def _kill(self) -> None:
        if self._context is None:
            return
        for process in self._context.processes:
            if process.is_alive():
                process.kill()
                process.join()
        self._context = None

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
        import torch.multiprocessing as mp

        deadline = time.monotonic() + self.timeout
        next_check = 0.0
        while self._store.add(key, 0) < self.world_size:
            time.sleep(0.005)
            now = time.monotonic()
            if now < next_check:
                continue
            next_check = now + 0.5
            try:
                finished = self._context.join(timeout=0)
            except (mp.ProcessRaisedException, mp.ProcessExitedException) as err:
                self._kill()
                raise RankFailure(f"a rank failed while waiting for {what}:\n{err}") from None
            if finished:
                self._kill()
                raise RankFailure(f"the ranks exited while the parent waited for {what}")
            if now > deadline:
                self._kill()
                raise RankFailure(f"no answer within {self.timeout:g} s for {what}")
        answers = []
        for r in range(self.world_size):
            answers.append(json.loads(self._store.get(f"{key}/{r}")))
            self._store.delete_key(f"{key}/{r}")
        self._store.delete_key(key)
        return answers


def _rank_main(rank, world_size, port, threads, timeout, build, spec):
    import torch.distributed as dist

    torch.set_num_threads(threads)
    os.environ.setdefault("DGLBACKEND", "pytorch")
    wait = timedelta(seconds=timeout)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=wait)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=wait)
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
        store.wait([key], wait)
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
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def _answer(store, key: str, rank: int, value) -> None:
    store.set(f"{key}/{rank}", json.dumps(value))
    store.add(key, 1)  # the parent polls this counter
