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

_PROBE = r"""
import json, os, sys
import torch
import graphemb
x = torch.ones(16 << 20)  # 64 MiB, every page touched
start = x.data_ptr()
huge_kb = None
with open("/proc/self/smaps") as smaps:
    inside = False
    for line in smaps:
        first = line.split()[0]
        if "-" in first and not first.endswith(":"):
            low, high = (int(v, 16) for v in first.split("-"))
            inside = low <= start < high
        elif inside and first == "AnonHugePages:":
            huge_kb = int(line.split()[1])
print(json.dumps({"variable": os.environ.get("THP_MEM_ALLOC_ENABLE"), "huge_kb": huge_kb}))
"""


def _probe(variable: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if variable is not None:
        env["THP_MEM_ALLOC_ENABLE"] = variable
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120
    )
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
