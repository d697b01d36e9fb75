"""The DeepWalk quality panel (``benchmarks/bench_deepwalk_quality.py``): its quick mode
scores every trainer, each run of each trainer is a fresh process, and its verdicts, tables
and plot say what the rows support (built from rows made by hand). No timing is asserted:
the targets are read from the benchmark's own output."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from helpers import BENCHMARKS, run_quick_benchmark

sys.path.insert(0, str(BENCHMARKS))  # the harness package, as the scripts import it


def test_deepwalk_quality_quick_mode_scores_every_trainer(tmp_path):
    pytest.importorskip("gensim", reason="the quality benchmark's peer (graphemb[bench])")
    stdout = run_quick_benchmark(
        "bench_deepwalk_quality.py", "--trainers", "gensim,compiled-position", "--seeds", "0,1",
        "--time-repeats", "2",
    ).stdout  # fmt: skip
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert sorted((r["trainer"], r["seed"]) for r in rows) == [
        ("compiled-position", 0),
        ("compiled-position", 1),
        ("gensim", 0),
        ("gensim", 1),
    ]
    for row in rows:  # two timed rounds per trainer and seed, the row keeps the faster
        assert len(row["seconds_runs"]) == 2 and row["seconds"] == min(row["seconds_runs"]) > 0
        assert all(0 < row[key] <= 1 for key in row if key.startswith(("micro@", "macro@")))
    assert "mean of 2" in stdout  # the table of means over seeds
    paired = stdout.split("paired difference to gensim")[1].splitlines()[2]
    assert paired.startswith("overlapping:2000:10 | compiled-position | 2 | "), paired
    verdicts = [line for line in stdout.splitlines() if line.startswith("compiled-position: ")]
    assert len(verdicts) == 4, verdicts  # divergence, quality, time; with the load
    assert "runs that diverged 0 of 2 on 1 graphs; target <= 0 runs:" in verdicts[0]
    assert "target >= -0.3 points:" in verdicts[1] and "target <= 1x:" in verdicts[2]
    assert "beyond the seeds' spread" in verdicts[3]  # which shortfalls the seeds support
    # A saved output is re-reported (tables and plot) without training again.
    saved = tmp_path / "output.txt"
    saved.write_text(stdout)
    again = run_quick_benchmark("bench_deepwalk_quality.py", "--rows-from", str(saved), "--plot",
                 str(tmp_path / "quality.png")).stdout  # fmt: skip
    assert paired in again
    assert (tmp_path / "quality.png").stat().st_size > 10_000


def test_quality_panel_trains_each_run_in_a_fresh_process_and_names_a_failed_one():
    import argparse

    from deepwalk_trainers import SETTINGS, train_in_fresh_process
    from harness.fresh import RunFailed

    small = {"num_walks": 1, "walk_length": 10, "dimensions": 8}
    settings = argparse.Namespace(**{**SETTINGS, **small})
    runs = [train_in_fresh_process("compiled", "sbm:300:3:4:0.8", s, settings) for s in (0, 1)]
    assert len({os.getpid(), *(run.pid for run in runs)}) == 3  # two processes, neither this one
    for run in runs:
        assert run.rows.shape == (300, 8) and run.rows.dtype == np.float32 and run.seconds > 0
        assert np.isfinite(run.rows).all() and np.abs(run.rows).sum() > 0
    assert not np.array_equal(runs[0].rows, runs[1].rows)  # each seed its own graph and walks
    failed = r"(?s)compiled on nosuch:1 \(seed 3\) exited with 1:.*unknown graph 'nosuch:1'"
    with pytest.raises(RunFailed, match=failed):
        train_in_fresh_process("compiled", "nosuch:1", 3, settings)
    with pytest.raises(ValueError, match="unknown trainer 'word2vec'; known: gensim, compiled"):
        train_in_fresh_process("word2vec", "sbm:300:3:4:0.8", 0, settings)


def test_panel_names_only_the_shortfalls_its_seeds_support():
    """A cell 1 point behind on every seed is a shortfall; one -0.5 points behind on
    average but spread over three points is not (t = -0.2 / 0.74, p ~ 0.4)."""
    from deepwalk_panel import shortfall_line

    def rows(graph, gaps):
        made = []
        for seed, gap in enumerate(gaps):
            scores = {"micro@0.5": 0.5, "macro@0.5": 0.5}
            made.append({"graph": graph, "seed": seed, "trainer": "gensim", **scores})
            moved = {key: value + gap / 100 for key, value in scores.items()}
            made.append({"graph": graph, "seed": seed, "trainer": "compiled", **moved})
        return made

    behind = rows("behind", [-1.0, -1.1, -0.9, -1.05])
    noisy = rows("noisy", [-2.0, 1.0, -1.5, 0.5])
    line = shortfall_line(behind + noisy, "compiled", ["micro@0.5", "macro@0.5"])
    assert line.endswith("behind micro@0.5 -1.01, behind macro@0.5 -1.01"), line
    assert shortfall_line(noisy, "compiled", ["micro@0.5"]).endswith(": none")


def test_panel_counts_runs_that_diverged_and_scores_the_others():
    """A run that stopped with TrainingDiverged has no scores: the divergence verdict counts
    it (target: none) and the paired differences leave it out."""
    from deepwalk_panel import paired, verdict_lines

    scores = {"micro@0.5": 0.5, "macro@0.5": 0.5}
    rows = [
        {"graph": "g", "seed": seed, "trainer": "gensim", "seconds": 1.0, **scores}
        for seed in range(3)
    ]
    rows += [{"graph": "g", "seed": 0, "trainer": "torch", "seconds": 2.0, "diverged": True}]
    rows += [
        {"graph": "g", "seed": seed, "trainer": "torch", "seconds": 2.0, **scores}
        for seed in (1, 2)
    ]
    assert [row["seed"] for row, _ in paired(rows, "g", "torch")] == [1, 2]
    lines = verdict_lines(rows, [0.5], load=0.1)
    assert lines[0].startswith("torch: runs that diverged 1 of 3 on 1 graphs (g 1/3); ")
    assert "target <= 0 runs: NOT MET" in lines[0], lines[0]
    assert lines[1].startswith("torch: worst paired difference to gensim +0.00 points")


def test_panel_table_gives_the_spread_of_several_seeds_and_the_mean_alone_of_one():
    """Two seeds 1 and 3 points behind: -2.0 +- 1.0 (standard error of the two gaps); one seed
    0.5 points ahead: +0.5 without a spread, and the seeds column says how many ran."""
    from deepwalk_panel import markdown_table

    rows = []
    for graph, gaps in (("two", [-1.0, -3.0]), ("one", [0.5])):
        for seed, gap in enumerate(gaps):
            base = {"graph": graph, "nodes": 10, "seed": seed, "micro@0.5": 0.5, "macro@0.5": 0.5}
            rows.append({**base, "trainer": "gensim", "seconds": 2.0})
            moved = {"micro@0.5": 0.5 + gap / 100, "macro@0.5": 0.5 + gap / 100}
            rows.append({**base, **moved, "trainer": "torch", "seconds": 1.0})
    lines = markdown_table(rows, [0.5], "torch")
    two = [cell.strip() for cell in lines[2].strip("|").split("|")]
    one = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert two[0] == "two" and two[3:5] == ["-2.0 ± 1.0", "-2.0 ± 1.0"] and two[-1] == "2"
    assert one[0] == "one" and one[3:5] == ["+0.5", "+0.5"] and one[-1] == "1"
    assert one[5] == "2.0, 1.0 (0.50x)"


def test_quality_plot_leaves_out_a_trainer_absent_from_a_graph(tmp_path):
    """A run whose third trainer ran on one of the two graphs only: the plot draws the others
    there, with no empty mean (numpy warns on one; the warning is an error here)."""
    import warnings

    from bench_deepwalk_quality import plot

    rows = []
    for graph, trainers in (("small", ("gensim", "compiled")), ("large", ("gensim", "torch"))):
        for seed, trainer in [(s, t) for s in (0, 1) for t in trainers]:
            scores = {"micro@0.5": 0.5 + seed / 10, "macro@0.5": 0.4 + seed / 10}
            row = {"graph": graph, "seed": seed, "trainer": trainer, "seconds": 1.0}
            rows.append({**row, **scores})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot(rows, [0.5], tmp_path / "quality.png")
    assert (tmp_path / "quality.png").stat().st_size > 10_000


def test_every_skipgram_variant_is_a_valid_option_set_under_each_benchmarks_names():
    from bench_deepwalk_scale import COMPILED
    from deepwalk_trainers import GRAPHEMB_TRAINERS
    from skipgram_variants import VARIANTS

    from graphemb.skipgram import CompiledOptions

    for variant, kwargs in VARIANTS.items():
        options = CompiledOptions(**kwargs).checked()  # a typo or a bad value raises here
        quality, scale = ("compiled", "graphemb") if not variant else (
            f"compiled-{variant}", f"graphemb-{variant}")  # fmt: skip
        backend, kwargs_of_quality = GRAPHEMB_TRAINERS[quality]
        assert backend == "compiled" and CompiledOptions(**kwargs_of_quality) == options
        assert CompiledOptions(**COMPILED[scale]) == options
    assert len({CompiledOptions(**kwargs) for kwargs in VARIANTS.values()}) == len(VARIANTS)
