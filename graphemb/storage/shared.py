"""Every row in shared memory that all ranks of one machine map; each row written by its
owner rank."""

from __future__ import annotations

import torch

from ..distributed.coordination import Coordinator
from ..distributed.exchange import Exchange
from ..distributed.mailbox import SharedMemoryMailboxes
from ..distributed.shm import create_shared_table
from .base import RowStorage
from .partition import Partition

__all__ = ["SharedMemoryStorage"]


class SharedMemoryStorage(RowStorage):
    """Every row in shared memory that all ranks of one machine map; owners write rows."""

    kind = "shared"
    coalesce_before_push = False  # measured: -14 ms of a ~96 ms step per rank (2 ranks)
    # Rows an owner takes at a time by default: 512 rows fill whole 4 KiB pages of every
    # table (8-byte step counts included), so each rank's update touches its own pages
    # only, half as many as with rows dealt one by one (shared memory usually gets no huge
    # pages: Linux's shmem_enabled defaults to "never").
    owner_block_rows = 512
    blocks_per_rank = 8  # small tables: smaller blocks, so that every rank owns rows

    @classmethod
    def default_partition(cls, num_embeddings: int, world_size: int) -> Partition:
        """Who updates which row when the user gives no partition: blocks of rows dealt out
        in turn, as balanced as ``id % world_size``; a block holds
        :attr:`owner_block_rows` rows, fewer where the table has less than
        :attr:`blocks_per_rank` such blocks per rank."""
        rows = num_embeddings // (cls.blocks_per_rank * world_size)
        return Partition.blocks(num_embeddings, world_size, max(1, min(cls.owner_block_rows, rows)))

    def __init__(
        self,
        name: str,
        num_embeddings: int,
        partition: Partition,
        exchange: Exchange,
        coordinator: Coordinator,
    ) -> None:
        super().__init__(
            name, num_embeddings, torch.device("cpu"), partition, exchange, coordinator
        )
        self._mailboxes = SharedMemoryMailboxes(name, coordinator, exchange)

    def _create_table(self, key, row_shape, dtype, init):
        if self.world_size == 1:  # nobody else maps it: process memory, huge pages, no /dev/shm
            return self._table_in_process_memory(self.num_embeddings, row_shape, dtype, init)
        return create_shared_table(
            self.coordinator, f"{self.name}/{key}", (self.num_embeddings, *row_shape), dtype, init
        )

    def read_rows(self, table, ids, operation):
        return self._rows_here(table, ids)

    def local_index(self, ids):
        return ids  # the shared table holds every row at its global index

    def push(self, ids, values, operation):
        # Through shared memory rather than gloo's sockets (see graphemb.distributed.mailbox).
        ids, values, _ = self._mailboxes.deliver(ids, self.partition.owner(ids), values, operation)
        return ids, values

    def push_gradients(self, ids, grads, operation):
        # The update reads the rows in place: this rank's own in grads, the others' in
        # their senders' mailboxes, which nobody rewrites before after_update's barrier.
        return self._mailboxes.deliver_in_place(ids, self.partition.owner(ids), grads, operation)

    def write_rows(self, tables, ids, rows, operation):
        # Every rank can address every row: write in place, no traffic (after_update syncs).
        for table, values in zip(tables, rows, strict=True):
            table.index_copy_(0, ids, values.to(table.dtype))

    def after_update(self, operation):
        # Nobody may read the next step's rows before every owner has written them.
        self.exchange.barrier(operation)
        self._mailboxes.after_barrier()

    def write_all(self, table, values):
        # Each rank copies one contiguous block; the barrier publishes all blocks.
        per_rank = -(-self.num_embeddings // self.world_size)
        start = min(self.rank * per_rank, self.num_embeddings)
        end = min(start + per_rank, self.num_embeddings)
        table[start:end].copy_(values[start:end])
        self.exchange.barrier(f"writing table of {self.name!r}")
