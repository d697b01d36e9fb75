"""Metadata shared through the process group's key-value store, with bounded waits.

graphemb never opens a port or keeps a store of its own: it uses the default store of
``torch.distributed.init_process_group`` (a TCPStore under ``torchrun``), behind the prefix
``graphemb/``. Every wait has a timeout, and a timed-out wait raises
:class:`CoordinationError` naming the waiting rank and the keys still missing.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import torch.distributed as dist

__all__ = ["CoordinationError", "Coordinator", "DEFAULT_TIMEOUT", "as_timedelta"]

DEFAULT_TIMEOUT = timedelta(minutes=10)


class CoordinationError(RuntimeError):
    """Waiting on another process failed or timed out.

    The message names the waiting rank and what it waited for (a store key, a collective of
    a given step, a barrier).
    """


# Errors another rank reports are raised here with their own type when it is one of these.
_REPORTABLE = {
    cls.__name__: cls
    for cls in (ValueError, TypeError, KeyError, FileNotFoundError, FileExistsError, OSError)
}


def as_timedelta(timeout: timedelta | float | int) -> timedelta:
    """Accept seconds or a ``timedelta``; reject non-positive values."""
    if isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"timeout must be a timedelta or seconds, got {timeout!r}")
    if not seconds > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return timedelta(seconds=seconds)


class Coordinator:
    """One rank's view of the job's store.

    Parameters
    ----------
    rank, world_size : int
        This process's rank and the number of ranks that take part.
    timeout : timedelta
        Longest wait for any key.
    """

    def __init__(self, rank: int, world_size: int, timeout: timedelta) -> None:
        from torch.distributed.distributed_c10d import _get_default_store

        self.rank = rank
        self.world_size = world_size
        self.timeout = timeout
        self._store = dist.PrefixStore("graphemb/", _get_default_store())

    # ------------------------------------------------------------------ counters
    def add(self, key: str, amount: int) -> int:
        """Atomically add ``amount`` to the integer at ``key``; returns the new value."""
        return int(self._store.add(key, amount))

    def next_generation(self, name: str) -> int:
        """How many times this rank has asked for ``name`` so far, this call included.

        Every rank creates the same objects in the same order, so the n-th creation of a
        name on one rank meets the n-th creation on the others under the same key, without
        any per-process registry.
        """
        return self.add(f"generation/{name}/{self.rank}", 1)

    # ------------------------------------------------------------------ documents
    def publish(self, key: str, document: dict[str, Any]) -> None:
        self._store.set(key, json.dumps(document))

    def read(self, key: str, operation: str) -> dict[str, Any]:
        """Wait for ``key`` (at most ``timeout``) and return its JSON document."""
        self.wait([key], operation)
        return json.loads(self._store.get(key))

    def agree(self, key: str, error: BaseException | None, operation: str) -> None:
        """Every rank reports how a phase went; if any rank failed, every rank raises.

        Call it on every rank, with the exception this rank's part of the phase raised (or
        None), as soon as that part is over: a rank that fails must not skip the call, or
        the others wait for its report until the timeout. A rank re-raises its own error;
        the others raise an error of the same built-in type (the first of
        ``ValueError, TypeError, KeyError, FileNotFoundError, FileExistsError, OSError`` the
        failed error derives from, else :class:`CoordinationError`) whose message names
        every failed rank, its error type and message. ``key`` must be unique to this phase
        (use :meth:`next_generation`).
        """
        report = None
        if error is not None:
            report = {
                "type": type(error).__name__,
                "bases": [cls.__name__ for cls in type(error).__mro__],
                "message": str(error),
            }
            self._store.set(f"{key}/failed", str(self.rank))  # see failed(): others stop early
        self.publish(f"{key}/{self.rank}", {"error": report})
        reports = []
        for rank in range(self.world_size):
            if rank != self.rank:
                document = self.read(f"{key}/{rank}", f"rank {rank} to finish {operation}")
                if document["error"] is not None:
                    reports.append((rank, document["error"]))
        if error is not None:
            raise error
        if reports:
            described = "; ".join(
                f"rank {rank}: {report['type']}: {report['message']}" for rank, report in reports
            )
            first = reports[0][1]
            kind = next(
                (
                    _REPORTABLE[name]
                    for name in first.get("bases", [first["type"]])
                    if name in _REPORTABLE
                ),
                CoordinationError,
            )
            ranks = ", ".join(str(rank) for rank, _ in reports)
            raise kind(
                f"rank {self.rank} of {self.world_size}: {operation} failed on rank {ranks} "
                f"({described})"
            )

    def failed(self, key: str) -> bool:
        """Whether a rank has already reported a failure of the phase ``key`` to
        :meth:`agree` (does not wait): lets long work stop as soon as a peer failed."""
        return self._exists(f"{key}/failed")

    def wait(self, keys: list[str], operation: str, timeout: timedelta | None = None) -> None:
        """Block until every key exists, at most ``timeout`` (default: the job's); on
        timeout name the rank and the missing keys."""
        timeout = self.timeout if timeout is None else timeout
        try:
            self._store.wait(keys, timeout)
        except Exception as err:  # the store raises RuntimeError / DistStoreError subclasses
            missing = [k for k in keys if not self._exists(k)]
            raise CoordinationError(
                f"rank {self.rank} of {self.world_size}: gave up after "
                f"{timeout.total_seconds():g}s waiting for {operation} "
                f"(store keys still missing: {missing or keys}): {err}"
            ) from err

    def _exists(self, key: str) -> bool:
        try:
            return bool(self._store.check([key]))
        except AttributeError:  # PrefixStore of torch 2.2 has no check(): wait ~0 s instead
            try:
                self._store.wait([key], timedelta(milliseconds=10))
            except Exception:
                return False
            return True
