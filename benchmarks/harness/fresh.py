"""One measurement in a fresh process: run a command, read back the result line it prints.

A benchmark that times a whole run (a trainer from its graph to its rows, a file read, a
``torchrun`` job) starts it as a new interpreter, so that no earlier run's threads, caches
or allocations are in it. The child prints one line ``RESULT {json}`` (:func:`emit`); its
other output is free. :func:`run` starts the command, waits for it with a timeout and
returns that JSON; a child that exits with an error, prints no result line or runs out of
time raises :class:`RunFailed` naming the run, with the end of its output.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence

#: Start of the line that carries a child's result.
TAG = "RESULT "

#: Characters of a failed child's output kept in the error.
TAIL = 2000


class RunFailed(RuntimeError):
    """A fresh process exited with an error, printed no result line or ran out of time."""


def emit(result: dict) -> None:
    """Print ``result`` as the child's result line (flushed, for a parent that reads it)."""
    print(TAG + json.dumps(result), flush=True)


def run(
    command: Sequence[str],
    what: str,
    *,
    timeout: float,
    cwd: str | os.PathLike | None = None,
    env: dict[str, str] | None = None,
    watch: Callable[[int], object] | None = None,
    every: float = 0.05,
) -> dict:
    """Run ``command`` and return the JSON of the last result line it printed.

    Parameters
    ----------
    command : sequence of str
        The child's command line (``sys.executable`` and a script, or a launcher).
    what : str
        The run in words, for errors (``"torch on sbm:20000:2:2:0.9 (seed 4)"``).
    timeout : float
        Seconds the child may take.
    cwd, env
        The child's working folder and environment (default: this process's).
    watch : callable, optional
        Called with the child's pid every ``every`` seconds while it runs (to read its
        memory from outside it, say: :class:`harness.memory.ResidentTrace`).
    every : float
        Seconds between two calls of ``watch``.

    Returns
    -------
    dict
        The child's result.

    Raises
    ------
    RunFailed
        The child exited with an error, printed no result line or took more than
        ``timeout`` seconds; the message names ``what`` and ends with the child's output.
    """
    if watch is None:
        try:
            done = subprocess.run(
                list(command), capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
            )
        except subprocess.TimeoutExpired as expired:
            output = _text(expired.stderr) or _text(expired.stdout)
            raise RunFailed(f"{what} took more than {timeout:g} s:\n{output[-TAIL:]}") from None
    else:
        done = _watched(command, what, timeout, cwd, env, watch, every)
    results = [line[len(TAG) :] for line in done.stdout.splitlines() if line.startswith(TAG)]
    if done.returncode or not results:
        output = done.stderr.strip() or done.stdout.strip()
        status = f"exited with {done.returncode}" if done.returncode else "printed no result"
        raise RunFailed(f"{what} {status}:\n{output[-TAIL:]}")
    return json.loads(results[-1])


def _watched(
    command: Sequence[str],
    what: str,
    timeout: float,
    cwd: str | os.PathLike | None,
    env: dict[str, str] | None,
    watch: Callable[[int], object],
    every: float,
) -> subprocess.CompletedProcess:
    """:func:`run`'s child with ``watch(pid)`` called every ``every`` seconds until it
    exits (its output read all along, so that a full pipe never stops it)."""
    deadline = time.monotonic() + timeout
    with subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env
    ) as child:
        while True:
            try:
                stdout, stderr = child.communicate(timeout=every)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    child.kill()
                    stdout, stderr = child.communicate()
                    output = _text(stderr) or _text(stdout)
                    raise RunFailed(
                        f"{what} took more than {timeout:g} s:\n{output[-TAIL:]}"
                    ) from None
                try:
                    watch(child.pid)
                except (FileNotFoundError, ProcessLookupError):
                    pass  # it exited between the wait and the read
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def _text(output: str | bytes | None) -> str:
    """A timed-out child's captured output (bytes, whatever ``text`` asked) as text."""
    if isinstance(output, bytes):
        return output.decode(errors="replace").strip()
    return (output or "").strip()
