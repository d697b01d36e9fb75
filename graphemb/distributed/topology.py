"""Which ranks share a machine: given explicitly, by environment, or found through the store.

A machine here is a set of ranks that can map the same shared memory (same host, same boot,
same mount namespace, so the same ``/dev/shm``). Sources, first match wins:

1. an explicit ``machines`` sequence: the machine label of every rank, in rank order;
2. the environment variable ``GRAPHEMB_MACHINES``, e.g. ``"0,0,1,1"`` (same meaning);
3. every rank publishes its host id (hostname, boot id, mount namespace) in the job's store
   and reads everyone else's.

Machines are numbered by their lowest rank (the machine of rank 0 is machine 0), and the
ranks of a machine are numbered by global rank (its *local ranks*).

Example
-------
>>> t = Topology.from_machines([7, 3, 7, 3], rank=2)
>>> t.num_machines, t.ranks_per_machine, t.machine, t.local_rank
(2, 2, 0, 1)
>>> t.ranks_of(1)
[1, 3]
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path

from .._checks import is_integer_like
from .coordination import Coordinator

__all__ = ["Topology", "discover_topology", "host_id", "MACHINES_VARIABLE"]

MACHINES_VARIABLE = "GRAPHEMB_MACHINES"


class Topology:
    """Ranks grouped into machines of equal size, seen from one rank.

    Parameters
    ----------
    machine_of_rank : sequence of int
        Machine index (``0 .. M-1``, numbered by lowest rank) of every rank.
    rank : int
        This process's rank.

    Use :meth:`from_machines` to build one from arbitrary machine labels.
    """

    def __init__(self, machine_of_rank: Sequence[int], rank: int) -> None:
        self.machine_of_rank: tuple[int, ...] = tuple(int(m) for m in machine_of_rank)
        self.rank = int(rank)
        self.num_machines = max(self.machine_of_rank) + 1
        self._ranks = [
            [r for r, m in enumerate(self.machine_of_rank) if m == machine]
            for machine in range(self.num_machines)
        ]
        sizes = [len(ranks) for ranks in self._ranks]
        if len(set(sizes)) != 1:
            raise ValueError(
                f"every machine must run the same number of ranks, got {sizes} ranks on "
                f"machines 0..{self.num_machines - 1} (machine of each rank: "
                f"{list(self.machine_of_rank)})"
            )
        self.ranks_per_machine = sizes[0]
        self.local_rank_of_rank: tuple[int, ...] = tuple(
            self._ranks[m].index(r) for r, m in enumerate(self.machine_of_rank)
        )

    @classmethod
    def from_machines(cls, machines: Sequence[object], rank: int) -> Topology:
        """From any hashable machine label per rank (ints, host names)."""
        if isinstance(machines, (str, bytes)) or not isinstance(machines, Sequence):
            raise TypeError(
                f"machines must be a sequence with one machine label per rank, got {machines!r}"
            )
        if not 0 <= rank < len(machines):
            raise ValueError(
                f"machines lists {len(machines)} ranks but this is rank {rank}: give one "
                "machine label per rank of the process group"
            )
        index: dict[object, int] = {}
        for label in machines:
            index.setdefault(label, len(index))
        return cls([index[label] for label in machines], rank)

    @property
    def world_size(self) -> int:
        return len(self.machine_of_rank)

    @property
    def machine(self) -> int:
        """This rank's machine."""
        return self.machine_of_rank[self.rank]

    @property
    def local_rank(self) -> int:
        """This rank's position among the ranks of its machine."""
        return self.local_rank_of_rank[self.rank]

    def ranks_of(self, machine: int) -> list[int]:
        """Global ranks of ``machine``, ascending (index = local rank)."""
        return list(self._ranks[machine])

    def peers(self, local_rank: int) -> list[int]:
        """Global ranks with ``local_rank`` on every machine, by machine."""
        return [ranks[local_rank] for ranks in self._ranks]

    def __repr__(self) -> str:
        return f"Topology(machine_of_rank={list(self.machine_of_rank)}, rank={self.rank})"


def host_id() -> str:
    """Identifies the machine and its shared-memory namespace: hostname, boot id, and the
    mount namespace (ranks in separate mount namespaces see different ``/dev/shm``)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "?"
    try:
        mounts = os.readlink("/proc/self/ns/mnt")
    except OSError:
        mounts = "?"
    return f"{socket.gethostname()}/{boot}/{mounts}"


def discover_topology(
    coordinator: Coordinator, machines: Sequence[object] | None = None
) -> Topology:
    """The job's machines: ``machines``, else ``$GRAPHEMB_MACHINES``, else host ids.

    Collective over the coordinator's ranks when the host ids are gathered (every rank must
    call it, in the same order as its other store phases).

    Raises
    ------
    ValueError
        ``machines`` (or the variable) does not list one label per rank, or machines run
        different numbers of ranks.
    """
    world_size, rank = coordinator.world_size, coordinator.rank
    if machines is None and os.environ.get(MACHINES_VARIABLE):
        text = os.environ[MACHINES_VARIABLE]
        machines = [part.strip() for part in text.split(",")]
        if len(machines) != world_size:
            raise ValueError(
                f"{MACHINES_VARIABLE}={text!r} lists {len(machines)} ranks, the world size "
                f"is {world_size}"
            )
    if machines is not None:
        if isinstance(machines, (str, bytes)) or not isinstance(machines, Sequence):
            raise TypeError(f"machines must be a sequence of machine labels, got {machines!r}")
        if len(machines) != world_size:
            raise ValueError(
                f"machines={list(machines)!r} lists {len(machines)} ranks, the world size "
                f"is {world_size}"
            )
        if not all(is_integer_like(m) or isinstance(m, str) for m in machines):
            raise TypeError(f"machine labels must be ints or strs, got {list(machines)!r}")
        return Topology.from_machines([str(m) for m in machines], rank)
    key = f"topology/{coordinator.next_generation('topology')}"
    coordinator.publish(f"{key}/{rank}", {"host": host_id()})
    hosts = [
        coordinator.read(f"{key}/{r}", f"rank {r}'s host id")["host"] for r in range(world_size)
    ]
    return Topology.from_machines(hosts, rank)
