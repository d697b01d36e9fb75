"""Each rank holds only the rows it owns; lookups pull rows from their owners."""

from __future__ import annotations

import torch

from ..distributed.huge_pages import index_rows
from .base import RowStorage

__all__ = ["PartitionedStorage"]


class PartitionedStorage(RowStorage):
    """Each rank holds only the rows it owns, in its own CPU or GPU memory.

    In a process group of one rank (one GPU under ``torchrun``, say) that rank owns every
    row at its global index: lookups read its table and gradients go straight to the
    update, as in a single process; nothing is exchanged, since there is nobody to
    exchange with.
    """

    kind = "partitioned"
    needs_exchange = True

    @property
    def collective_lookups(self) -> bool:
        return self.world_size > 1  # rows to pull from other ranks

    def local_rows(self):
        return self.partition.local_size(self.rank)

    def table_ids(self, start=0, stop=None):
        stop = self.local_rows() if stop is None else stop
        return self.partition.to_global(torch.arange(start, stop), self.rank)

    def _create_table(self, key, row_shape, dtype, init):
        return self._table_in_process_memory(self.local_rows(), row_shape, dtype, init)

    def read_rows(self, table, ids, operation):
        if not self.collective_lookups:  # every row is here, at its global index
            return self._rows_here(table, ids)

        def serve(requested: torch.Tensor) -> torch.Tensor:
            return index_rows(table, self.partition.to_local(requested))

        return self.exchange.pull(ids, self.partition.owner(ids), serve, operation)

    def local_index(self, ids):
        # One part maps every id to itself, whatever the partition's rule.
        return ids if self.world_size == 1 else self.partition.to_local(ids)

    def write_all(self, table, values):
        if self.world_size == 1:  # every row, in order: no gathered copy of the whole table
            table.copy_(values)
            return
        own = self.partition.global_ids(self.rank, device=values.device)
        table.copy_(values.index_select(0, own))
