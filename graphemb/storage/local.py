"""Every row in one process: no process group."""

from __future__ import annotations

import torch

from .base import RowStorage
from .partition import Partition

__all__ = ["LocalStorage"]


class LocalStorage(RowStorage):
    """Every row in this process, on CPU or one CUDA device."""

    kind = "local"

    def __init__(self, name: str, num_embeddings: int, device: torch.device) -> None:
        super().__init__(name, num_embeddings, device, Partition.remainder(num_embeddings, 1))

    def _create_table(self, key, row_shape, dtype, init):
        return self._table_in_process_memory(self.num_embeddings, row_shape, dtype, init)

    def read_rows(self, table, ids, operation):
        return self._rows_here(table, ids)

    def local_index(self, ids):
        return ids

    def write_all(self, table, values):
        table.copy_(values)
