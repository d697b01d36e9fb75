"""The storage interface: what every layout of rows offers.

A storage holds the tables of one embedding: its weight and the per-row state of its
optimizer (moments, step counts, sums), all in the same layout. It is the embedding's
public storage interface (:attr:`graphemb.NodeEmbedding.storage`), the only way optimizers
and checkpoints reach rows, the same for every layout:

* rows of any table of the layout (the weight, or one from ``create_table``):
  ``read_rows(table, ids)`` -- the rows of global ids (a collective *pull* when rows are
  partitioned); ``write_rows(tables, ids, rows)`` -- rows held by any rank written at their
  owner; ``gather(table)`` / ``write_all(table, values)`` -- whole-table copies to and from
  CPU;
* local ids <-> global ids: ``owned_ids()`` -- the global ids whose rows this rank writes;
  ``local_index(ids)`` -- where owned global ids sit in this process's tables;
* a step: ``push(ids, values)`` sends rows to their owners, ``after_update`` ends it;
* the process group: ``rank``, ``world_size``, ``distributed``, ``coordinator`` (the job's
  store) and ``exchange`` (the table's collectives).

The layouts (:mod:`graphemb.storage`) derive from :class:`RowStorage`; this module knows none
of them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import torch

from ..distributed.coordination import Coordinator
from ..distributed.exchange import Exchange
from ..distributed.huge_pages import empty_rows, index_rows, zeros_table
from ..distributed.mailbox import RowParts
from ..distributed.recycling import RecycledBlocks
from .partition import Partition

__all__ = ["RowStorage", "RowPrefetch", "TableInit"]

_KEPT_READ_BYTES = 256 << 20
"""Largest block of read rows a storage keeps for its next reads: a batch's lookup, not a
one-off read of a whole table."""

TableInit = Callable[[torch.Tensor], None]

# Whole-table copies move at most this many bytes per collective round.
_CHUNK_BYTES = 64 << 20


class RowStorage(ABC):
    """Rows of one embedding and of its optimizer state, in one layout.

    Parameters
    ----------
    name : str
        The embedding's name (prefix of its tables' names).
    num_embeddings : int
        Global number of rows.
    device : torch.device
        Where this process keeps its rows.
    partition : Partition
        Which rank owns (updates) which row.
    exchange, coordinator : Exchange, Coordinator, optional
        The process group's row exchange and coordination (``None`` in a single process);
        required where :attr:`needs_exchange`.
    """

    kind: str = "abstract"
    # Sum duplicate rows before pushing them: worth a sort when rows cross a network, not
    # when they are copied through shared memory (the owner sums duplicates anyway).
    coalesce_before_push: bool = True
    # Whether the layout only exists across a process group (exchange and coordinator given).
    needs_exchange: bool = False

    def __init__(
        self,
        name: str,
        num_embeddings: int,
        device: torch.device,
        partition: Partition,
        exchange: Exchange | None = None,
        coordinator: Coordinator | None = None,
    ) -> None:
        if self.needs_exchange and (exchange is None or coordinator is None):
            raise ValueError(
                f"{type(self).__name__} {name!r} needs an exchange and a coordinator, got "
                f"exchange={exchange!r}, coordinator={coordinator!r}"
            )
        self.name = name
        self.num_embeddings = num_embeddings
        self.device = device
        self.partition = partition
        self.exchange = exchange
        self.coordinator = coordinator
        self._read_block = RecycledBlocks(blocks=2, keep_at_most=_KEPT_READ_BYTES)

    @property
    def rank(self) -> int:
        return 0 if self.exchange is None else self.exchange.rank

    @property
    def world_size(self) -> int:
        return 1 if self.exchange is None else self.exchange.world_size

    @property
    def collective_lookups(self) -> bool:
        """Whether every lookup is a collective (rows may come from other ranks)."""
        return False

    @property
    def distributed(self) -> bool:
        """True when rows must be exchanged with other ranks (a process group exists)."""
        return self.exchange is not None

    # ------------------------------------------------------------------ tables
    def create_table(
        self, key: str, row_shape: Sequence[int], dtype: torch.dtype, init: TableInit | None = None
    ) -> torch.Tensor:
        """A new zero table of ``row_shape`` rows in this layout; ``init`` may fill it.

        Collective for distributed storages. ``key`` names the table within the embedding
        (``"weight"``, ``"SparseAdam.exp_avg"``, ...). ``init(table)`` runs where the rows
        are created (once per shared table, on each rank's own rows when partitioned); with
        a process group, if it fails anywhere every rank raises (the failed ranks their own
        error, the others one naming them), at once rather than at the next collective.
        """
        if init is None or self.coordinator is None:
            return self._create_table(key, row_shape, dtype, init)
        phase = f"table/{self.name}/{key}"
        phase = f"{phase}/{self.coordinator.next_generation(phase)}"
        table, error = None, None
        try:
            table = self._create_table(key, row_shape, dtype, init)
        except Exception as err:  # reported to the others, then re-raised
            error = err
        self.coordinator.agree(phase, error, f"initialising table {key!r} of {self.name!r}")
        return table  # type: ignore[return-value]

    def _table_in_process_memory(
        self, rows: int, row_shape: Sequence[int], dtype: torch.dtype, init: TableInit | None
    ) -> torch.Tensor:
        """A zero table of this process's own (huge-page backed on CPU), filled by ``init``.

        An ``init`` with ``zeroes_rows = True`` zeroes the rows itself, chunk by chunk, in
        parallel: the table is then allocated uninitialised (one pass over it fewer).
        """
        shape = (rows, *row_shape)
        if init is not None and getattr(init, "zeroes_rows", False):
            table = empty_rows(shape, dtype, self.device)
        else:
            table = zeros_table(shape, dtype, self.device)
        if init is not None:
            init(table)
        return table

    @abstractmethod
    def _create_table(
        self, key: str, row_shape: Sequence[int], dtype: torch.dtype, init: TableInit | None
    ) -> torch.Tensor:
        """This layout's :meth:`create_table`, without the agreement."""

    @abstractmethod
    def read_rows(self, table: torch.Tensor, ids: torch.Tensor, operation: str) -> torch.Tensor:
        """Rows of the global ``ids`` (int64, shape (M,), on ``device``), in order.

        Collective for partitioned storage: every rank calls it, possibly with no ids.
        """

    def _rows_here(self, table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """``table[ids]`` of this process's table, written into the block of the previous
        read once nothing holds that any more (:class:`RecycledBlocks`: a training loop's
        lookups then skip the kernel's zeroing of fresh pages every batch)."""
        out = self._read_block.empty((ids.numel(), *table.shape[1:]), table.dtype, table.device)
        return index_rows(table, ids, out)

    @abstractmethod
    def local_index(self, ids: torch.Tensor) -> torch.Tensor:
        """Positions in this process's tables of global ``ids`` that this rank owns.

        Parameters
        ----------
        ids : Tensor of int64 (M,), on ``device``
            Global ids owned by this rank (``partition.owner(ids) == rank``).

        Returns
        -------
        Tensor of int64 (M,): row indices into this process's tables.
        """

    def owned_ids(self) -> torch.Tensor:
        """Global ids of the rows this rank owns (writes), ascending, on ``device``.

        ``local_index(owned_ids())`` are their rows in this process's tables.
        """
        return self.partition.global_ids(self.rank, device=self.device)

    def push(
        self, ids: torch.Tensor, values: Sequence[torch.Tensor], operation: str
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Send rows to their owners; returns the rows this rank owns (ids may repeat)."""
        if self.exchange is None or self.world_size == 1:  # nobody to send rows to
            return ids, list(values)
        return self.exchange.push(ids, self.partition.owner(ids), values, operation)

    def push_gradients(
        self, ids: torch.Tensor, grads: torch.Tensor, operation: str
    ) -> tuple[torch.Tensor, torch.Tensor | RowParts]:
        """:meth:`push` of one step's gradient rows ``grads`` (M, dim). A layout may leave
        the received rows where they are (:class:`~graphemb.distributed.mailbox.RowParts`,
        valid until :meth:`after_update`) instead of copying them into one tensor."""
        ids, (grads,) = self.push(ids, [grads], operation)
        return ids, grads

    def write_rows(
        self,
        tables: Sequence[torch.Tensor],
        ids: torch.Tensor,
        rows: Sequence[torch.Tensor],
        operation: str,
    ) -> None:
        """Write ``rows[k]`` into ``tables[k]`` at the global ``ids``, wherever they live.

        Collective for partitioned storage (rows travel to their owners); every rank calls
        it, ranks with nothing to write pass no ids. The ids held by different ranks must be
        disjoint. Call :meth:`after_update` once all writes are done (before anyone reads).
        """
        ids, rows = self.push(ids, rows, operation)
        index = self.local_index(ids)
        for table, values in zip(tables, rows, strict=True):
            table.index_copy_(0, index, values.to(table.dtype))

    # ------------------------------------------------------------------ overlap
    #: Whether :meth:`start_push` and :meth:`prefetch` run asynchronously (the storage was
    #: created with ``overlap=True`` and has exchanges to overlap).
    overlaps: bool = False

    def start_push(
        self,
        ids: torch.Tensor,
        values: Sequence[torch.Tensor],
        operation: str,
        *,
        late: bool = False,
    ) -> Future[tuple[torch.Tensor, list[torch.Tensor]]]:
        """:meth:`push`, started now and finished in the background; ``result()`` waits.

        An overlapping storage pushes twice per step and embedding, on every rank: an early
        push (started by backward, or by ``step()`` on ranks without gradients) and a late
        one (``late=True``, from ``step()``: gradients recorded after the early push
        began, usually none -- then one small vote replaces the exchange). Here: at once.
        """
        done: Future[tuple[torch.Tensor, list[torch.Tensor]]] = Future()
        done.set_result(self.push(ids, values, operation))
        return done

    def prefetch(self, ids: torch.Tensor, operation: str) -> RowPrefetch:
        """Start routing a later lookup of ``ids`` (int64 (M,), checked); see
        :class:`RowPrefetch`. Nothing to do unless lookups are collective and overlapped."""
        return RowPrefetch(ids, None)

    def read_prefetched(self, table: torch.Tensor, prefetched: RowPrefetch, operation: str):
        """Rows of ``prefetched.ids``, read now (collective like :meth:`read_rows`)."""
        return self.read_rows(table, prefetched.ids, operation)

    def after_update(self, operation: str) -> None:  # noqa: B027 - a hook; most layouts need nothing
        """Called once this rank has written rows (an optimizer step, a checkpoint load)."""

    # ------------------------------------------------------------------ whole tables
    def gather(self, table: torch.Tensor, dst: int | None = None) -> torch.Tensor | None:
        """The full table as a new CPU tensor on every rank (``dst=None``) or on ``dst``.

        Ranks other than ``dst`` return ``None``. Collective when rows live on several ranks
        (:attr:`collective_lookups`).
        """
        if not self.collective_lookups:  # every row is here
            if dst is not None and dst != self.rank:
                return None
            return table.detach().to("cpu", copy=True)
        # Rows live on several ranks: pull them in chunks of bounded size.
        wanted = dst is None or dst == self.rank
        out = None
        if wanted:
            out = torch.empty((self.num_embeddings, *table.shape[1:]), dtype=table.dtype)
        # From the row shape, not the local rows: every rank must agree on the rounds, also
        # a rank that owns no rows.
        row_bytes = max(1, math.prod(table.shape[1:]) * table.element_size())
        chunk = max(1, _CHUNK_BYTES // row_bytes)
        for start in range(0, self.num_embeddings, chunk):
            end = min(start + chunk, self.num_embeddings)
            ids = torch.arange(start, end if wanted else start, device=self.device)
            rows = self.read_rows(table, ids, f"gathering table of {self.name!r}")
            if out is not None:
                out[start:end] = rows.cpu()
        return out

    @abstractmethod
    def write_all(self, table: torch.Tensor, values: torch.Tensor) -> None:
        """Copy a full table (every rank passes the same ``values``) into ``table``.

        Collective for distributed storages.
        """

    def local_rows(self) -> int:
        """Number of rows of this rank's tables."""
        return self.num_embeddings

    def table_ids(self, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """Global ids of the rows ``start..stop`` of this process's tables (int64, CPU).

        Here every row sits at its global index; layouts holding a share of the rows
        override it.
        """
        stop = self.local_rows() if stop is None else stop
        return torch.arange(start, stop)


class RowPrefetch:
    """A lookup whose routing runs ahead: ids deduplicated and sent to their owners while
    other work goes on; the rows themselves are read by the lookup that uses it, so they are
    never stale.

    Parameters
    ----------
    ids : Tensor of int64 (M,)
        The ids the lookup will ask for.
    plan : Future or None
        The storage's routing in flight (``None``: nothing to route).
    route : object, optional
        The storage's own record of where the ids live (e.g. which positions its machine
        holds), computed with the plan and read back by ``read_prefetched``.
    """

    def __init__(self, ids: torch.Tensor, plan: Future | None, route: Any = None) -> None:
        self.ids = ids
        self.plan = plan
        self.route = route
