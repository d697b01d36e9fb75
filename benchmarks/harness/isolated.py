"""Contenders in fresh processes of their own, run block by block on command.

A library's users run it in a process that imports that library alone, with its own
defaults: no other library's threads, allocations or settings in the same process. An
:class:`IsolatedContender` starts a fresh Python interpreter (``python -c``, no fork of
this process), which imports ``builder`` (``"module:function"``, found on the benchmark's
path), calls it with the JSON ``spec`` and serves commands over a pipe: time ``count``
steps from batch ``start``, phase-profile them, report its memory, or run one of the
contender's own operations (:attr:`harness.peers.Contender.ops`). Between commands it
blocks on the pipe and uses no CPU, so contenders in separate processes can still be
timed in interleaved rounds (:func:`harness.timing.interleaved`).

Every worker inherits this process's environment: the run's allocator settings
(:mod:`harness.allocation`) are the same for all. The worker's own output (its prints and
its libraries', Python's or C's) goes to this process's stderr; the answers travel on a
file descriptor of their own.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from .timing import BlockRunner

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORKER = (
    "import sys; sys.path.insert(0, {path!r}); "
    "from harness.isolated import serve; serve(sys.argv[1], sys.argv[2])"
)


class WorkerFailed(RuntimeError):
    """A worker raised (its traceback is the message), or died."""


def start_all(
    builds: dict[str, tuple[str, dict]],
    log: Callable[[str], None] = print,
    required: str = "graphemb",
) -> dict[str, IsolatedContender]:
    """Start a worker per ``name -> (builder, spec)`` at once, the builds side by side; the
    ready workers by name (:func:`launch_all`, then :func:`wait_all`)."""
    return wait_all(launch_all(builds, log=log), required=required)


def launch_all(
    builds: dict[str, tuple[str, dict]], log: Callable[[str], None] = print
) -> dict[str, IsolatedContender]:
    """Start a worker per ``name -> (builder, spec)`` and return at once, every worker
    still building: the caller may start other processes meanwhile, then :func:`wait_all`."""
    return {
        name: IsolatedContender(name, builder, spec, log=log, wait=False)
        for name, (builder, spec) in builds.items()
    }


def wait_all(
    started: dict[str, IsolatedContender], required: str = "graphemb"
) -> dict[str, IsolatedContender]:
    """Wait until every worker of ``started`` (:func:`launch_all`) has built; the ready ones
    by name.

    A worker whose name starts with ``required`` must build: if one fails, every worker
    is closed and the run stops with its reason. Any other that fails (a peer library
    missing, or built for another torch) is left out, with one line saying why.
    """
    ready, failed = {}, {}
    for name, worker in started.items():
        try:
            ready[name] = worker.ready()
        except WorkerFailed as error:
            failed[name] = str(error)
            worker.close()
    for name, why in failed.items():
        if name.startswith(required):
            close_all(ready.values())
            raise SystemExit(why)
        print(f"# {name} left out: {why.splitlines()[-1]}")
    return ready


def close_all(workers: Iterable[IsolatedContender]) -> None:
    """Stop every worker of ``workers``: all are asked to stop before any is waited for, so
    that their exits (a second or so each, tearing down torch) overlap."""
    workers = list(workers)
    for worker in workers:
        worker.request_stop()
    for worker in workers:
        worker.close()


class IsolatedContender:
    """One contender, built and run in a Python process of its own.

    Parameters
    ----------
    name : str
        The contender's name (in messages).
    builder : str
        ``"module:function"``; ``function(spec)`` returns a
        :class:`harness.peers.Contender`, built in the worker.
    spec : dict
        JSON-serialisable options of the build. ``spec["threads"]``, if present, is the
        worker's torch thread count, set before the build.
    env : dict, optional
        Environment variables to set in the worker on top of this process's.
    log : callable
        Receives one line when the worker is ready.
    wait : bool
        Wait here until the worker has built its contender; with ``False`` call
        :meth:`ready` before the first command (several workers then build side by side).
    """

    def __init__(
        self,
        name: str,
        builder: str,
        spec: dict,
        *,
        env: dict[str, str] | None = None,
        log: Callable[[str], None] = print,
        wait: bool = True,
    ) -> None:
        self.name = name
        self.log = log
        self.pid = -1
        self.info: dict = {}
        code = _WORKER.format(path=BENCHMARKS)
        self._process: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, "-c", code, builder, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self._ready = False
        if wait:
            self.ready()

    def ready(self) -> IsolatedContender:
        """Wait until the worker has built its contender (once); ``self``."""
        if not self._ready:
            answer = self._answer("the build")
            self.pid, self.info, self._ready = answer["pid"], answer.get("info", {}), True
            self.log(f"  {self.name}: ready in process {self.pid} ({answer['seconds']:.1f} s "
                     "to build)")  # fmt: skip
        return self

    def command(self, op: str, **options: Any) -> Any:
        """Run ``op`` in the worker (``time``, ``profile``, ``memory`` or one of the
        contender's own operations) with ``options``; its JSON answer."""
        self.ready()
        process = self._alive()
        assert process.stdin is not None
        process.stdin.write(json.dumps({"op": op, **options}) + "\n")
        process.stdin.flush()
        return self._answer(op)["value"]

    def runner(self) -> BlockRunner:
        """Block runner (:mod:`harness.timing`): ``count`` steps from batch ``start``."""
        return lambda start, count: self.command("time", start=start, count=count)

    def profile(self, start: int, count: int, trace_path: str | None = None) -> dict:
        """:func:`harness.phases.profile_phases` of ``count`` steps from batch ``start``."""
        return self.command("profile", start=start, count=count, trace_path=trace_path)

    def request_stop(self) -> None:
        """Ask a built worker to stop without waiting for it to exit (:meth:`close` waits);
        nothing for a worker that is still building, or closed."""
        process = self._process
        if process is None or not self._ready or process.poll() is not None:
            return
        if process.stdin is not None and not process.stdin.closed:
            try:
                process.stdin.write(json.dumps({"op": "stop"}) + "\n")
                process.stdin.close()
            except OSError:  # it died meanwhile: close() reaps it
                pass

    def close(self) -> None:
        """Stop the worker (it frees its contender and exits) and wait for it."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if not self._ready:  # still building: nothing to save
                process.kill()
            elif process.poll() is None and process.stdin is not None:
                if not process.stdin.closed:  # not asked yet (request_stop)
                    process.stdin.write(json.dumps({"op": "stop"}) + "\n")
                    process.stdin.close()
            process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()

    def __enter__(self) -> IsolatedContender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _alive(self) -> subprocess.Popen:
        if self._process is None:
            raise WorkerFailed(f"{self.name}: the worker was closed")
        return self._process

    def _answer(self, what: str) -> dict:
        process = self._alive()
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            code = process.wait()
            self._process = None
            raise WorkerFailed(f"{self.name}: the worker exited (status {code}) during {what}")
        answer = json.loads(line)
        if "error" in answer:
            raise WorkerFailed(f"{self.name}: {what} failed in the worker:\n{answer['error']}")
        return answer


# ---------------------------------------------------------------------------- the worker
def serve(builder: str, spec_json: str) -> None:
    """The worker's main: build the contender, answer "ready", then serve commands from
    stdin until ``stop`` or end of input. Answers go to the original stdout; everything
    else printed from here on (by Python or C code) goes to stderr."""
    import time

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the libraries' prints must not mix with the answers
    sys.stdout = sys.stderr

    def answer(value: dict) -> None:
        answers.write(json.dumps(value, default=_plain) + "\n")
        answers.flush()

    spec = json.loads(spec_json)
    try:
        start = time.perf_counter()
        if spec.get("threads"):
            import torch

            torch.set_num_threads(int(spec["threads"]))
        module, function = builder.split(":")
        contender = getattr(importlib.import_module(module), function)(spec)
        info = contender.ops["info"]() if "info" in contender.ops else {}
        answer({"pid": os.getpid(), "seconds": time.perf_counter() - start, "info": info})
    except BaseException:
        answer({"error": traceback.format_exc()})
        return
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "stop":
            break
        try:
            answer({"value": _run(contender, command)})
        except Exception:
            answer({"error": traceback.format_exc()})
    contender.close()


def _run(contender: Any, command: dict) -> Any:
    """One command of :func:`serve` on ``contender``."""
    op = command.pop("op")
    if op == "time":
        from .timing import time_steps

        return time_steps(contender.step, command["start"], command["count"])
    if op == "profile":
        from .phases import profile_phases

        return profile_phases(
            contender, command["start"], command["count"], trace_path=command.get("trace_path")
        )
    if op == "memory":
        from .memory import process_memory

        return process_memory()
    if op in contender.ops:
        return contender.ops[op](**command)
    raise ValueError(f"unknown command {op!r} (contender ops: {sorted(contender.ops)})")


def _plain(value: object) -> str:
    """JSON for what ``json`` cannot write (a dtype, a device): its ``str``."""
    return str(value)
