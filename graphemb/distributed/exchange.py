"""Moving rows between ranks: all-to-all *push* and *pull* over uneven splits.

This is the only module that calls collectives. It knows nothing about what the rows mean:
the caller says which rank owns each row (``owners``) and, for a pull, how an owner reads
the rows asked of it.

* **push** ``(ids, values...) -> owners``: every rank sends each row to its owner and
  receives the rows it owns (used for gradients, and for writing rows that a loader holds).
* **pull** ``ids -> rows``: every rank sends the ids it needs to their owners, each owner
  answers with its rows, and the requester gets them back in request order.

Both are two ``all_to_all_single`` calls (counts, then payload) on a process group of the
backend that matches the rows' device: gloo for CPU tensors, NCCL for CUDA tensors. Every
rank takes part in every call, with or without rows. A collective that fails or exceeds the
group's timeout raises :class:`~graphemb.distributed.coordination.CoordinationError` naming
the rank and the operation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import NamedTuple

import torch
import torch.distributed as dist

from .coordination import CoordinationError

__all__ = ["Exchange", "PullPlan"]

# dtypes gloo moves natively; anything else travels as raw bytes.
_GLOO_NATIVE = {torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.int8}


class PullPlan(NamedTuple):
    """Routing of a pull whose ids are exchanged but whose rows are not yet read."""

    order: torch.Tensor  # (M,) int64: the requested ids grouped by owner
    send_counts: list[int]  # ids sent to each rank
    recv_counts: list[int]  # ids each rank asks of this one
    requested: torch.Tensor  # (R,) int64: the ids this rank will serve


class Exchange:
    """Collectives of one table's process group.

    Parameters
    ----------
    group : ProcessGroup
        The group whose ranks hold the table.
    device : torch.device
        Where the tensors handed to the collectives live (CPU for gloo, CUDA for NCCL).
    timeout : timedelta
        The group's timeout (quoted in error messages).
    label : str
        What the rows belong to, e.g. ``"NodeEmbedding 'user'"`` (quoted in error messages).
    """

    def __init__(
        self, group: dist.ProcessGroup, device: torch.device, timeout: timedelta, label: str
    ) -> None:
        self.group = group
        self.device = device
        self.timeout = timeout
        self.label = label
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self._backend = dist.get_backend(group)
        # Called after a collective failed; returns words appended to the error (e.g. which
        # ranks are gone). Set by storages that can find out.
        self.diagnose: Callable[[], str] | None = None
        # Payload bytes sent to each rank of the group so far (ids and rows; not the counts):
        # what benchmarks and tests read to measure traffic.
        self.bytes_sent = [0] * self.world_size

    @classmethod
    def create(cls, device: torch.device, timeout: timedelta, label: str) -> Exchange:
        """A new group over all ranks of the default group, with a backend for ``device``.

        Collective: every rank must call it, in the same order as its other group
        creations. A dedicated group lets CPU tables use gloo under an NCCL default group
        and gives every collective of the table the table's own timeout.
        """
        backend = "nccl" if device.type == "cuda" else "gloo"
        group = dist.new_group(backend=backend, timeout=timeout)
        return cls(group, device, timeout, label)

    @classmethod
    def create_subgroup(
        cls, groups: Sequence[Sequence[int]], device: torch.device, timeout: timedelta, label: str
    ) -> Exchange:
        """The group, among ``groups`` (disjoint lists of global ranks covering every rank),
        that holds this rank; its ranks are numbered in ascending global rank.

        Collective: every rank creates every group, in the same order, so every rank must
        call it with the same ``groups``.
        """
        backend = "nccl" if device.type == "cuda" else "gloo"
        me, mine = dist.get_rank(), None
        for ranks in groups:
            group = dist.new_group(sorted(ranks), timeout=timeout, backend=backend)
            if me in ranks:
                mine = group
        if mine is None:
            raise ValueError(f"rank {me} is in none of the groups {groups}")
        return cls(mine, device, timeout, label)

    # ------------------------------------------------------------------ public
    def push(
        self,
        ids: torch.Tensor,
        owners: torch.Tensor,
        values: Sequence[torch.Tensor],
        operation: str,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Send each row to its owner.

        Parameters
        ----------
        ids : Tensor of int64, shape (M,)
            Row ids (opaque to the exchange; typically global ids).
        owners : Tensor of int64, shape (M,)
            Owner rank of each row.
        values : sequence of Tensor, each of shape (M, ...)
            Payloads travelling with the ids.
        operation : str
            Description for error messages, e.g. ``"gradient push of step 12"``.

        Returns
        -------
        ids : Tensor of int64, shape (R,)
            The rows this rank owns, grouped by sender rank (duplicates possible).
        values : list of Tensor, each of shape (R, ...)
        """
        order, send_counts, recv_counts = self._route(owners, operation)
        received_ids = self._all_to_all(ids[order], send_counts, recv_counts, operation)
        received = [self._all_to_all(v[order], send_counts, recv_counts, operation) for v in values]
        return received_ids, received

    def pull(
        self,
        ids: torch.Tensor,
        owners: torch.Tensor,
        serve: Callable[[torch.Tensor], torch.Tensor],
        operation: str,
    ) -> torch.Tensor:
        """Fetch the rows ``ids`` from their owners.

        Parameters
        ----------
        ids : Tensor of int64, shape (M,)
            Rows wanted by this rank.
        owners : Tensor of int64, shape (M,)
            Owner rank of each id.
        serve : callable
            ``serve(requested_ids) -> rows``: how this rank reads the rows others ask of it;
            ``requested_ids`` has shape (R,), the result shape (R, ...).
        operation : str
            Description for error messages.

        Returns
        -------
        Tensor of shape (M, ...)
            The rows of ``ids``, in the order of ``ids``.
        """
        return self.answer_pull(self.plan_pull(ids, owners, operation), serve, operation)

    def plan_pull(self, ids: torch.Tensor, owners: torch.Tensor, operation: str) -> PullPlan:
        """The first half of :meth:`pull`: tell every owner which of its rows it will be
        asked for (counts, then ids). Collective; may run ahead of :meth:`answer_pull`, on
        another group of the same ranks (a prefetch), since no row is read yet."""
        order, send_counts, recv_counts = self._route(owners, operation)
        requested = self._all_to_all(ids[order], send_counts, recv_counts, operation)
        return PullPlan(order, send_counts, recv_counts, requested)

    def answer_pull(
        self, plan: PullPlan, serve: Callable[[torch.Tensor], torch.Tensor], operation: str
    ) -> torch.Tensor:
        """The second half of :meth:`pull`: owners read the planned rows now and send them;
        returns them in the order of the planned ids. Collective."""
        answered = self._all_to_all(
            serve(plan.requested), plan.recv_counts, plan.send_counts, operation
        )
        rows = torch.empty_like(answered)
        rows[plan.order] = answered  # undo the grouping by owner
        return rows

    def barrier(self, operation: str) -> None:
        """Wait until every rank arrives (bounded by the group's timeout).

        A plain barrier, not ``monitored_barrier``: the latter names the missing ranks but
        costs ~6 ms on gloo against ~0.4 ms (measured here), once or twice per step. A rank
        alone waits for nobody: it returns at once.
        """
        if self.world_size > 1:
            self._run(operation, lambda: dist.barrier(group=self.group))

    def true_on_any_rank(self, flag: bool, operation: str) -> bool:
        """Whether ``flag`` is true on any rank (one small all-reduce).

        Lets ranks that work in lockstep rounds -- a checkpoint streaming rows -- stop in
        the same round as soon as one of them failed, instead of running on into
        collectives the failed rank no longer joins.
        """
        vote = torch.tensor([1 if flag else 0], dtype=torch.int64, device=self.device)
        self._run(operation, lambda: dist.all_reduce(vote, dist.ReduceOp.MAX, group=self.group))
        return bool(vote.item())

    def broadcast_bytes(self, data: bytes | None, src: int, operation: str) -> bytes:
        """``data`` of rank ``src`` on every rank (others pass ``None``)."""
        if self.rank == src and data is None:
            raise TypeError(f"broadcast_bytes: rank {src} (the source) passed no data")
        size = torch.tensor([len(data) if data is not None else 0], device=self.device)
        self._run(operation, lambda: dist.broadcast(size, src, group=self.group))
        if int(size.item()) == 0:
            return b""
        payload = torch.empty(int(size.item()), dtype=torch.uint8)
        if data is not None and self.rank == src:
            payload = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        payload = payload.to(self.device)
        self._run(operation, lambda: dist.broadcast(payload, src, group=self.group))
        return payload.cpu().numpy().tobytes()

    # ------------------------------------------------------------------ internals
    def _route(
        self, owners: torch.Tensor, operation: str
    ) -> tuple[torch.Tensor, list[int], list[int]]:
        """Group rows by owner; agree with every rank on how many rows travel where."""
        order = torch.argsort(owners, stable=True)
        send_counts = torch.bincount(owners, minlength=self.world_size)
        recv_counts = torch.empty_like(send_counts)
        self._run(
            f"{operation} (row counts)",
            lambda: dist.all_to_all_single(recv_counts, send_counts, group=self.group),
        )
        return order, send_counts.tolist(), recv_counts.tolist()

    def _all_to_all(
        self, send: torch.Tensor, send_counts: list[int], recv_counts: list[int], operation: str
    ) -> torch.Tensor:
        send = send.contiguous()
        recv = send.new_empty((sum(recv_counts), *send.shape[1:]))
        row_bytes = math.prod(send.shape[1:]) * send.element_size()
        for rank, count in enumerate(send_counts):
            self.bytes_sent[rank] += count * row_bytes
        if self._backend == "gloo" and send.dtype not in _GLOO_NATIVE:
            # float16 / bfloat16 / bool rows travel as bytes; the row split is unchanged.
            wire_send, wire_recv = _as_bytes(send), _as_bytes(recv)
        else:
            wire_send, wire_recv = send, recv
        self._run(
            operation,
            lambda: dist.all_to_all_single(
                wire_recv, wire_send, recv_counts, send_counts, group=self.group
            ),
        )
        return recv

    def _run(self, operation: str, collective: Callable[[], object]) -> None:
        try:
            collective()
        except Exception as err:  # gloo/NCCL raise RuntimeError or DistBackendError
            diagnosis = "" if self.diagnose is None else self.diagnose()
            raise CoordinationError(
                f"rank {self.rank} of {self.world_size}: {operation} for {self.label} failed or "
                f"timed out (timeout {self.timeout.total_seconds():g}s){diagnosis}: {err}"
            ) from err


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    """View rows of any dtype as rows of bytes (shape (M, bytes_per_row))."""
    row_numel = math.prod(t.shape[1:])  # explicit: reshape(-1) is ambiguous for zero rows
    return t.reshape(t.shape[0], row_numel).view(torch.uint8)
