"""Importing graphemb turns on huge pages under torch's large CPU allocations.

The oracle is the kernel's own accounting: ``AnonHugePages`` of the mapping that holds a
fresh 64 MiB tensor, read from ``/proc/self/smaps`` in a new interpreter (torch reads the
switch once per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")

# The mapping of /proc/self/smaps that holds an address: its range, Rss and AnonHugePages
# (kB), and its VmFlags.
_MAPPING_OF = r"""
def mapping_of(address):
    found, inside = {}, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split()[0]
            if "-" in first and not first.endswith(":"):
                low, high = (int(v, 16) for v in first.split("-"))
                inside = low <= address < high
                if inside:
                    found["range"] = [low, high]
            elif inside and first in ("Rss:", "AnonHugePages:"):
                found[first[:-1]] = int(line.split()[1])
            elif inside and first == "VmFlags:":
                found["flags"] = line.split()[1:]
    return found
"""

_PROBE = (
    _MAPPING_OF
    + r"""
import json, os, sys
import torch
import graphemb
x = torch.ones(16 << 20)  # 64 MiB, every page touched
huge_kb = mapping_of(x.data_ptr()).get("AnonHugePages")
print(json.dumps({"variable": os.environ.get("THP_MEM_ALLOC_ENABLE"), "huge_kb": huge_kb}))
"""
)


def _probe(variable: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if variable is not None:
        env["THP_MEM_ALLOC_ENABLE"] = variable
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run(probe: str) -> dict:
    """The JSON line a probe prints last, run in a new interpreter."""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _madvise_mode() -> bool:
    return sys.platform.startswith("linux") and "[madvise]" in _THP_MODE.read_text()


@pytest.fixture(scope="module")
def probes() -> tuple[dict, dict]:
    """The probe without the variable set, and with the user's ``0`` (two interpreters,
    shared by the tests of this module: each takes seconds to import torch)."""
    return _probe(None), _probe("0")


def test_import_sets_the_switch_and_keeps_the_users_choice(probes):
    default, users_choice = probes
    assert default["variable"] == "1"
    assert users_choice["variable"] == "0"


@pytest.mark.skipif(
    not _madvise_mode(), reason="needs Linux transparent huge pages in madvise mode"
)
def test_large_tensors_sit_on_huge_pages_unless_the_user_says_no(probes):
    on, off = probes
    assert on["huge_kb"] is not None and off["huge_kb"] is not None
    # Huge pages under the block against none at all (not all of it: where memory is
    # fragmented the kernel may fall back to 4 KiB pages for part of a block).
    assert on["huge_kb"] >= 2 << 10, on
    assert off["huge_kb"] == 0, off


_SMALL_PAGES_PROBE = (
    _MAPPING_OF
    + r"""
import json
import torch
import graphemb
from graphemb._allocator import without_huge_pages
x = torch.empty(5 << 18, dtype=torch.int64)  # 10 MiB: on huge pages unless advised
advised = without_huge_pages(x)
x.fill_(1)  # every page touched after the advice
found = mapping_of(x.data_ptr())
print(json.dumps({"advised": advised, "bytes": x.nbytes, "start": x.data_ptr(), **found}))
"""
)


@pytest.mark.skipif(
    not _madvise_mode(), reason="needs Linux transparent huge pages in madvise mode"
)
def test_a_buffer_advised_off_huge_pages_holds_its_own_pages():
    found = _run(_SMALL_PAGES_PROBE)
    assert found["advised"] is True
    assert "nh" in found["flags"], found  # the kernel's mark: no huge pages here
    assert found["AnonHugePages"] == 0, found
    low, high = found["range"]  # the advice split the mapping at the buffer's pages
    assert low <= found["start"] and high - low <= found["bytes"] + 2 * 4096, found


_HEAP_PROBE = (
    _MAPPING_OF
    + r"""
import ctypes, json
import torch
import graphemb
from graphemb._allocator import heap_without_huge_pages
libc = ctypes.CDLL(None)
libc.mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD: blocks below 64 MiB from the heap
x = torch.ones(2 << 20)  # 8 MiB in the heap, advised onto huge pages by torch
address = x.data_ptr()
del x  # freed: the range keeps the advice
before = mapping_of(address)
advised = heap_without_huge_pages()
after = mapping_of(address)
print(json.dumps({"before": before, "after": after, "advised": advised}))
"""
)


@pytest.mark.skipif(
    not _madvise_mode(), reason="needs Linux transparent huge pages in madvise mode"
)
def test_freed_heap_memory_loses_the_huge_page_advice():
    found = _run(_HEAP_PROBE)
    # the premise: the freed tensor's heap range still asks for huge pages
    assert "hg" in found["before"]["flags"], found
    # the kernel's mark afterwards: no huge pages, no khugepaged filling it back
    assert "hg" not in found["after"]["flags"] and "nh" in found["after"]["flags"], found
    low, high = found["after"]["range"]
    assert found["advised"] >= high - low


_RELEASE_PROBE = r"""
import json, os
import torch
import graphemb
from graphemb._allocator import release_free_heap

def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

before = resident()
pieces = [torch.ones(8 << 10) for _ in range(2048)]  # 64 MiB in blocks of 32 KiB: the heap's
kept = pieces[::64]  # one block in 64 stays alive: the heap cannot shrink from its top
del pieces
freed = resident()
released = release_free_heap()
after = resident()
print(json.dumps({"before": before, "freed": freed, "after": after, "released": released,
                  "kept": sum(t.numel() for t in kept)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_gives_freed_heap_pages_back():
    found = _run(_RELEASE_PROBE)
    assert found["released"] is True
    mib = 1 << 20
    # the premise: freeing the blocks alone kept their pages (the live ones pin the heap)
    assert found["freed"] - found["before"] > 50 * mib, found
    # afterwards the heap holds the live blocks (1 MiB) and a little more, not 64 MiB
    assert found["after"] - found["before"] < 8 * mib, found


_TABLE_PROBE = (
    _MAPPING_OF
    + r"""
import json, os
os.environ["THP_MEM_ALLOC_ENABLE"] = "0"  # torch's own advice off: only the table's own
import torch
from graphemb.distributed.huge_pages import zeros_table
table = zeros_table((1 << 22, 16), torch.float32, torch.device("cpu"))  # 256 MiB
plain = torch.zeros(1 << 26)  # as large, not advised
inside = lambda t: mapping_of(t.data_ptr() + (8 << 20))  # past the first 2 MiB boundary
print(json.dumps({"table": inside(table), "plain": inside(plain)}))
"""
)


@pytest.mark.skipif(
    not _madvise_mode(), reason="needs Linux transparent huge pages in madvise mode"
)
def test_a_large_table_asks_for_huge_pages_of_its_own():
    found = _run(_TABLE_PROBE)
    assert "hg" in found["table"]["flags"] and found["table"]["AnonHugePages"] >= 2 << 10, found
    assert "hg" not in found["plain"]["flags"] and found["plain"]["AnonHugePages"] == 0, found
