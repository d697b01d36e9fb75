"""Where rows live: one process, one machine's shared memory, partitions across ranks, or
partitions across machines with one shared copy per machine."""

from .base import (
    LocalStorage,
    PartitionedStorage,
    RowPrefetch,
    RowStorage,
    SharedMemoryStorage,
    create_storage,
)
from .partition import Partition

__all__ = [
    "RowStorage",
    "LocalStorage",
    "SharedMemoryStorage",
    "PartitionedStorage",
    "RowPrefetch",
    "Partition",
    "create_storage",
]
