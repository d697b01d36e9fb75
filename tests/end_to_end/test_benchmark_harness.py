"""The benchmarks' harness pieces that decide how contenders run: importing the harness
changes nothing, every script parses its options through the harness's parsers and sets
its allocator settings explicitly, contenders in processes of their own answer on
command, and the end-to-end phases' bounds count what a batch moves (against counts made
by hand). No timing is asserted: speed targets live in the benchmarks."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the harness package, as the scripts import it

import e2e_bounds  # noqa: E402
from harness import allocation, cli, fresh, memory  # noqa: E402
from harness.isolated import IsolatedContender, WorkerFailed, close_all  # noqa: E402


def _python(code: str, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh interpreter (benchmarks/ on its path); its last line, JSON."""
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r})\n{code}"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ importing changes nothing
def test_importing_every_harness_module_changes_no_setting():
    env = {k: v for k, v in os.environ.items() if k not in allocation.SETTINGS}
    got = _python(
        textwrap.dedent("""
        import json, os, torch
        before, threads = dict(os.environ), torch.get_num_threads()
        import harness
        from harness import (allocation, bandwidth, busy, cli, isolated, memory, peers,
                             phases, ranks, report, timing, workload)
        changed = {k: v for k, v in os.environ.items() if before.get(k) != v}
        print(json.dumps({"changed": changed, "graphemb": "graphemb" in sys.modules,
                          "threads": torch.get_num_threads() == threads}))
        """),
        env=env,
    )
    assert got == {"changed": {}, "graphemb": False, "threads": True}


def test_allocator_settings_are_set_explicitly(monkeypatch):
    for name in allocation.SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert allocation.apply() == {allocation.HUGE_PAGES: "1", allocation.WAIT_POLICY: None}
    assert allocation.apply("off", "passive") == {
        allocation.HUGE_PAGES: "0",
        allocation.WAIT_POLICY: "PASSIVE",
    }
    assert allocation.apply()[allocation.HUGE_PAGES] == "0"  # the environment's choice stays
    args = cli.parser("x").parse_args(["--huge-pages", "on", "--omp-wait-policy", "active"])
    assert cli.apply_allocator(args) == {"THP_MEM_ALLOC_ENABLE": "1", "OMP_WAIT_POLICY": "ACTIVE"}
    with pytest.raises(ValueError, match="huge_pages"):
        allocation.apply("maybe")


# ------------------------------------------------------------------ one parser family
def _scripts() -> list[Path]:
    return sorted(p for p in BENCHMARKS.glob("*.py") if "__main__" in p.read_text())


def _calls(tree: ast.AST) -> set[str]:
    """Dotted names of every call in ``tree`` (``cli.parser``, ``argparse.ArgumentParser``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts, func = [], node.func
            while isinstance(func, ast.Attribute):
                parts.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name):
                names.add(".".join([func.id, *reversed(parts)]))
    return names


def _delegate(tree: ast.AST) -> Path | None:
    """The benchmark script whose ``main`` this one runs (``import bench_x as q``, then
    ``q.main()``), if any."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name] = alias.name
    for call in _calls(tree):
        module, _, function = call.rpartition(".")
        if function == "main" and (BENCHMARKS / f"{aliases.get(module, '')}.py").is_file():
            return BENCHMARKS / f"{aliases[module]}.py"
    return None


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: p.name)
def test_every_script_parses_through_the_harness_and_sets_its_allocator(script):
    tree = ast.parse(script.read_text())
    calls = _calls(tree)
    assert "argparse.ArgumentParser" not in calls, "a parser of its own"
    if not calls & {"cli.parser", "cli.base_parser"}:
        delegate = _delegate(tree)  # a script that runs another's main with its options
        assert delegate is not None, "no parser of harness.cli"
        calls = _calls(ast.parse(delegate.read_text()))
        assert calls & {"cli.parser", "cli.base_parser"}, f"{delegate.name}: no harness parser"
    if script.name.startswith(("bench_", "probe_")):  # benchmarks (render_readme.py is not)
        assert "cli.apply_allocator" in calls, "its allocator settings are not set explicitly"


def test_the_benchmarks_are_all_found():
    names = {p.name for p in _scripts()}
    assert {"bench_end_to_end.py", "bench_sampler.py", "render_readme.py"} <= names
    assert len([n for n in names if n.startswith("bench_")]) >= 15


# ------------------------------------------------------------------ isolated contenders
BUILDER = """
import os, sys
from harness.peers import Contender

def build(spec):
    if spec.get("fail_build"):
        raise RuntimeError("no table for you")
    done = []

    def step(i):
        if i == spec.get("fail_at"):
            raise ValueError(f"batch {i} is bad")
        done.append(i)

    contender = Contender("toy", "toy", "-", 1, step, step)
    contender.ops["info"] = lambda: {"threads": __import__("torch").get_num_threads()}
    contender.ops["done"] = lambda: done
    contender.ops["state"] = lambda: {"pid": os.getpid(), "graphemb": "graphemb" in sys.modules,
                                      "marker": os.environ.get("TOY_MARKER")}
    return contender
"""


@pytest.fixture
def toy_builder(tmp_path, monkeypatch):
    (tmp_path / "toy_builder.py").write_text(BUILDER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return "toy_builder:build"


def test_an_isolated_contender_runs_in_a_process_of_its_own(toy_builder):
    with IsolatedContender("toy", toy_builder, {"threads": 1}, env={"TOY_MARKER": "7"},
                           log=lambda line: None) as worker:  # fmt: skip
        assert worker.info == {"threads": 1}  # spec["threads"], set before the build
        state = worker.command("state")
        assert state == {"pid": worker.pid, "graphemb": False, "marker": "7"}
        assert worker.pid != os.getpid()
        times = worker.runner()(3, 4)
        assert len(times) == 4 and all(t >= 0 for t in times)
        assert worker.command("done") == [3, 4, 5, 6]
        profile = worker.profile(7, 2)
        assert profile["steps"] == 2
        close_all([worker])  # every worker asked to stop first, then each one waited for
        assert not os.path.exists(f"/proc/{worker.pid}")  # exited and reaped
    with pytest.raises(WorkerFailed, match="closed"):
        worker.command("done")


def test_an_isolated_contender_reports_its_failures(toy_builder):
    with pytest.raises(WorkerFailed, match="no table for you"):
        IsolatedContender("toy", toy_builder, {"fail_build": True}, log=lambda line: None)
    with IsolatedContender("toy", toy_builder, {"fail_at": 2}, log=lambda line: None) as worker:
        with pytest.raises(WorkerFailed, match="batch 2 is bad"):
            worker.runner()(0, 4)
        with pytest.raises(WorkerFailed, match="unknown command"):
            worker.command("nothing")
        assert worker.command("done") == [0, 1]  # the worker lives on after an error


# ------------------------------------------------------------------ one run, a fresh process
def _script(body: str) -> list[str]:
    """A fresh interpreter running ``body`` with the harness importable."""
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r})\n{body}"]


def test_a_fresh_run_returns_its_last_result_line():
    body = ("import os; from harness import fresh\nprint('chatter')\n"
            "fresh.emit({'n': 1})\nfresh.emit({'n': 2, 'pid': os.getpid()})")  # fmt: skip
    result = fresh.run(_script(body), "toy", timeout=60)
    assert result["n"] == 2 and result["pid"] != os.getpid()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("raise SystemExit('no table for you')", r"(?s)toy run exited with 1:.*no table for you"),
        ("print('nothing tagged')", r"(?s)toy run printed no result:.*nothing tagged"),
        (
            "import time; print('started', flush=True); time.sleep(60)",
            r"(?s)toy run took more than 3 s:.*started",
        ),
    ],  # fmt: skip
)
@pytest.mark.parametrize("watched", [False, True])
def test_a_fresh_run_that_fails_is_named_with_its_output(body, expected, watched):
    watch = memory.ResidentTrace() if watched else None
    with pytest.raises(fresh.RunFailed, match=expected):
        fresh.run(_script(body), "toy run", timeout=3, watch=watch)


def test_a_watched_run_is_read_from_outside_while_it_holds_its_memory():
    """The trace reads the child's resident memory while it runs: 96 MiB held for half a
    second show in the readings of its window, and not before it."""
    body = textwrap.dedent(
        """
        import time
        from harness import fresh, memory
        before = time.time()
        time.sleep(0.3)
        start = time.time()
        held = bytearray(96 << 20)
        held[:: 4096] = b"x" * len(held[:: 4096])  # every page touched
        time.sleep(0.5)
        fresh.emit({"before": before, "start": start, "stop": time.time(),
                    "resident": memory.resident_bytes()})
        """
    )
    trace = memory.ResidentTrace()
    result = fresh.run(_script(body), "holder", timeout=60, watch=trace, every=0.02)
    peak, readings = trace.peak(result["start"], result["stop"])
    earlier, _ = trace.peak(result["before"], result["start"] - 0.05)
    assert readings >= 10 and peak >= result["resident"] - (1 << 20)
    assert peak - earlier >= 90 << 20


# ------------------------------------------------------------------ the phases' bounds
def test_sampling_reads_are_counted_per_destination():
    from graphemb.graph import Graph
    from graphemb.sampling import Block

    # in-degrees: node 0 has 20 in-edges, node 1 has 3, node 2 none
    src = torch.cat([torch.arange(3, 23), torch.tensor([30, 31, 32])])
    dst = torch.cat([torch.zeros(20, dtype=torch.long), torch.ones(3, dtype=torch.long)])
    graph = Graph.from_edges(src, dst, 40)
    edges = torch.tensor([[3, 4, 5, 6, 7, 5, 6, 7], [0, 0, 0, 0, 0, 1, 1, 1]])
    block = Block(torch.tensor([0, 1, 2, 3, 4, 5, 6, 7]), 3, edges)
    shape = e2e_bounds.batch_shapes(graph, [block], [5])
    # by hand: 3 row pointers; node 0 (20 entries, 160 bytes: 3 cache lines) draws 5 of
    # them, at most the 3 lines; node 1 (3 entries, 24 bytes): 1 line; node 2: nothing;
    # and one relabelling read per sampled edge
    assert shape == {
        "layers": [[8, 3, 8]],
        "input_rows": 8,
        "random_reads": 3 + 3 + 1,
        "relabel_reads": 8,
    }


def test_the_layers_bound_counts_products_and_bytes_by_hand():
    layers, widths = [[100, 10, 40]], [8, 4]  # 100 sources, 10 destinations, 40 edges, 8 -> 4
    products = e2e_bounds.layer_products(layers, widths)
    assert sorted(products) == sorted([(10, 8, 4)] * 2 + [(10, 4, 8)] * 2 + [(8, 10, 4)] * 2)
    rows = 100
    by_hand = (
        2 * rows * 8 * 4  # the input rows, read from the table and written
        + 40 * (32 + 8)
        + 10 * (32 + 8)  # forward: a row and an index per edge, a row out
        + 40 * (32 + 8)
        + 100 * (32 + 8)  # backward: the same per edge, a row per source
    )
    assert e2e_bounds.aggregation_bytes(layers, widths, rows) == by_hand
    machine = {
        "bandwidth": {"bytes_per_s": 1e9},
        "random_reads": {"reads_per_s": 1e6},
        "relabel_reads": {"reads_per_s": 4e6},
    }
    shape = {"layers": layers, "input_rows": rows, "random_reads": 500, "relabel_reads": 40}
    bounds = e2e_bounds.phase_bounds([shape], widths, machine)
    # 500 graph reads at a million a second, 40 relabelling reads at 4 million, 40 edges
    # of 16 bytes written at 1 GB/s
    assert bounds["sampling"] == pytest.approx(0.5 + 0.01 + 1e3 * 640 / 1e9)
    assert bounds["sparse step"] == pytest.approx(1e3 * 28 * 8 * rows / 1e9)
    assert bounds["layers: bytes"] == pytest.approx(1e3 * by_hand / 1e9)
    assert bounds["layers"] == pytest.approx(bounds["layers: bytes"] + bounds["layers: products"])


def test_the_workload_gives_every_contender_the_same_distinct_seeds(tmp_path):
    import e2e_workload

    args = SimpleNamespace(num_nodes=3000, avg_degree=4.0, seed=0, graph="powerlaw-out",
                           classes=5, warmup=1, steps=2, profile_steps=1, batch_size=64,
                           workload=str(tmp_path))  # fmt: skip
    made = e2e_workload.save(args, str(tmp_path))
    work = e2e_workload.load(args)
    assert made["edges"] == work.src.numel() == 12_000
    assert work.num_batches == e2e_workload.batches_needed(args) == 6
    assert work.seeds.unique().numel() == work.seeds.numel() == 6 * 64


def test_the_peak_restarts_and_freed_heap_goes_back_to_the_system():
    """In a process of its own: a 256 MiB array freed leaves the peak (VmHWM) high until
    ``reset_peak``; 64 MiB freed in small blocks stays resident in the C allocator's heap
    until ``release_free_heap``."""
    script = textwrap.dedent(
        """
        import ctypes, json, sys
        sys.path.insert(0, sys.argv[1])
        from harness import memory

        def status(key):
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

        big = bytearray(256 << 20)
        del big
        before = status("VmHWM")
        memory.reset_peak()
        after = status("VmHWM")
        blocks = [ctypes.create_string_buffer(64 << 10) for _ in range(1024)]
        for block in blocks[:-1]:  # the last one keeps the heap's top in use
            ctypes.memset(block, 1, 64 << 10)
        held = status("RssAnon")
        del blocks[:-1]
        kept = status("RssAnon")
        released = memory.release_free_heap()
        print(json.dumps({"before": before, "after": after, "held": held, "kept": kept,
                          "released": released, "now": status("RssAnon")}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script, str(BENCHMARKS)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    kib = json.loads(done.stdout)
    assert kib["before"] - kib["after"] > 200 << 10  # the 256 MiB peak is gone
    if kib["released"]:  # glibc
        assert kib["kept"] - kib["now"] > 32 << 10


@pytest.mark.parametrize("huge_pages", ["0", "1"])
def test_page_overhang_is_what_the_arrays_hold_beyond_their_bytes(huge_pages):
    """In a process of its own, the resident memory that 16 torch arrays of 2 MiB + 100
    bytes add once written is their bytes plus ``page_overhang``: each holds the rest of its
    last page and, when its data starts on a page boundary (torch's huge-page allocations),
    the page before it for the allocator's size word. Without the overhang the figures
    differ by about 16 pages."""
    script = textwrap.dedent(
        """
        import json, sys
        sys.path.insert(0, sys.argv[1])
        import torch
        from harness import memory

        size = (2 << 20) + 100
        torch.empty(size, dtype=torch.uint8).fill_(1)  # threads started, before the readings
        before = memory.resident_bytes()
        arrays = [torch.empty(size, dtype=torch.uint8) for _ in range(16)]
        for array in arrays:
            array.fill_(1)
        grown = memory.resident_bytes() - before
        blocks = [(a.data_ptr(), a.nbytes) for a in arrays]
        print(json.dumps({"grown": grown, "bytes": sum(a.nbytes for a in arrays),
                          "overhang": memory.page_overhang(blocks),
                          "aligned": sum(a.data_ptr() % memory.PAGE_SIZE == 0 for a in arrays)}))
        """
    )
    # glibc maps each array of its own (a fixed threshold: no reuse of freed blocks)
    env = {**os.environ, "THP_MEM_ALLOC_ENABLE": huge_pages, "MALLOC_MMAP_THRESHOLD_": "65536"}
    done = subprocess.run([sys.executable, "-c", script, str(BENCHMARKS)], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["aligned"] == (16 if huge_pages == "1" else 0)
    assert got["overhang"] > 15 * (memory.PAGE_SIZE - 200)
    # the readings may also see a page or two of the interpreter's own objects
    assert 0 <= got["grown"] - (got["bytes"] + got["overhang"]) <= 2 * memory.PAGE_SIZE
