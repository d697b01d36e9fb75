"""A user's own files through ``python -m graphemb``: each behaviour a new user expects
(issue 43's table), fed through the command line.

Where the test is about what the command line hands the trainer (the flags' meanings),
the trainer is replaced by one that records its arguments and returns zero rows; the
runs that train do so on tiny graphs with ``--workers 1``. The interrupt tests send a
real SIGINT to a ``python -m graphemb`` process once its progress bar is on stderr.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
import torch
from helpers import files_in

from graphemb.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ["--num-walks", "2", "--walk-length", "5", "--dimensions", "4", "--workers", "1"]


def names_in(path) -> list[str]:
    """The node names of a word2vec text file, in its order."""
    return [line.split()[0] for line in path.read_text().splitlines()[1:]]


@pytest.fixture
def recorded(monkeypatch):
    """Replace the trainer: each call's graph and keyword arguments, zero rows back."""
    calls = []

    def train(graph, **options):
        calls.append((graph, options))
        return torch.zeros(graph.num_nodes, options["dimensions"])

    monkeypatch.setattr("graphemb.cli.embed.train_node_embeddings", train)
    return calls


def run(*argv) -> int:
    return main([str(a) for a in argv])


def test_a_header_line_is_read_as_one_and_said_so(tmp_path, capsys):
    path = tmp_path / "edges.txt"
    path.write_text("source target\n1 2\n2 3\n3 1\n")
    out = tmp_path / "e.emb"
    assert run("deepwalk", "--input", path, "--output", out, *TINY) == 0
    assert sorted(names_in(out)) == ["1", "2", "3"]
    assert f"{path}:1: read as a header, not an edge: 'source target'" in capsys.readouterr().err
    # --header / --no-header force it either way
    path.write_text("5 6\n1 2\n")
    assert run("deepwalk", "--input", path, "--output", out, "--header", *TINY) == 0
    assert sorted(names_in(out)) == ["1", "2"]
    path.write_text("source target\nalice bob\n")
    assert run("deepwalk", "--input", path, "--output", out, "--no-header", *TINY) == 0
    assert sorted(names_in(out)) == ["alice", "bob", "source", "target"]


@pytest.mark.parametrize(
    ("text", "flags"),
    [
        ("a,b\nb,c\n", []),  # a comma-separated first line
        ("a;b\nb;c\n", ["--delimiter", ";"]),
        ("a\tb\nb\tc\n", ["--delimiter", "tab"]),
        ("a|b\nb|c\n", ["--delimiter", "|"]),
    ],
)
def test_a_txt_file_with_another_delimiter(tmp_path, recorded, text, flags):
    path = tmp_path / "edges.txt"
    path.write_text(text)
    assert run("deepwalk", "--input", path, "--output", tmp_path / "e.emb", *flags) == 0
    assert sorted(names_in(tmp_path / "e.emb")) == ["a", "b", "c"]
    assert recorded[0][0].num_edges == 4


def test_a_weight_column_is_ignored_unweighted_and_used_weighted(tmp_path, recorded, capsys):
    path = tmp_path / "edges.txt"
    path.write_text("1 2 0\n2 3 0\n")  # weights all 0: refused, but only when used
    out = tmp_path / "e.emb"
    for flags in ([], ["--unweighted"]):
        assert run("node2vec", "--input", path, "--output", out, *flags) == 0
        graph, options = recorded.pop()
        assert graph.edge_weight is None and options["weighted"] is False
    assert run("node2vec", "--input", path, "--output", out, "--weighted") == 2
    assert f"{path}: every edge weight is 0" in capsys.readouterr().err
    path.write_text("1 2 0.5\n2 3 2\n")
    assert run("node2vec", "--input", path, "--output", out, "--weighted") == 0
    graph, options = recorded.pop()
    assert sorted(graph.edge_weight.tolist()) == [0.5, 0.5, 2.0, 2.0] and options["weighted"]


def test_percent_comments_and_matrix_market(tmp_path, recorded):
    konect = tmp_path / "out.txt"
    konect.write_text("% sym unweighted\n% 3 3 3\n1 2\n2 3\n% end\n3 1\n")
    assert run("deepwalk", "--input", konect, "--output", tmp_path / "k.emb") == 0
    assert sorted(names_in(tmp_path / "k.emb")) == ["1", "2", "3"]
    mtx = tmp_path / "g.mtx"
    matrix = sp.coo_matrix(([1.0, 1.0, 1.0], ([1, 2, 3], [0, 1, 2])), shape=(5, 5))
    scipy.io.mmwrite(mtx, matrix, symmetry="symmetric", field="pattern")
    assert run("deepwalk", "--input", mtx, "--output", tmp_path / "m.emb") == 0
    assert names_in(tmp_path / "m.emb") == ["1", "2", "3", "4", "5"]  # the file's numbers
    assert recorded[-1][0].num_edges == 6  # three undirected edges
    assert run("deepwalk", "--input", mtx, "--output", tmp_path / "m.emb", "--implicit_ids") == 0
    assert names_in(tmp_path / "m.emb") == ["0", "1", "2", "3", "4"]


def test_duplicates_and_self_loops_are_documented_and_can_be_merged(tmp_path, recorded, capsys):
    assert run("deepwalk", "--help") == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "a line repeated (or 'a b' and 'b a' in an undirected graph) is a parallel edge" in (
        shown
    )
    assert "--merge-duplicates" in shown and "--drop-self-loops" in shown
    path = tmp_path / "edges.txt"
    path.write_text("a b 1\nb a 2\na b 4\nc c 8\n")
    out = tmp_path / "e.emb"
    assert run("deepwalk", "--input", path, "--output", out, "--weighted") == 0
    assert recorded.pop()[0].num_edges == 7  # 3 edges both ways, 1 loop once
    assert f"{path}: 1 self loop kept" in capsys.readouterr().err
    flags = ["--weighted", "--merge-duplicates", "--drop-self-loops"]
    assert run("deepwalk", "--input", path, "--output", out, *flags) == 0
    graph = recorded.pop()[0]
    assert graph.num_edges == 2 and graph.edge_weight.tolist() == [7.0, 7.0]
    err = capsys.readouterr().err
    assert f"{path}: 1 self loop dropped" in err and "2 duplicate edges merged" in err
    assert sorted(names_in(out)) == ["a", "b", "c"]


def test_the_output_folder_is_checked_before_the_graph_is_read(tmp_path, capsys):
    path = tmp_path / "edges.txt"
    path.write_text("1 2\n2 3 4 5\n")  # a bad line: reading it would report that first
    out = tmp_path / "missing" / "e.emb"
    assert run("deepwalk", "--input", path, "--output", out) == 2
    err = capsys.readouterr().err
    assert f"--output: cannot write '{out}': no directory '{out.parent}'" in err
    assert "edges.txt:2" not in err and "/." not in err  # no hidden temporary file named


def test_walk_length_one_is_a_usage_error_and_two_trains(tmp_path, capsys):
    path = tmp_path / "edges.txt"
    path.write_text("1 2\n2 3\n")
    out = tmp_path / "e.npy"
    assert run("deepwalk", "--input", path, "--output", out, "--walk-length", "1") == 2
    assert "--walk-length: expected an integer >= 2" in capsys.readouterr().err
    assert not out.exists()
    argv = ["--num-walks", "4", "--walk-length", "2", "--dimensions", "4", "--workers", "1"]
    assert run("deepwalk", "--input", path, "--output", out, "--quiet", *argv) == 0
    rows = np.load(out)
    assert rows.shape == (3, 4) and np.isfinite(rows).all()


def test_score_reads_node_comma_label_rows_of_a_txt_file(tmp_path, capsys):
    from graphemb.io import write_embeddings

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 60)
    rows = np.eye(2)[labels] + 0.05 * rng.normal(size=(60, 2))
    write_embeddings(tmp_path / "e.emb", rows.astype(np.float32), [f"n{i}" for i in range(60)])
    (tmp_path / "labels.txt").write_text("".join(f"n{i},c{c}\n" for i, c in enumerate(labels)))
    argv = ["score", "--embeddings", tmp_path / "e.emb", "--labels", tmp_path / "labels.txt"]
    assert run(*argv, "--ratios", "0.5", "--repeats", "1") == 0
    out = capsys.readouterr().out
    assert "60 labelled nodes, 2 classes (single-label)" in out
    assert float(out.splitlines()[-1].split()[1]) == 1.0  # separable


def test_the_reference_node2vec_flags_and_their_meanings(tmp_path, recorded, monkeypatch):
    path = tmp_path / "edges.txt"
    path.write_text("1 2 0.5\n2 3 2\n")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    argv = ["node2vec", "--input", path, "--output", tmp_path / "e.emb", "--dimensions", "8",
            "--walk-length", "7", "--num-walks", "3", "--window-size", "2", "--iter", "4",
            "--p", "0.5", "--q", "2", "--weighted", "--directed"]  # fmt: skip
    assert run(*argv) == 0
    graph, options = recorded.pop()
    expected = dict(dimensions=8, walk_length=7, num_walks=3, window=2, passes=4, p=0.5, q=2.0)
    assert {k: options[k] for k in expected} == expected
    assert options["epochs"] == 1 and options["weighted"] is True
    assert options["workers"] == 3  # the machine's cores
    assert graph.num_edges == 2  # directed: the lines only
    for workers, expected_workers in (("0", 3), ("1", 1)):
        assert run(*argv[:3], "--output", tmp_path / "e.emb", "--workers", workers) == 0
        assert recorded.pop()[1]["workers"] == expected_workers
    assert run(*argv[:5], "--undirected", "--unweighted") == 0
    graph, options = recorded.pop()
    assert graph.num_edges == 4 and graph.edge_weight is None and options["passes"] == 1


def test_help_groups_the_reference_flags_in_its_order(capsys):
    assert run("node2vec", "--help") == 0
    shown = capsys.readouterr().out
    reference = shown.split("node2vec's flags (the reference implementation's")[1]
    reference = reference.split("reading the graph file:")[0]
    order = ["--input", "--output", "--dimensions", "--walk-length", "--num-walks",
             "--window-size", "--iter", "--workers", "--p", "--q", "--weighted",
             "--unweighted", "--directed", "--undirected"]  # fmt: skip
    places = [reference.index(f"\n  {flag} ") for flag in order]
    assert places == sorted(places)
    for title in ("reading the graph file:", "skip-gram training (graphemb's own):", "run:"):
        assert f"\n{title}\n" in shown
    for flag in ("--delimiter", "--implicit_ids", "--header", "--merge-duplicates", "--epochs"):
        assert flag in shown.split("reading the graph file:")[1]


def test_iter_passes_over_the_same_walks_end_to_end(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{i} {(i + 1) % 12}\n" for i in range(12)))
    rows = {}
    for passes in ("1", "3"):
        out = tmp_path / f"e{passes}.npy"
        argv = ["deepwalk", "--input", path, "--output", out, "--iter", passes, "--quiet"]
        assert run(*argv, "--num-walks", "3", "--walk-length", "6", "--dimensions", "8",
                   "--workers", "1") == 0  # fmt: skip
        rows[passes] = np.load(out)
    assert rows["1"].shape == rows["3"].shape == (12, 8)
    assert not np.allclose(rows["1"], rows["3"])


def test_implicit_ids_name_the_rows(tmp_path, recorded):
    path = tmp_path / "edges.txt"
    path.write_text("1 4\n4 2\n")
    out = tmp_path / "e.emb"
    assert run("deepwalk", "--input", path, "--output", out, "--implicit_ids") == 0
    assert names_in(out) == ["0", "1", "2", "3", "4"]
    assert run("deepwalk", "--input", path, "--output", out) == 0
    assert names_in(out) == ["1", "2", "4"]


# ----------------------------------------------------------------------------- Ctrl-C


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stream:
                    fields = stream.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def read_until(stream, marks: tuple[str, ...], deadline: float) -> str:
    """What ``stream`` gives until one of ``marks`` shows (or it ends, or the deadline)."""
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    seen = ""
    while not any(mark in seen for mark in marks) and time.monotonic() < deadline:
        if selector.select(timeout=max(0.0, deadline - time.monotonic())):
            chunk = os.read(stream.fileno(), 4096).decode("utf-8", "replace")
            if not chunk:
                break
            seen += chunk
    return seen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_is_one_line_exit_130_and_leaves_nothing(tmp_path, workers):
    """A SIGINT once training shows its progress bar: to the process alone (``--workers
    1``), or to its whole process group as a terminal's Ctrl-C does (``--workers 2``:
    both training threads stop)."""
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 2000, (10_000, 2))
    (tmp_path / "g.txt").write_text("".join(f"{u} {v}\n" for u, v in edges))
    before = files_in(tmp_path)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["PYTHONFAULTHANDLER"] = "1"  # SIGABRT prints every thread's stack (a hang's report)
    command = [sys.executable, "-m", "graphemb", "deepwalk", "--input", "g.txt", "--output",
               "g.emb", "--num-walks", "1000", "--workers", workers]  # fmt: skip
    # A terminal's foreground process takes SIGINT as Python's KeyboardInterrupt; a child
    # inherits an ignored SIGINT (a test run started in the background), so reset it.
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        seen = read_until(process.stderr, ("walk/s]",), time.monotonic() + 300)
        assert "walk/s]" in seen, seen  # training has started
        helpers = children_of(process.pid)
        if workers == "1":
            process.send_signal(signal.SIGINT)
        else:
            os.killpg(process.pid, signal.SIGINT)
        try:
            rest = process.communicate(timeout=120)[1].decode()
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            stacks = process.communicate(timeout=60)[1].decode()[-6000:]
            pytest.fail(f"still running 120 s after SIGINT; its threads:\n{stacks}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, seen + rest
    assert "Traceback" not in seen + rest
    said = [
        line.strip()
        for line in rest.replace("\r", "\n").splitlines()
        if line.strip() and "walk/s]" not in line and "%|" not in line  # the bar's updates
    ]
    assert said == ["python -m graphemb deepwalk: interrupted"], rest
    assert files_in(tmp_path) == before  # no output, no temporary file
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling a condition: the helpers exiting
    assert not any(alive(pid) for pid in helpers)
