"""The DeepWalk-on-ranks benchmark (``benchmarks/bench_deepwalk_ranks.py``): its quick mode
starts torchrun's 2 x 2 ranks and one process, scores both, and judges the difference; its
verdict reads the mean over seeds and the larger of the two gaps. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the harness package, as the scripts import it

from bench_deepwalk_ranks import verdict_lines  # noqa: E402


def _row(contender: str, seed: int, micro: float, macro: float) -> dict:
    return {"contender": contender, "seed": seed, "seconds": 1.0, "micro_f1": micro,
            "macro_f1": macro}  # fmt: skip


def test_verdict_holds_the_larger_gap_of_the_seed_means_to_half_a_point():
    rows = [_row("ranks", 0, 0.900, 0.890), _row("one", 0, 0.910, 0.882),
            _row("ranks", 1, 0.920, 0.890), _row("one", 1, 0.910, 0.890)]  # fmt: skip
    (line,) = verdict_lines(rows, load=0.2)
    # Micro: means equal (0.910); Macro: 0.890 against 0.886, the larger gap
    assert "+0.00 / +0.40 points" in line and "mean of 2 seed(s)" in line
    assert line.endswith("target <= 0.5 points: MET (load before the run 0.20)")
    worse = rows[:3] + [_row("one", 1, 0.910, 0.870)]  # Macro gap now +1.4 points
    assert "NOT MET" in verdict_lines(worse, load=0.2)[0]
    assert verdict_lines(rows[:3] + [{**rows[3], "failed": "exit 1"}], load=0.2) == []


@pytest.mark.one_stack("modern", "quick mode of a benchmark without DGL contenders")
@pytest.mark.timeout(300)  # torchrun's four ranks and one process, each importing torch
def test_quick_mode_trains_on_four_ranks_and_in_one_process():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_deepwalk_ranks.py"),
                           "--quick"], capture_output=True, text=True, timeout=280)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(r["contender"], r["world_size"]) for r in rows] == [("ranks", 4), ("one", 1)]
    assert all(0.1 < r["micro_f1"] <= 1 for r in rows)  # 10 blocks: chance is 0.1
    assert "GRAPHEMB_MACHINES=0,0,1,1 torchrun --standalone --nproc_per_node 4" in done.stdout
    verdicts = [line for line in done.stdout.splitlines()
                if "vs one process" in line and not line.startswith("BENCH_SUMMARY ")]  # fmt: skip
    assert len(verdicts) == 1 and "target <= 0.5 points" in verdicts[0]
