"""Tables in named shared memory, mapped by every process of one machine.

Life of a shared table ``name`` (all ranks call :func:`create_shared_table` in the same
order):

1. Rank 0 claims the name in the job's store (a second live table of the same name is an
   error, never silent sharing), removes stale segments of that name left by dead processes,
   creates a fresh segment ``/dev/shm/graphemb.<name>.<pid>.<token>``, fills it (``init``),
   and publishes the segment's path, shape, dtype and machine in the store.
2. Every other rank maps the published segment and acknowledges (or reports its error).
3. Rank 0 unlinks the segment as soon as every rank has mapped it, or has failed to. From
   then on nothing is left in ``/dev/shm``: the memory belongs to the mappings and the kernel
   frees it when the last process drops its tensor -- after ``del``, at exit, after an
   exception, even after SIGKILL.

Only a kill during step 1--3 can leave a segment behind; its name carries the creator's pid,
so the next creation of that name finds it dead and removes it. The random token makes sure
a new job never attaches to an old segment. Linux only (``/dev/shm``).
"""

from __future__ import annotations

import errno
import hashlib
import math
import mmap
import os
import re
import secrets
import socket
import weakref
from collections.abc import Callable
from pathlib import Path

import torch

from .coordination import CoordinationError, Coordinator
from .huge_pages import advise_huge_pages_of_mapping

__all__ = [
    "create_shared_table",
    "create_segment",
    "map_segment",
    "unlink_segment",
    "segment_prefix",
    "SHM_DIR",
]

SHM_DIR = Path("/dev/shm")


def segment_prefix(name: str) -> str:
    """File-name prefix of the segments of table ``name``: ``graphemb.<safe name>.``."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]  # keeps sanitised names distinct
    return f"graphemb.{safe}-{digest}."


def create_shared_table(
    coordinator: Coordinator,
    name: str,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    init: Callable[[torch.Tensor], None] | None = None,
) -> torch.Tensor:
    """Create (rank 0) or attach to (other ranks) the shared table ``name``.

    Collective over the coordinator's ranks.

    Parameters
    ----------
    coordinator : Coordinator
        Store access of this rank.
    name : str
        Job-wide unique name of the table.
    shape : tuple of int
        Shape of the table, identical on every rank.
    dtype : torch.dtype
    init : callable, optional
        ``init(table)`` fills the zero-initialised table; runs once, on rank 0, before any
        other rank can see the table.

    Returns
    -------
    Tensor
        The table, mapped into this process. Deleting the last reference releases the name
        (rank 0) and this process's mapping.
    """
    key = f"shm/{name}/{coordinator.next_generation(f'shm/{name}')}"
    if coordinator.rank == 0:
        return _create(coordinator, name, key, shape, dtype, init)
    return _attach(coordinator, name, key, shape, dtype)


# ---------------------------------------------------------------------- rank 0
def _create(coordinator, name, key, shape, dtype, init) -> torch.Tensor:
    live_key = f"shm/{name}/live"
    if coordinator.add(live_key, 1) > 1:
        coordinator.add(live_key, -1)
        message = (
            f"a shared table named {name!r} is already alive in this job: names of "
            "NodeEmbeddings (and of their optimizer states) must be unique; delete the old "
            "object or choose another name"
        )
        coordinator.publish(f"{key}/meta", {"error": message})
        raise ValueError(message)

    path = None
    try:
        path, table = create_segment(name, shape, dtype)
        if init is not None:
            init(table)
    except BaseException as err:
        if path is not None:
            unlink_segment(path)
        coordinator.add(live_key, -1)
        coordinator.publish(f"{key}/meta", {"error": f"rank 0 could not create it: {err!r}"})
        raise

    try:
        coordinator.publish(
            f"{key}/meta",
            {"path": str(path), "shape": list(shape), "dtype": str(dtype), "host": _host_id()},
        )
        acks = [f"{key}/ack/{r}" for r in range(1, coordinator.world_size)]
        coordinator.wait(acks, f"every rank to map shared table {name!r}")
        answers = [coordinator.read(k, "acknowledgement") for k in acks]
    except BaseException:
        coordinator.add(live_key, -1)
        raise
    finally:
        unlink_segment(path)  # mapped everywhere (or given up on): the name is no longer needed

    failed = [a["error"] for a in answers if "error" in a]
    if failed:
        coordinator.add(live_key, -1)
        raise CoordinationError(f"shared table {name!r}: {'; '.join(failed)}")
    weakref.finalize(table, _release_name, coordinator, live_key).atexit = False
    return table


def _release_name(coordinator: Coordinator, live_key: str) -> None:
    try:
        coordinator.add(live_key, -1)
    except Exception:  # the job's store may already be gone; nothing left to release then
        pass


# ---------------------------------------------------------------------- other ranks
def _attach(coordinator, name, key, shape, dtype) -> torch.Tensor:
    meta = coordinator.read(f"{key}/meta", f"rank 0 to create shared table {name!r}")
    if "error" in meta:
        raise ValueError(f"shared table {name!r}: {meta['error']}")
    ack = f"{key}/ack/{coordinator.rank}"
    problem = None
    if meta["host"] != _host_id():
        problem = (
            f"rank {coordinator.rank} runs on another machine than rank 0 "
            f"({_host_id()} vs {meta['host']}): shared-memory tables need every rank on one "
            "machine; pass partition=... to NodeEmbedding to partition rows across machines"
        )
    elif meta["shape"] != list(shape) or meta["dtype"] != str(dtype):
        problem = (
            f"rank {coordinator.rank} expects shape {list(shape)} and {dtype}, rank 0 "
            f"created {meta['shape']} and {meta['dtype']}: every rank must pass the same "
            "arguments"
        )
    if problem is None:
        try:
            table = map_segment(Path(meta["path"]), shape, dtype)
        except OSError as err:
            problem = f"rank {coordinator.rank} could not map {meta['path']}: {err}"
    if problem is not None:
        coordinator.publish(ack, {"error": problem})
        raise CoordinationError(f"shared table {name!r}: {problem}")
    coordinator.publish(ack, {"ok": True})
    return table


# ---------------------------------------------------------------------- segments
def create_segment(
    name: str, shape: tuple[int, ...], dtype: torch.dtype
) -> tuple[Path, torch.Tensor]:
    """A new zero segment for ``name`` and its mapping; removes dead leftovers of ``name``.

    The caller unlinks the path once every process that needs it has mapped it.
    """
    _remove_stale_segments(name)
    path = SHM_DIR / f"{segment_prefix(name)}{os.getpid()}.{secrets.token_hex(6)}"
    return path, _map(path, shape, dtype, create=True)


def map_segment(path: Path, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Map an existing segment (never creates one)."""
    return _map(path, shape, dtype, create=False)


def unlink_segment(path: Path) -> None:
    """Remove the segment's name; mappings stay valid until their tensors are freed."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _map(path: Path, shape: tuple[int, ...], dtype: torch.dtype, create: bool) -> torch.Tensor:
    """Map ``path`` as a tensor; the mapping lives as long as the tensor's storage."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    # O_EXCL: never reuse a file we did not create; no O_CREAT on attach: never make one.
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(path, flags, 0o600)
    try:
        if create:
            os.ftruncate(fd, max(nbytes, 1))  # a new file reads as zeros
        elif os.fstat(fd).st_size < nbytes:
            raise OSError(errno.EINVAL, f"segment holds fewer than the {nbytes} bytes expected")
        buffer = mmap.mmap(fd, max(nbytes, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    advise_huge_pages_of_mapping(buffer, nbytes)
    # The tensor keeps the mmap object alive; the last reference unmaps it.
    flat = torch.frombuffer(buffer, dtype=dtype, count=math.prod(shape))
    return flat.view(shape)


def _remove_stale_segments(name: str) -> None:
    """Delete leftovers of ``name`` whose creating process no longer exists."""
    prefix = segment_prefix(name)
    for path in SHM_DIR.glob(f"{prefix}*"):
        pid_text = path.name[len(prefix) :].split(".", 1)[0]
        if pid_text.isdigit() and not _process_alive(int(pid_text)):
            unlink_segment(path)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _host_id() -> str:
    """Identifies the machine (and its shared-memory namespace) a process runs on."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "?"
    return f"{socket.gethostname()}/{boot}"
