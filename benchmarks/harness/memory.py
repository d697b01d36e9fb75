"""Memory of processes over time: RSS, shared-memory segments, and their linear trend.

Linux only (``/proc``). Sizes in bytes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from collections.abc import Sequence

import numpy as np

SHM_DIR = "/dev/shm"
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_STATUS_FIELDS = {
    "VmRSS": "rss",
    "RssAnon": "rss_anon",
    "RssFile": "rss_file",
    "RssShmem": "rss_shmem",
}


def process_memory(pid: int | str = "self") -> dict:
    """Resident memory and shared-memory mappings of process ``pid``.

    Returns
    -------
    dict
        ``rss``, ``rss_anon`` (private: heap, torch tensors), ``rss_file``, ``rss_shmem``
        (resident pages of shared memory) from ``/proc/<pid>/status``; ``shm_maps``:
        ``{"<dev>:<inode>": bytes}`` of every ``/dev/shm`` file mapped (unlinked ones
        included: their memory lives as long as a mapping), the largest mapping per file.
    """
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in _STATUS_FIELDS:
                out[_STATUS_FIELDS[key]] = int(value.split()[0]) * 1024  # kB
    maps: dict[str, int] = {}
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) < 6 or not fields[5].startswith(SHM_DIR + "/"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            key = f"{fields[3]}:{fields[4]}"
            maps[key] = max(maps.get(key, 0), end - start)
    out["shm_maps"] = maps  # type: ignore[assignment]
    return out


class ResidentTrace:
    """The resident memory of another process, read from outside it each time this is
    called (``/proc/<pid>/statm``), with the wall-clock time of each reading.

    A process's own high-water marks are not exact: ``ru_maxrss`` and ``VmHWM`` keep the
    largest resident size the kernel saw when the process was about to give memory back,
    read from its per-CPU page counters without their pending updates (on a 2-CPU machine
    ``ru_maxrss`` read 0.2 to 0.45 MiB below the exact size at the same moment,
    ``probe_rss_accounting.py``). ``statm`` sums them exactly (Linux 6.x), so
    :meth:`peak` is exact at every reading; what it misses is memory held for less time
    than the interval between two readings.
    """

    def __init__(self) -> None:
        self.times: list[float] = []
        self.resident: list[int] = []

    def __call__(self, pid: int) -> None:
        resident = resident_bytes(pid)
        self.times.append(time.time())
        self.resident.append(resident)

    def peak(self, start: float, stop: float) -> tuple[int, int]:
        """The largest resident size read in ``[start, stop]`` (``time.time()`` seconds)
        and the number of readings there; ``(0, 0)`` when there were none."""
        inside = [r for t, r in zip(self.times, self.resident, strict=True) if start <= t <= stop]
        return (max(inside), len(inside)) if inside else (0, 0)


def resident_bytes(pid: int | str = "self") -> int:
    """Process ``pid``'s resident memory now, exact (``/proc/<pid>/statm``)."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE_SIZE


def kib_field(path: str, key: str) -> int:
    """Bytes of the ``key:`` line of a ``/proc`` file that gives sizes in kB
    (``/proc/self/status``, ``/proc/self/smaps_rollup``)."""
    with open(path) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{path} has no {key} line")


def high_water_bytes() -> int:
    """This process's peak resident memory as the kernel keeps it (``VmHWM``, see
    :class:`ResidentTrace` for how far it can be off)."""
    return kib_field("/proc/self/status", "VmHWM")


def page_overhang(blocks: Sequence[tuple[int, int]]) -> int:
    """Bytes of the whole pages that blocks of memory hold beyond their own bytes.

    Resident memory is counted in pages: a block of ``n`` bytes holds every page from the
    allocator's 8-byte size word just before its data (glibc writes it there) to its last
    byte. A block whose data starts on a page boundary (torch's huge-page allocations)
    holds the page before it for those 8 bytes, and one whose end is not on a boundary the
    rest of its last page.

    Parameters
    ----------
    blocks : sequence of (int, int)
        Each block's data address and its bytes (``tensor.data_ptr()``,
        ``tensor.nbytes``).
    """
    total = 0
    for address, size in blocks:
        first, end = (address - 8) // PAGE_SIZE, -(-(address + size) // PAGE_SIZE)
        total += (end - first) * PAGE_SIZE - size
    return total


def release_free_heap() -> bool:
    """Hand the C allocator's free pages back to the system (glibc's ``malloc_trim``): what
    earlier work freed but the allocator kept stops counting as resident. False where the
    C library has no ``malloc_trim``."""
    name = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    if trim is None:
        return False
    trim(0)
    return True


def reset_peak() -> None:
    """Restart this process's peak resident memory (``VmHWM``, ``ru_maxrss``) from its
    resident memory now (Linux: ``/proc/self/clear_refs``)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def shm_mapped(samples: Sequence[dict]) -> tuple[int, int]:
    """Bytes and number of distinct ``/dev/shm`` files mapped by any of ``samples``
    (:func:`process_memory` of several processes: a table mapped by all counts once)."""
    union: dict[str, int] = {}
    for sample in samples:
        for key, size in sample["shm_maps"].items():
            union[key] = max(union.get(key, 0), size)
    return sum(union.values()), len(union)


def shm_usage(token: str | None = None) -> dict:
    """``/dev/shm`` as a whole: bytes used (every process of the machine, unlinked files
    still mapped included), files present, and files whose name contains ``token``."""
    st = os.statvfs(SHM_DIR)
    names = os.listdir(SHM_DIR)
    return {
        "used": (st.f_blocks - st.f_bfree) * st.f_frsize,
        "files": len(names),
        "matching_files": sum(token in n for n in names) if token else None,
    }


def trend(steps: Sequence[float], values: Sequence[float]) -> dict:
    """Least-squares line through ``(steps, values)`` and the growth over the window.

    Returns
    -------
    dict
        ``slope_per_1k_steps`` (value units per 1,000 steps), ``intercept``, ``first``,
        ``last``, ``max_growth`` (largest value minus the first), ``fitted_growth`` (slope
        times the window's length: what the line says the window added),
        ``high_water_growth`` (largest value of the last quarter of the samples minus the
        largest of the first quarter: a leak raises the high-water mark, while an allocator
        that caches a few more or fewer buffers from one sample to the next does not).

    Examples
    --------
    >>> t = trend([0, 100, 200, 300], [10.0, 12.0, 14.0, 16.0])
    >>> round(t["slope_per_1k_steps"], 6), t["max_growth"], round(t["fitted_growth"], 6)
    (20.0, 6.0, 6.0)
    >>> trend(range(8), [5.0, 7.0, 5.0, 7.0, 5.0, 7.0, 7.0, 5.0])["high_water_growth"]
    0.0
    """
    x = np.asarray(steps, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(
            f"trend needs two equal-length series of >= 2 points, got {x.shape} and {y.shape}"
        )
    dx = x - x.mean()
    if not np.any(dx):
        raise ValueError("trend needs at least two distinct steps")
    slope = float(np.dot(dx, y - y.mean()) / np.dot(dx, dx))
    quarter = max(1, y.size // 4)
    return {
        "slope_per_1k_steps": 1000.0 * slope,
        "intercept": float(y.mean() - slope * x.mean()),
        "first": float(y[0]),
        "last": float(y[-1]),
        "max_growth": float(y.max() - y[0]),
        "fitted_growth": slope * float(x[-1] - x[0]),
        "high_water_growth": float(y[-quarter:].max() - y[:quarter].max()),
    }
