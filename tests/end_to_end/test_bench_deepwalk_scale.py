"""The scale panel's generated graphs (``benchmarks/scale_graphs.py``) are what its docstring
says, and its quick mode runs every contender in a process of its own and judges what it
measured. No timing is asserted: the targets are read from the benchmark's own output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the harness package, as the scripts import it

from scale_graphs import graph_bytes, labels, node_ids, planted_graph  # noqa: E402


def test_node_ids_are_a_permutation_and_labels_follow_the_pre_ids():
    for nodes in (2_000, 10_000, 100_000):
        ids = node_ids(torch.arange(nodes), nodes)
        assert torch.equal(ids.sort().values, torch.arange(nodes))
        assert not torch.equal(ids, torch.arange(nodes))  # the ids are spread
    blocks = labels(2_000, 10)
    assert torch.equal(blocks[node_ids(torch.arange(2_000), 2_000)], torch.arange(2_000) // 200)


@pytest.mark.parametrize("shape", ["uniform", "powerlaw"])
def test_planted_graph_has_its_edges_blocks_and_degrees(shape):
    nodes, blocks, inside = 20_000, 20, 0.4
    graph, edges = planted_graph(nodes, 12, shape, blocks=blocks, inside=inside, seed=3)
    assert edges == 120_000 and graph.symmetric
    src, dst = graph.edges()
    loops = int((src == dst).sum())
    assert graph.num_edges == 2 * edges - loops  # both directions, a self-loop once
    block = labels(nodes, blocks)
    share = float((block[src] == block[dst]).double().mean())
    assert share == pytest.approx(inside + (1 - inside) / blocks, abs=0.01)
    degrees = graph.in_degrees().double()
    assert float(degrees.mean()) == pytest.approx(12, rel=0.01)
    heavy = float(degrees.max() / degrees.mean())
    assert heavy > 10 if shape == "powerlaw" else heavy < 3  # a tail, or none
    assert graph_bytes(graph) == 8 * (nodes + 1 + 2 * graph.num_edges)


def test_the_same_seed_draws_the_same_graph():
    first, _ = planted_graph(2_000, 10, "powerlaw", blocks=10, inside=0.3, seed=5)
    again, _ = planted_graph(2_000, 10, "powerlaw", blocks=10, inside=0.3, seed=5)
    assert torch.equal(first.indptr, again.indptr) and torch.equal(first.indices, again.indices)


@pytest.mark.timeout(900)  # four processes, each importing torch, sklearn and gensim
def test_scale_panel_quick_mode_runs_every_contender_and_judges_it():
    pytest.importorskip("gensim", reason="the scale panel's peer (graphemb[bench])")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_deepwalk_scale.py"), "--quick",
         "--shapes", "uniform", "--sizes", "2000"],
        capture_output=True, text=True, timeout=880,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted((r["contender"], r["nodes"]) for r in rows) == [
        ("gensim", 2000),
        ("graphemb", 2000),
        ("graphemb-fresh", 2000),
        ("graphemb-position", 2000),
    ]
    for row in rows:
        assert row["tokens"] == row["walks_per_node"] * row["nodes"] * 10  # no isolated node
        assert row["tokens_per_second"] == pytest.approx(row["tokens"] / row["seconds"])
        assert row["peak_bytes"] > row["start_bytes"] > 0  # each in a fresh process
        # read from outside the run too, within its window (none in a window under 50 ms)
        assert row["measured_to"] > row["measured_from"]
        assert row["readings"] == 0 or row["read_peak_bytes"] >= row["warm_bytes"] // 2
        assert row["bound_bytes"] >= row["graph_bytes"] + 2 * row["nodes"] * 128 * 4
        assert 0 < row["micro_f1"] <= 1
    lines = [line for line in done.stdout.splitlines() if not line.startswith("BENCH_SUMMARY ")]
    verdicts = [line for line in lines if "worst F1 difference" in line]
    assert len(verdicts) == 3 and all("target >= -1 points" in line for line in verdicts)
    summary = [line for line in done.stdout.splitlines() if line.startswith("BENCH_SUMMARY ")]
    assert len(summary) == 1 and json.loads(summary[0][14:])["verdicts"] == verdicts
