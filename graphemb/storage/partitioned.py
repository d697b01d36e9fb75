"""Each rank holds only the rows it owns; lookups pull rows from their owners."""

from __future__ import annotations

import torch

from ..distributed.huge_pages import index_rows
from .base import RowStorage

__all__ = ["PartitionedStorage"]


class PartitionedStorage(RowStorage):
    """Each rank holds only the rows it owns, in its own CPU or GPU memory."""

    kind = "partitioned"
    collective_lookups = True
    needs_exchange = True

    def local_rows(self):
        return self.partition.local_size(self.rank)

    def table_ids(self, start=0, stop=None):
        stop = self.local_rows() if stop is None else stop
        return self.partition.to_global(torch.arange(start, stop), self.rank)

    def _create_table(self, key, row_shape, dtype, init):
        return self._table_in_process_memory(self.local_rows(), row_shape, dtype, init)

    def read_rows(self, table, ids, operation):
        def serve(requested: torch.Tensor) -> torch.Tensor:
            return index_rows(table, self.partition.to_local(requested))

        return self.exchange.pull(ids, self.partition.owner(ids), serve, operation)

    def local_index(self, ids):
        return self.partition.to_local(ids)

    def write_all(self, table, values):
        own = self.partition.global_ids(self.rank, device=values.device)
        table.copy_(values.index_select(0, own))
