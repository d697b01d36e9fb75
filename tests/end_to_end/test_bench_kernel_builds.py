"""``benchmarks/bench_kernel_builds.py`` runs two kernel libraries chunk by chunk in one
process and reports the ratio of their tokens per second; ``probe_sampler_builds.py`` times
their samplers round by round, ``probe_layer_builds.py`` their GraphSAGE layers and
``probe_step_builds.py`` their optimizer steps; ``probe_kernel_threads.py`` times
GraphSAGE batches with the kernels on their own threads and on torch's OpenMP threads in
turn. The installed library against itself: both halves run, the pairs and rounds are
counted as the docstrings say. No timing is asserted (the ratio of a library to itself is
noise)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphemb._native.library import library_path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "bench_kernel_builds.py"
SAMPLER_SCRIPT = BENCHMARKS / "probe_sampler_builds.py"
THREADS_SCRIPT = BENCHMARKS / "probe_kernel_threads.py"
LAYERS_SCRIPT = BENCHMARKS / "probe_layer_builds.py"
STEP_SCRIPT = BENCHMARKS / "probe_step_builds.py"

pytestmark = pytest.mark.skipif(library_path() is None, reason="the kernels were not built")


def run(*arguments: str, script: Path = SCRIPT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(script), *arguments], cwd=BENCHMARKS, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def test_two_builds_take_the_chunks_in_turn(tmp_path):
    built = str(library_path())
    out = tmp_path / "ab.json"
    done = run(built, built, "--nodes", "4000", "--chunk-walks", "400", "--chunks", "6",
               "--output-table", "float24", "--json", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text())
    rates = summary["tokens_per_second"]
    assert len(rates["base"]) == len(rates["candidate"]) == 3  # 6 chunks in turn
    assert len(summary["ratios"]) == 2  # the first pair warms the tables
    assert all(r > 0 for r in rates["base"] + rates["candidate"])
    assert "median" in summary["line"] and "over 2 chunk pairs" in summary["line"]
    assert summary["line"] in done.stdout


def test_an_odd_or_small_chunk_count_is_refused():
    built = str(library_path())
    done = run(built, built, "--chunks", "5")
    assert done.returncode == 2 and "--chunks must be even and at least 4, got 5" in done.stderr


def test_a_graph_with_too_few_chunks_is_refused():
    built = str(library_path())
    done = run(built, built, "--nodes", "2000", "--chunk-walks", "1000", "--chunks", "8")
    assert done.returncode == 1 and "only 1 chunk pair(s) ran" in done.stderr


@pytest.mark.parametrize(
    "script, options, rounds, what",
    [
        (SAMPLER_SCRIPT, ["--nodes", "5000", "--calls", "2", "--graph", "symmetric"], 3,
         "symmetric 5,000 nodes"),
        (LAYERS_SCRIPT, ["--nodes", "10000", "--calls", "1"], 2, "powerlaw-out 10,000 nodes"),
        (STEP_SCRIPT, ["--rows", "5000", "--batch", "2000", "--distinct", "--calls", "2"], 3,
         "2,000 ids (distinct)"),
    ],
    ids=["sampler", "layers", "step"],
)  # fmt: skip
def test_two_builds_take_every_round_in_turn(tmp_path, script, options, rounds, what):
    built = str(library_path())
    out = tmp_path / "ab.json"
    done = run(built, built, *options, "--rounds", str(rounds), "--json", str(out),
               script=script)  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text())
    times = summary["ms"]
    assert len(times["base"]) == len(times["candidate"]) == rounds  # the warm-up round not kept
    assert len(summary["ratios"]) == rounds
    assert all(t > 0 for t in times["base"] + times["candidate"])
    assert what in summary["line"] and f"over {rounds} rounds" in summary["line"]
    assert summary["line"] in done.stdout


def test_more_seeds_than_nodes_are_refused():
    built = str(library_path())
    done = run(built, built, "--nodes", "3000", "--calls", "3", script=SAMPLER_SCRIPT)
    assert done.returncode == 2
    assert "--calls 3 batches of 1024 distinct seeds need more than --nodes 3000" in done.stderr


def test_batches_alternate_between_the_kernels_threads_and_openmps(tmp_path):
    out = tmp_path / "threads.json"
    done = run("--nodes", "4000", "--batches", "8", "--batch-size", "128", "--fanouts", "5,3",
               "--json", str(out), script=THREADS_SCRIPT)  # fmt: skip
    if "found no OpenMP runtime" in done.stderr:
        pytest.skip("torch brought no OpenMP runtime here")
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text())
    for where in ("own", "openmp"):
        phases = summary["ms"][where]
        assert all(len(phases[p]) == 4 for p in ("sampling", "forward", "backward", "batch"))
        steps = ("sampling", "forward", "backward", "sparse step")
        for position, got in enumerate(phases["batch"]):
            assert got == pytest.approx(sum(phases[step][position] for step in steps))
    assert len(summary["ratios"]) == 4
    assert "over 4 batch pairs" in summary["line"] and summary["line"] in done.stdout


def test_a_batch_count_not_a_multiple_of_four_is_refused():
    done = run("--batches", "6", script=THREADS_SCRIPT)
    assert done.returncode == 2 and "--batches must be a multiple of 4" in done.stderr
