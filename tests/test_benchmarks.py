"""The benchmarks still run (their --quick mode) and print their summary. No timing is
asserted here: speed targets are read from the benchmarks' own output, never from tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize("script, args", [
    ("bench_sparse_step.py", []),
    ("bench_multiprocess.py", ["--no-dgl"]),  # DGL's multi-process store needs a fixed port
    ("bench_partitioned.py", []),
])
def test_benchmark_quick_mode_prints_its_summary(script, args):
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick", *args],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summaries = [line for line in done.stdout.splitlines() if line.startswith("BENCH_SUMMARY ")]
    assert len(summaries) == 1
    summary = json.loads(summaries[0][len("BENCH_SUMMARY "):])
    results = summary["cpu"]["results"] if "cpu" in summary else summary["results"]
    assert results, "no contender was measured"
    for name, result in results.items():
        assert result["median_ms"] > 0, name
