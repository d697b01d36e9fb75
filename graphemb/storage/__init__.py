"""Where rows live: one process, one machine's shared memory, partitions across ranks, or
partitions across machines with one shared copy per machine.

===================  ==================  ===================  =============================
storage              chosen when         rows in this process update written by
===================  ==================  ===================  =============================
``LocalStorage``     no process group    all                  this process
``SharedMemory...``  process group, CPU  all (shared mapping) the owner rank of each row
                     and no partition
``Hierarchical...``  process group, CPU,  its machine's rows   the owner rank of each row
                     several machines    (shared mapping)
                     (hierarchical.py)
``Partitioned...``   process group and   the owned rows only  the owner rank of each row
                     CUDA or partition
===================  ==================  ===================  =============================

All derive from :class:`~graphemb.storage.base.RowStorage`; :func:`create_storage` picks one.
:class:`Partition` (which rank owns which row) is the index math they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import torch
import torch.distributed as dist

from ..distributed.coordination import Coordinator
from ..distributed.exchange import Exchange
from ..distributed.topology import discover_topology
from .base import RowPrefetch, RowStorage, TableInit
from .hierarchical import HierarchicalStorage
from .local import LocalStorage
from .partition import Partition
from .partitioned import PartitionedStorage
from .shared import SharedMemoryStorage

__all__ = [
    "RowStorage",
    "RowPrefetch",
    "TableInit",
    "LocalStorage",
    "SharedMemoryStorage",
    "PartitionedStorage",
    "HierarchicalStorage",
    "Partition",
    "create_storage",
]


def create_storage(
    name: str,
    num_embeddings: int,
    device: torch.device,
    partition: Partition | None,
    timeout: timedelta,
    machines: Sequence[object] | None = None,
    overlap: bool = False,
) -> RowStorage:
    """Pick the storage for an embedding from the process group, device and partition.

    Collective when ``torch.distributed`` is initialised (it creates the embedding's own
    process groups). CPU tables without a ``partition`` go to shared memory when every rank
    runs on one machine and to :class:`HierarchicalStorage`
    when they span machines (found by
    :func:`graphemb.distributed.topology.discover_topology`, or given as ``machines``, a
    machine label per rank); ``machines`` with a ``partition`` selects the hierarchical
    storage over that partition. ``overlap`` makes the hierarchical storage push gradients
    and route prefetches in the background (other storages ignore it: their steps stay
    synchronous).
    """
    if machines is not None and device.type != "cpu":
        raise ValueError(f"machines= applies to CPU tables, the device is {device}")
    if not (dist.is_available() and dist.is_initialized()):
        if machines is not None and len(set(map(str, machines))) > 1:
            raise ValueError(
                f"machines={list(machines)!r} names several machines but torch.distributed "
                "is not initialised: call init_process_group first"
            )
        if partition is not None and partition.num_parts != 1:
            raise ValueError(
                f"partition {partition} has {partition.num_parts} parts but "
                "torch.distributed is not initialised: call init_process_group first"
            )
        _check_partition(partition, num_embeddings, 1)
        return LocalStorage(name, num_embeddings, device)

    rank, world_size = dist.get_rank(), dist.get_world_size()
    _check_partition(partition, num_embeddings, world_size)
    coordinator = Coordinator(rank, world_size, timeout)
    topology = None
    if device.type == "cpu" and (partition is None or machines is not None):
        topology = discover_topology(coordinator, machines)
    if topology is not None and (topology.num_machines > 1 or partition is not None):
        partition = partition or Partition.remainder(num_embeddings, world_size)
        return HierarchicalStorage(
            name, num_embeddings, partition, topology, timeout, overlap=overlap
        )
    shared = partition is None and device.type == "cpu"
    exchange = Exchange.create(device, timeout, f"NodeEmbedding {name!r}")
    if shared:
        partition = SharedMemoryStorage.default_partition(num_embeddings, world_size)
        return SharedMemoryStorage(name, num_embeddings, partition, exchange, coordinator)
    partition = partition or Partition.remainder(num_embeddings, world_size)
    return PartitionedStorage(name, num_embeddings, device, partition, exchange, coordinator)


def _check_partition(partition: Partition | None, num_embeddings: int, world_size: int) -> None:
    if partition is None:
        return
    if not isinstance(partition, Partition):
        raise TypeError(f"partition must be a graphemb.Partition, got {type(partition).__name__}")
    if partition.num_embeddings != num_embeddings:
        raise ValueError(
            f"partition covers {partition.num_embeddings} rows but the embedding has "
            f"{num_embeddings}"
        )
    if partition.num_parts != world_size:
        raise ValueError(
            f"partition has {partition.num_parts} parts but the world size is {world_size}"
        )
