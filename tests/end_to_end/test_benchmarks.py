"""The benchmarks still run (their --quick mode) and print their summary, and the pieces of
their harness (``benchmarks/harness``) measure what they claim. No timing is asserted here:
speed targets are read from the benchmarks' own output, never from tests.

A quick mode costs seconds, mostly interpreter, rank and profiler start-up, and runs the same
code on both stacks except for the DGL contenders: each runs on one stack (``one_stack``) --
those that measure DGL beside graphemb on the dgl stack (where ``make bench`` runs), the
others on the modern stack (where ``make bench-soak`` runs)."""

from __future__ import annotations

import doctest
import mmap
import os
import secrets
import sys
from types import SimpleNamespace

import pytest
import torch
from helpers import BENCHMARKS, json_line, run_quick_benchmark
from torch.profiler import record_function

sys.path.insert(0, str(BENCHMARKS))  # the harness package, as the scripts import it

from harness import busy, memory, peers, phases, workload  # noqa: E402

WITH_DGL_PEERS = pytest.mark.one_stack(
    "dgl", "quick mode of a benchmark with DGL contenders, which only the dgl stack has"
)
GRAPHEMB_ONLY = pytest.mark.one_stack(
    "modern", "quick mode of a benchmark without DGL contenders: the same code on both stacks"
)


@WITH_DGL_PEERS
def test_sampler_benchmark_quick_mode_prints_its_result():
    result = json_line(run_quick_benchmark("bench_sampler.py").stdout, "RESULT ")
    assert result["results"], "no contender was measured"
    for name, measured in result["results"].items():
        assert measured["median_ms"] > 0, name


@WITH_DGL_PEERS
def test_walks_benchmark_quick_mode_times_every_walker_against_dgl():
    summary = json_line(run_quick_benchmark("bench_walks.py").stdout, "BENCH_SUMMARY ")
    assert [graph["graph"] for graph in summary["graphs"]] == ["symmetric", "sbm"]
    for graph in summary["graphs"]:
        kinds = {name.split()[1] for name in graph["results"]}
        assert kinds == {"deepwalk", "node2vec"}
        assert len(graph["results"]) == 6  # graphemb, its pure-torch walker and DGL, each kind
        assert set(graph["ratios"]) == set(graph["results"]) - {
            "graphemb deepwalk", "graphemb node2vec"
        }  # fmt: skip
        assert all(measured["median_ms"] > 0 for measured in graph["results"].values())
        assert len(graph["lines"]) == 4


def test_scaleout_benchmark_quick_mode_measures_traffic_and_steps():
    summary = json_line(run_quick_benchmark("bench_scaleout.py").stdout, "BENCH_SUMMARY ")
    sent = summary["bytes_across_machines_per_step"]
    # Counted bytes can never beat the minimum (unique remote rows x row size).
    assert 0 < summary["minimum_bytes_per_step"] <= min(sent.values()), summary
    # Machine-aware storage sends each remote row a machine needs once, with its id (8 B),
    # each way: exactly the minimum plus the ids.
    row = summary["row_bytes"]
    expected = summary["minimum_bytes_per_step"] * (row + 8) / row
    assert sent["hierarchical"] == pytest.approx(expected, rel=1e-9), summary
    assert sent["hierarchical"] < sent["partitioned"], summary
    for name, step in summary["step_ms"].items():
        assert step["median_ms"] > 0, name


@WITH_DGL_PEERS
def test_sparse_step_quick_mode_runs_every_contender_in_a_process_of_its_own():
    summary = json_line(run_quick_benchmark("bench_sparse_step.py").stdout, "BENCH_SUMMARY ")
    results = summary["results"]
    assert summary["left_out"] == [], summary["left_out"]
    expected = {
        "graphemb SparseAdam", "torch SparseAdam", "dgl SparseAdam",
        "graphemb SparseAdagrad", "torch Adagrad", "dgl SparseAdagrad", "fbgemm EXACT_ADAGRAD",
        "graphemb SparseRowWiseAdagrad", "fbgemm EXACT_ROWWISE_ADAGRAD",
    }  # fmt: skip
    assert set(results) == expected
    assert len({result["process"] for result in results.values()}) == len(expected)
    for name, result in results.items():
        assert result["median_ms"] > 0, name
        assert result["library"].startswith(result["family"] + " "), result["library"]
    rowwise = results["graphemb SparseRowWiseAdagrad"]
    assert rowwise["speedup_vs_fbgemm_same_optimizer"]["ratio"] > 0
    assert rowwise["speedup_vs_torch_same_optimizer"] is None  # torch has no row-wise Adagrad


@pytest.mark.parametrize(
    "script, args",
    [
        # DGL's multi-process store needs a fixed port: its contender is left out here
        pytest.param("bench_multiprocess.py", ["--no-dgl"], marks=GRAPHEMB_ONLY),
        pytest.param("bench_partitioned.py", [], marks=GRAPHEMB_ONLY),
        pytest.param("bench_skipgram_threads.py", [], marks=GRAPHEMB_ONLY),
        pytest.param("bench_write_embeddings.py", [], marks=GRAPHEMB_ONLY),
        pytest.param("bench_weighted_walks.py", [], marks=GRAPHEMB_ONLY),
    ],
)
def test_benchmark_quick_mode_prints_its_summary(script, args):
    summary = json_line(run_quick_benchmark(script, *args).stdout, "BENCH_SUMMARY ")
    results = summary["cpu"]["results"] if "cpu" in summary else summary["results"]
    assert results, "no contender was measured"
    for name, result in results.items():
        assert result["median_ms"] > 0, name


@GRAPHEMB_ONLY
def test_read_graph_benchmark_quick_mode_measures_every_reader():
    result = json_line(run_quick_benchmark("bench_read_graph.py").stdout, "BENCH_SUMMARY ")
    assert {"graphemb parse_edge_list", "graphemb read_graph"} <= set(result["results"])
    for name, measured in result["results"].items():
        assert measured["median_s"] > 0 and measured["peak_over_arrays"] > 0, name


@GRAPHEMB_ONLY
def test_table_init_benchmark_quick_mode_times_graphemb_torch_and_the_bound():
    summary = json_line(run_quick_benchmark("bench_table_init.py").stdout, "BENCH_SUMMARY ")
    assert {"graphemb", "torch"} <= set(summary["results"]), summary["results"].keys()
    for name, measured in summary["results"].items():
        assert measured["median_s"] > 0 and measured["gb_per_s"] > 0, name


@GRAPHEMB_ONLY
def test_deepwalk_memory_quick_mode_holds_the_peak_against_graph_and_tables():
    summary = json_line(run_quick_benchmark("bench_deepwalk_memory.py").stdout, "BENCH_SUMMARY ")
    tables = 2 * 5_000 * 128 * 4  # two float32 tables of the quick graph's 5k nodes
    assert summary["tables_bytes"] == tables
    # undirected CSC of 50k edge lines: 2 * 50k indices and edge ids, int64, at least
    assert summary["graph_bytes"] >= 2 * 2 * 50_000 * 8
    assert summary["bound_bytes"] == summary["graph_bytes"] + 2 * tables
    # the child's peak holds the interpreter and torch, far above the quick graph's bound
    assert summary["peak_bytes"] > summary["bound_bytes"]
    assert summary["verdict"].startswith("target <= ")


@WITH_DGL_PEERS
def test_end_to_end_quick_mode_times_every_contender_and_its_phases():
    # three worker processes and two pairs of ranks (DGL's docstring loop: the probe's test)
    done = run_quick_benchmark("bench_end_to_end.py", "--procs", "1,2", timeout=600)
    summary = json_line(done.stdout, "BENCH_SUMMARY ")
    names = set(summary["ms_per_batch"])
    one = "graphemb 1 proc x 2 thr"
    pair, yardstick = "graphemb 2 proc x 1 thr", "graphemb 2 proc x 1 thr, no exchange"
    assert {one, pair, yardstick} <= names, names
    assert f"{yardstick} vs {one}" in summary["speedups"]
    for ranks in (pair, yardstick):  # one profile per rank; only the pair pushes rows
        every_rank = summary["every_rank_phases_ms"][ranks]
        assert len(every_rank) == 2 and all(p["sparse step"] > 0 for p in every_rank)
        pushes = [any(path.endswith("::push") for path in p) for p in every_rank]
        assert pushes == [ranks == pair] * 2, (ranks, pushes)
    # every single-process contender ran in a process of its own, importing its library only
    processes = summary["processes"]
    assert set(processes) == names - {pair, yardstick}
    for name, info in processes.items():
        assert (
            "dgl" not in info["libraries"]
            if name.startswith("graphemb")
            else ("graphemb" not in info["libraries"] and "dgl" in info["libraries"])
        ), (name, info)
        assert info["allocator"] == summary["allocator"], name  # the same settings for all
    if summary["dgl"].startswith("DGL"):
        documented = "dgl documented loop 1 proc"
        assert {documented, "dgl + torch SparseAdam 1 proc"} <= names
        assert f"{one} over {documented}" in summary["speedups"]
        assert f"{yardstick} over {documented}" not in summary["speedups"]  # not held to DGL
    for name, measured in summary["ms_per_batch"].items():
        assert measured["median_ms"] > 0, name
        phases_ms = summary["phases_ms"][name]
        for phase in ("sampling", "forward", "backward", "sparse step", "dense step"):
            assert phases_ms[phase] > 0, (name, phase)
    bounds = summary["phases"]["bounds_ms"]
    for phase in ("sampling", "layers", "sparse step"):
        assert 0 < bounds[phase] < float("inf"), (phase, bounds)
        assert summary["phases"][f"{phase}_over_bound"] > 0
    # half of the seeds reach more than half of the input rows (shared neighbours), never all
    share = summary["rank_frontier_shares"]["2"]
    assert 0.5 < share["input_rows"] < 1.0, share
    assert 0.4 < share["first_layer_edges"] < 0.8, share


@WITH_DGL_PEERS
def test_dgl_trace_probe_shows_the_trace_growing_without_zero_grad():
    summary = json_line(run_quick_benchmark("probe_dgl_trace.py").stdout, "BENCH_SUMMARY ")
    documented, docstring = summary["modes"]["documented"], summary["modes"]["docstring"]
    # with zero_grad() every step reads its own batch; without, every batch so far
    assert [row["batches_in_trace"] for row in documented] == [1] * len(documented)
    assert [row["batches_in_trace"] for row in docstring] == list(range(1, len(docstring) + 1))
    # ... so the rows it reads grow by a batch's input rows every step (a batch's input
    # rows vary by a few percent with the draws)
    one_batch = documented[0]["gradient_rows"]
    rows = [row["gradient_rows"] for row in docstring]
    assert all(b > a for a, b in zip(rows, rows[1:], strict=False)), rows
    for k, read in enumerate(rows, start=1):
        assert read == pytest.approx(k * one_batch, rel=0.1), (k, rows, one_batch)


@GRAPHEMB_ONLY
def test_soak_quick_mode_samples_memory_and_leaves_no_segment(tmp_path):
    plot = tmp_path / "soak.png"
    done = run_quick_benchmark(
        "bench_soak.py", "--steps", "120", "--sample-every", "30", "--plot", str(plot)
    )
    result = json_line(done.stdout, "RESULT ")
    summary = json_line(done.stdout, "BENCH_SUMMARY ")
    assert [s["step"] for s in summary["samples"]] == [0, 30, 60, 90, 120]
    for sample in summary["samples"][1:]:
        # both ranks map the shared tables: at least weight + 2 Adam states of N x D float32
        assert sample["job shm mapped"] >= 3 * 20_000 * 16 * 4
        assert sample["rank 0 RSS"] > 0 and sample["rank 1 RSS"] > 0
    assert set(result["series"]) >= {"rank 0 RSS", "rank 1 anon", "job shm mapped", "parent RSS"}
    assert isinstance(result["flat"], bool)
    assert result["shm_files_left_after_exit"] == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ phases
def _fake_contender():
    """A step whose phases open library spans at known places, twice in the step."""
    table = torch.randn(200, 16)

    def lookup(ids):
        with record_function("graphemb::read_rows"):
            return table[ids].requires_grad_()

    def update():
        for _ in range(2):
            with record_function("graphemb::outer"):
                with record_function("graphemb_kernels::inner"):
                    torch.sort(table, dim=0)
                table.mul(2)

    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 200, (50,), generator=gen) for _ in range(3)]
    step, profile = peers._phased(lookup, lambda rows: (rows * rows).sum(), update, batches)
    return SimpleNamespace(name="fake", step=step, profile=profile)


def test_phases_agree_with_torch_profiler_aggregates():
    contender = _fake_contender()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for i in range(4):
            with record_function(phases.ITERATION_SPAN):
                contender.profile(i)
    # every operator of a phase (not the default top 3, whose order follows timings)
    got = phases.read_phases(prof.events(), top_ops=100)
    totals = {e.key: e for e in prof.key_averages()}  # the oracle: torch's own aggregation
    spans = {
        "lookup": "bench::lookup",
        "lookup > graphemb::read_rows": "graphemb::read_rows",
        "step": "bench::step",
        "step > graphemb::outer": "graphemb::outer",
        "step > graphemb::outer > graphemb_kernels::inner": "graphemb_kernels::inner",
    }
    assert got["steps"] == 4
    for path, span in spans.items():
        assert sum(got["per_step_ms"][path]) == pytest.approx(
            totals[span].cpu_time_total / 1e3, rel=1e-6
        ), path
        assert got["calls"][path] * got["steps"] == totals[span].count, path
    assert got["calls"]["step > graphemb::outer"] == 2
    for path in ("lookup", "step", "step > graphemb::outer"):  # parent = children + rest
        assert got["rest_ms"][path] >= 0
    inner_ops = [op for op, _ in got["top_ops"]["step > graphemb::outer > graphemb_kernels::inner"]]
    outer_ops = [op for op, _ in got["top_ops"]["step > graphemb::outer"]]
    assert "aten::sort" in inner_ops and "aten::sort" not in outer_ops
    assert "aten::mul" in outer_ops
    assert got["library_spans"] == [
        "graphemb::outer", "graphemb::read_rows", "graphemb_kernels::inner",
    ]  # fmt: skip


def test_profile_of_graphemb_step_shows_kernel_span_and_patches_nothing():
    from graphemb.optim import kernels

    sort, select = torch.sort, torch.Tensor.index_select
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 1000, (300,), generator=gen) for _ in range(2)]
    loss = lambda rows: (rows * rows).sum()  # noqa: E731
    work = workload.Workload(1000, 8, batches, loss)
    contender = peers.graphemb_contender(
        "g", "adam", work, table_name=f"test-phases-{secrets.token_hex(3)}"
    )
    got = phases.profile_phases(contender, 0, 3)
    assert set(got["phases_ms"]) >= {"lookup", "loss (forward)", "backward", "step"}
    kernel_paths = [p for p in got["phases_ms"] if p.endswith("graphemb_kernels::adam_")]
    assert len(kernel_paths) == (1 if kernels.usable_for(torch.zeros(1, 1)) else 0)
    assert torch.sort is sort and torch.Tensor.index_select is select


def test_read_phases_refuses_a_profile_without_iterations():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ones(3).sum()
    with pytest.raises(ValueError, match="bench::iteration"):
        phases.read_phases(prof.events())


# ------------------------------------------------------------------ memory
def test_trend_matches_scipy_linregress():
    stats = pytest.importorskip("scipy.stats")
    gen = torch.Generator().manual_seed(0)
    steps = torch.arange(0, 10_000, 250, dtype=torch.float64)
    values = 100 + 0.003 * steps + torch.randn(steps.shape, generator=gen, dtype=torch.float64)
    got = memory.trend(steps.tolist(), values.tolist())
    oracle = stats.linregress(steps.numpy(), values.numpy())
    assert got["slope_per_1k_steps"] == pytest.approx(1000 * oracle.slope, rel=1e-9)
    assert got["intercept"] == pytest.approx(oracle.intercept, rel=1e-9)
    assert got["max_growth"] == pytest.approx(float(values.max() - values[0]))


def test_harness_docstring_examples():
    result = doctest.testmod(memory, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("steps, values", [([1], [1.0]), ([1, 2], [1.0]), ([3, 3], [1.0, 2.0])])
def test_trend_refuses_degenerate_series(steps, values):
    with pytest.raises(ValueError, match="trend needs"):
        memory.trend(steps, values)


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs Linux /dev/shm")
def test_process_memory_counts_an_unlinked_mapped_segment_once():
    size = 3 << 20
    path = f"/dev/shm/graphemb-test-{os.getpid()}-{secrets.token_hex(4)}"
    before = memory.process_memory()
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        segment = mmap.mmap(fd, size)
    finally:
        os.close(fd)
        os.unlink(path)  # as graphemb does once every rank has mapped a table
    try:
        segment.write(b"\x01" * size)  # resident now
        during = memory.process_memory()
        new = set(during["shm_maps"]) - set(before["shm_maps"])
        assert [during["shm_maps"][k] for k in new] == [size]
        assert during["rss_shmem"] - before["rss_shmem"] >= size
        assert memory.shm_mapped([during, during])[0] == memory.shm_mapped([during])[0]
    finally:
        segment.close()
    assert not set(memory.process_memory()["shm_maps"]) - set(before["shm_maps"])


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_busy_processes_spin_during_the_block_and_are_gone_after():
    with busy.busy_processes(2) as pids:
        assert len(pids) == 2 and all(_alive(pid) for pid in pids)
    assert not any(_alive(pid) for pid in pids)
    with pytest.raises(RuntimeError, match="inside"), busy.busy_processes(1) as pids:
        raise RuntimeError("an error inside the block")
    assert not any(_alive(pid) for pid in pids)  # killed on the error too
    with busy.busy_processes(0) as none:
        assert none == []
    with pytest.raises(ValueError, match="-1"), busy.busy_processes(-1):
        pass


def test_wait_until_quiet_polls_the_load_until_it_falls_below_one(monkeypatch):
    from harness import report

    loads, slept = iter([2.0, 1.4, 0.6, 0.1]), []
    monkeypatch.setattr(report, "load_average", lambda: next(loads))
    monkeypatch.setattr(report.time, "sleep", slept.append)
    assert report.wait_until_quiet(60, poll_seconds=5) == 0.6  # the first load below 1
    assert slept == [5, 5]
    loads = iter([3.0, 2.9, 2.8, 2.7])  # never quiet: gives up after the limit
    assert report.wait_until_quiet(10, poll_seconds=5) == 2.8 and slept == [5, 5, 5, 5]
    loads = iter([3.0])
    assert report.wait_until_quiet(0) == 3.0 and len(slept) == 4  # no wait asked: none


def test_chosen_contenders_keep_their_order_and_unknown_names_stop_therun_quick_benchmark():
    from harness import cli

    assert cli.chosen("one,ranks", ("ranks", "one", "compiled")) == ["one", "ranks"]
    with pytest.raises(SystemExit, match=r"unknown contenders \['gensim'\]; known: ranks, one"):
        cli.chosen("ranks,gensim", ("ranks", "one"))
