"""Machine-aware storage: rows partitioned across machines, one shared copy per machine.

Ranks form M machines of R ranks each (:mod:`graphemb.distributed.topology`). A row-level
:class:`~graphemb.Partition` over the W = M * R ranks says which rank *owns* (updates) each
row; a machine holds the rows of its R ranks once, in shared memory that they all map: the
concatenation of their parts, local rank 0's first. So

* a lookup reads rows of its own machine straight from the shared table; the others are
  *pulled* once per machine: each rank hands the remote ids it needs, through shared memory,
  to its machine's *delegate* for their owner -- the rank whose local rank is the owner's --
  which merges the requests of the whole machine (a row several ranks need crosses once),
  pulls the rows from its *peer* on the owning machine (the rank with the same local rank
  there, i.e. the owner; one process group per local rank, of size M, carries these) and
  hands them back through shared memory. Every cross-machine message goes between peers,
  the R ranks of a machine share the traffic, and it is the minimum: each remote row a
  machine needs crosses once;
* a step sends each gradient row through shared memory (:mod:`graphemb.distributed.mailbox`) to the
  rank of its machine whose local rank is the owner's, which sums the duplicates of its
  whole machine (the aggregation) and pushes the sums to its peer on the owning machine --
  the owner itself -- which updates the machine's shared table.

With the default partition (``id % W``), machine ``m`` holds the rows ``id % M == m``.
Writers never overlap (one owner per row), and an end-of-step barrier inside the machine is
enough: another machine reads its rows only through a peer that has passed that barrier.
"""

from __future__ import annotations

import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import NamedTuple

import torch

from ..distributed.coordination import CoordinationError, Coordinator
from ..distributed.exchange import Exchange, PullPlan
from ..distributed.huge_pages import index_rows
from ..distributed.mailbox import SharedMemoryMailboxes
from ..distributed.shm import create_shared_table
from ..distributed.topology import Topology
from .base import RowPrefetch, RowStorage
from .partition import Partition

__all__ = ["HierarchicalStorage"]


class HierarchicalStorage(RowStorage):
    """Rows partitioned across machines, each machine's share in shared memory.

    Collective to create (it creates one process group per machine and one per local rank).

    Parameters
    ----------
    name : str
        The embedding's name.
    num_embeddings : int
        Global number of rows.
    partition : Partition
        Owner rank of every row (``num_parts`` = world size).
    topology : Topology
        Machines of the ranks.
    timeout : timedelta
        Bound of every wait.
    """

    kind = "hierarchical"
    collective_lookups = True
    coalesce_before_push = False  # the handler sums its machine's rows (see push)

    def __init__(
        self,
        name: str,
        num_embeddings: int,
        partition: Partition,
        topology: Topology,
        timeout: timedelta,
        *,
        overlap: bool = False,
    ) -> None:
        label = f"NodeEmbedding {name!r}"
        cpu = torch.device("cpu")
        exchange = Exchange.create(cpu, timeout, label)
        coordinator = Coordinator(exchange.rank, exchange.world_size, timeout)
        super().__init__(name, num_embeddings, cpu, partition, exchange, coordinator)
        self._coordinator = coordinator
        self.topology = topology

        def machine_group() -> Exchange:  # the ranks of each machine
            groups = [topology.ranks_of(m) for m in range(topology.num_machines)]
            return Exchange.create_subgroup(groups, cpu, timeout, label)

        def peer_group() -> Exchange:  # the ranks of one local rank across machines
            groups = [topology.peers(lr) for lr in range(topology.ranks_per_machine)]
            return Exchange.create_subgroup(groups, cpu, timeout, label)

        # Collective: every rank creates the same groups in the same order.
        self._intra, self._cross = machine_group(), peer_group()
        # Pushes run on groups of their own: with overlap they run in a background thread,
        # and collectives of one group must come in the same order on every rank.
        self._push_intra, self._push_cross = self._intra, self._cross
        self._vote = exchange
        self.overlaps = overlap
        if overlap:
            self._vote = Exchange.create(cpu, timeout, label)
            self._push_intra, self._push_cross = machine_group(), peer_group()
            self._fetch_intra, self._fetch_cross = machine_group(), peer_group()
            # One thread each: a group's collectives stay in call order.
            self._pusher = ThreadPoolExecutor(1, thread_name_prefix=f"graphemb-push-{name}")
            self._fetcher = ThreadPoolExecutor(1, thread_name_prefix=f"graphemb-fetch-{name}")
            for pool in (self._pusher, self._fetcher):
                weakref.finalize(self, pool.shutdown, wait=False)
        for group in self._groups():
            group.diagnose = self._missing_ranks
        self._open_mailboxes(name, timeout)
        self._index_math(partition, topology)

    def _open_mailboxes(self, name: str, timeout: timedelta) -> None:
        """The machine's shared-memory mailboxes (collective within the machine)."""
        # Shared-memory and store names are per machine: "machines" may share one /dev/shm.
        self._machine_name = f"{name}/machine{self.topology.machine}"
        self._local = Coordinator(
            self.topology.local_rank, self.topology.ranks_per_machine, timeout
        )
        self._mailboxes = SharedMemoryMailboxes(self._machine_name, self._local, self._push_intra)
        # Lookups: requests to the delegates, answers back (two sets used in turn: a set is
        # rewritten only after the next answer barrier, by which every rank has read it).
        self._requests = SharedMemoryMailboxes(
            f"{self._machine_name}/requests", self._local, self._intra
        )
        self._answers = [
            SharedMemoryMailboxes(f"{self._machine_name}/answers{k}", self._local, self._intra)
            for k in range(2)
        ]
        self._answer_turn = 0
        if self.overlaps:  # prefetches send requests from the fetching thread, on its group
            self._fetch_requests = SharedMemoryMailboxes(
                f"{self._machine_name}/prefetch-requests", self._local, self._fetch_intra
            )

    def _groups(self) -> set[Exchange]:
        """Every process group of this storage (some may be the same object)."""
        groups = {self.exchange, self._intra, self._cross, self._vote}
        groups |= {self._push_intra, self._push_cross}
        if self.overlaps:
            groups |= {self._fetch_intra, self._fetch_cross}
        return groups  # type: ignore[return-value]

    def _index_math(self, partition: Partition, topology: Topology) -> None:
        """Per-rank tables: machine, local rank, first machine row of each rank's part."""
        world = topology.world_size
        machine_of_rank = torch.tensor(topology.machine_of_rank, dtype=torch.int64)
        local_of_rank = torch.tensor(topology.local_rank_of_rank, dtype=torch.int64)
        sizes = torch.tensor(partition.local_sizes(), dtype=torch.int64)
        offset = torch.zeros(world, dtype=torch.int64)  # first machine row of each rank's part
        for m in range(topology.num_machines):  # a loop over machines, not rows
            ranks = torch.tensor(topology.ranks_of(m))
            offset[ranks] = torch.cumsum(sizes[ranks], 0) - sizes[ranks]
        self._machine_of_rank = machine_of_rank
        self._local_of_rank = local_of_rank
        self._offset = offset
        # Group rank of each machine's peer in the cross group (peers sorted by global rank).
        peers = topology.peers(topology.local_rank)
        self._cross_rank_of_machine = torch.tensor(
            [sorted(peers).index(p) for p in peers], dtype=torch.int64
        )
        self._machine_rows = int(sizes[torch.tensor(topology.ranks_of(topology.machine))].sum())

    # ------------------------------------------------------------------ index math
    def _machine_index(self, ids: torch.Tensor) -> torch.Tensor:
        """Row of each id in its machine's table (valid on the machine that holds it)."""
        return self._offset[self.partition.owner(ids)] + self.partition.to_local(ids)

    def _machine_of(self, ids: torch.Tensor) -> torch.Tensor:
        return self._machine_of_rank[self.partition.owner(ids)]

    def local_rows(self) -> int:
        return self._machine_rows

    def local_index(self, ids):
        return self._machine_index(ids)

    def table_ids(self, start=0, stop=None):
        # The machine's table: its ranks' parts one after the other (see _index_math).
        stop = self.local_rows() if stop is None else stop
        pieces = [torch.empty(0, dtype=torch.int64)]
        for rank in self.topology.ranks_of(self.topology.machine):
            begin = int(self._offset[rank])
            end = begin + self.partition.local_size(rank)
            if max(start, begin) < min(stop, end):
                local = torch.arange(max(start, begin), min(stop, end)) - begin
                pieces.append(self.partition.to_global(local, rank))
        return torch.cat(pieces)

    # ------------------------------------------------------------------ tables
    def _create_table(self, key, row_shape, dtype, init):
        return create_shared_table(
            self._local,
            f"{self._machine_name}/{key}",
            (self._machine_rows, *row_shape),
            dtype,
            init,
        )

    def read_rows(self, table, ids, operation):
        local, remote, inverse, wanted = self._route(ids)
        pull = self._request(wanted, self._requests, self._cross, operation)
        return self._read_planned(table, ids, local, remote, inverse, pull, operation)

    def prefetch(self, ids, operation):
        if not self.overlaps:
            return RowPrefetch(ids, None)
        route = self._route(ids)
        pull = self._fetcher.submit(self._prefetch_request, route.wanted, operation)
        return RowPrefetch(ids, pull, route)

    def read_prefetched(self, table, prefetched, operation):
        if prefetched.plan is None:
            return self.read_rows(table, prefetched.ids, operation)
        local, remote, inverse, _ = prefetched.route
        pull = prefetched.plan.result()
        return self._read_planned(table, prefetched.ids, local, remote, inverse, pull, operation)

    def _route(self, ids: torch.Tensor) -> _Route:
        """Positions of this machine's ids and of the others, and the others deduplicated
        (``wanted[inverse] == ids[remote]``)."""
        here = self._machine_of(ids) == self.topology.machine
        local = here.nonzero().squeeze(1)
        remote = (~here).nonzero().squeeze(1)
        wanted, inverse = torch.unique(ids[remote], return_inverse=True)
        return _Route(local, remote, inverse, wanted)

    def _request(
        self,
        wanted: torch.Tensor,
        requests: SharedMemoryMailboxes,
        cross: Exchange,
        operation: str,
    ) -> _MachinePull:
        """Route a lookup's remote ids (collective): to the machine's delegates through
        shared memory, merged there, and on to the owners. No row is read yet."""
        delegate = self._local_of_rank[self.partition.owner(wanted)]
        asked = requests.deliver(wanted, delegate, [], f"{operation} (requests)")
        needed, needed_inverse = torch.unique(asked.ids, return_inverse=True)
        peer = self._cross_rank_of_machine[self._machine_of(needed)]
        return _MachinePull(
            order=torch.argsort(delegate, stable=True),
            asked=asked.ids,
            askers=torch.repeat_interleave(
                torch.arange(len(asked.counts)), torch.tensor(asked.counts, dtype=torch.int64)
            ),
            needed_inverse=needed_inverse,
            plan=cross.plan_pull(needed, peer, operation),
        )

    def _prefetch_request(self, wanted: torch.Tensor, operation: str) -> _MachinePull:
        pull = self._request(wanted, self._fetch_requests, self._fetch_cross, operation)
        # Prefetches may run several lookups ahead: nobody rewrites a request mailbox
        # before every rank has read it.
        self._fetch_intra.barrier(f"{operation} (requests read)")
        self._fetch_requests.after_barrier()
        return pull

    def _read_planned(self, table, ids, local, remote, inverse, pull, operation) -> torch.Tensor:
        def serve(requested: torch.Tensor) -> torch.Tensor:
            return index_rows(table, self._machine_index(requested))

        rows = torch.empty((ids.numel(), *table.shape[1:]), dtype=table.dtype)
        rows[local] = index_rows(table, self._machine_index(ids[local]))
        # The delegates read the rows their machine asked for from the owners ...
        needed = self._cross.answer_pull(pull.plan, serve, operation)
        # ... and hand each asker its rows back, in the order it asked for them.
        answers = self._answers[self._answer_turn]
        self._answer_turn ^= 1
        answered = answers.deliver(
            pull.asked, pull.askers, [needed[pull.needed_inverse]], f"{operation} (answers)"
        ).values[0]
        self._requests.after_barrier()  # past the answer barrier: requests all mapped
        self._answers[self._answer_turn].after_barrier()
        wanted_rows = torch.empty_like(answered)
        wanted_rows[pull.order] = answered
        rows[remote] = wanted_rows[inverse]
        return rows

    # ------------------------------------------------------------------ a step
    def push(self, ids, values, operation):
        if self.overlaps:  # every push in the pushing thread: one order per group
            return self.start_push(ids, values, operation).result()
        return self._push(ids, values, operation)

    def start_push(self, ids, values, operation, *, late=False):
        if not self.overlaps:
            return super().start_push(ids, values, operation, late=late)
        return self._pusher.submit(self._push, ids, list(values), operation, late)

    def _push(self, ids, values, operation, late: bool = False):
        if late and not self._vote.true_on_any_rank(
            ids.numel() > 0, f"{operation} (any late rows?)"
        ):
            return ids, list(values)  # nobody has late rows: nothing to exchange
        owner = self.partition.owner(ids)
        ids, values, _ = self._mailboxes.deliver(ids, self._local_of_rank[owner], values, operation)
        ids, values = _summed(ids, values)
        peer = self._cross_rank_of_machine[self._machine_of(ids)]
        return self._push_cross.push(ids, peer, values, operation)

    def write_rows(self, tables, ids, rows, operation):
        # Any rank of the owning machine may write its rows (ids are disjoint): send them to
        # the peer there, which writes into the shared table; after_update publishes.
        peer = self._cross_rank_of_machine[self._machine_of(ids)]
        ids, rows = self._cross.push(ids, peer, rows, operation)
        index = self._machine_index(ids)
        for table, values in zip(tables, rows, strict=True):
            table.index_copy_(0, index, values.to(table.dtype))

    def after_update(self, operation):
        self._intra.barrier(operation)
        for mailboxes in (self._mailboxes, self._requests, *self._answers):
            mailboxes.after_barrier()

    # ------------------------------------------------------------------ whole tables
    def write_all(self, table, values):
        own = self.owned_ids()
        rows = values.index_select(0, own.to(values.device)).to(table.device)
        table.index_copy_(0, self._machine_index(own), rows)
        self._intra.barrier(f"writing table of {self.name!r}")

    # ------------------------------------------------------------------ traffic
    def bytes_across_machines(self) -> int:
        """Payload bytes (ids and rows) this rank has sent to other machines so far.

        Every cross-machine message of this storage goes between peers, so this is what
        this rank's peer groups sent to their other members.
        """
        groups = {self._cross, self._push_cross}
        if self.overlaps:
            groups.add(self._fetch_cross)
        return sum(sum(ex.bytes_sent) - ex.bytes_sent[ex.rank] for ex in groups)

    # ------------------------------------------------------------------ failures
    def _missing_ranks(self) -> str:
        """After a failed collective: which ranks did not report in within the timeout.

        Every survivor reports through the store and waits for the others' reports, so each
        of them names the same dead ranks. A survivor blocked in another collective notices
        the failure up to one timeout later than this rank, so the reports are awaited for
        two timeouts in all (one deadline for every rank, not one per rank).
        """
        try:
            # Job-wide keys: survivors may have failed in collectives of different tables.
            self._coordinator.publish(f"alive/{self.rank}", {})
            deadline = time.monotonic() + 2 * self._coordinator.timeout.total_seconds()
            missing = []
            for r in range(self.world_size):
                if r == self.rank:
                    continue
                left = timedelta(seconds=max(deadline - time.monotonic(), 0.01))
                try:
                    self._coordinator.wait([f"alive/{r}"], f"rank {r} to report in", left)
                except CoordinationError:
                    missing.append(r)
        except Exception:  # the store itself is gone: nothing more to learn
            return " (the job's store is unreachable)"
        if not missing:
            return ""
        machines = sorted({self.topology.machine_of_rank[r] for r in missing})
        return f"; rank(s) {missing} (machine(s) {machines}) did not report in: gone or stuck"


class _Route(NamedTuple):
    """Where a lookup's ids live (see ``_route``)."""

    local: torch.Tensor  # (L,) positions of the ids this machine holds
    remote: torch.Tensor  # (R,) positions of the others
    inverse: torch.Tensor  # (R,) position of each remote id among ``wanted``
    wanted: torch.Tensor  # (K,) the remote ids, deduplicated and sorted


class _MachinePull(NamedTuple):
    """A lookup's remote rows, routed through the machine's delegates (see ``_request``)."""

    order: torch.Tensor  # (K,) this rank's wanted ids grouped by delegate
    asked: torch.Tensor  # (A,) ids the machine's ranks asked of this rank (as delegate)
    askers: torch.Tensor  # (A,) the local rank that asked for each
    needed_inverse: torch.Tensor  # (A,) position of each asked id among the merged ids
    plan: PullPlan  # the merged ids, on their way to the owners


def _summed(
    ids: torch.Tensor, values: list[torch.Tensor]
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Unique ids and the sums of their rows (a machine's gradients, aggregated)."""
    unique, inverse = torch.unique(ids, return_inverse=True)
    summed = [
        torch.zeros((unique.numel(), *v.shape[1:]), dtype=v.dtype).index_add_(0, inverse, v)
        for v in values
    ]
    return unique, summed
