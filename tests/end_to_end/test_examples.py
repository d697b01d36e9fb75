"""The examples, run as a user runs them (``--quick``), judged by what they print: they need
torch + PyG only, and must not import DGL.

Each example ends with ``RESULT {json}``; accuracies are compared with chance
(1 / num_classes), and a resumed run with an uninterrupted one: training is seeded per
epoch, so resuming after epoch k must reproduce the uninterrupted run exactly. Runs that
need a real command line (a fresh interpreter with DGL blocked, torchrun, a missing
package) are subprocesses; the others call the example's ``main(argv)`` in this process,
which parses ``argv`` as the command line would and spares a torch + PyG start-up per run
(with ``--num-procs`` it spawns its ranks from here, as from a command line).

The runs with DGL blocked prove something only where DGL is installed: the dgl stack. The
two-process run is the same code on both stacks and the slowest test of the suite: it runs
on the dgl stack only (``one_stack``); the modern stack runs the single-process tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import helpers
import numpy as np
import pytest
import torch
from helpers import (
    DGL_INSTALLED,
    REPO,
    RESUME_USAGE_ERRORS,
    assert_usage_error,
    planetoid_dir,
)

pytest.importorskip("torch_geometric", reason="the examples need torch_geometric")

SINGLE = REPO / "examples" / "node_classification.py"
MULTI = REPO / "examples" / "multi_gpu_graphsage.py"
RUN_TIMEOUT_S = 300
# What resuming must reproduce exactly.
SAME_AFTER_RESUME = ("best_epoch", "val_acc", "test_acc", "final_val_acc", "final_test_acc")
# Runs a script with `import dgl` failing, as on a machine without DGL.
WITHOUT_DGL = textwrap.dedent("""
    import runpy, sys
    sys.modules["dgl"] = None
    script, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
""")


def run(command: list[str], expect_ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRAPHEMB_PLANETOID_DIR": planetoid_dir()}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env, cwd=REPO
    )
    if expect_ok:
        assert result.returncode == 0, (
            f"{command} failed:\n{result.stdout}\n{result.stderr[-4000:]}"
        )
    return result


def example(script: Path, *args: str, expect_ok: bool = True) -> subprocess.CompletedProcess:
    return run([sys.executable, "-c", WITHOUT_DGL, str(script), "--no-progress", *args], expect_ok)


def torchrun(script: Path, nproc: int, *args: str) -> subprocess.CompletedProcess:
    # --standalone: torchrun's rendezvous takes a free port itself.
    return run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc_per_node={nproc}", str(script), "--no-progress", *args]
    )  # fmt: skip


def result_of(output: subprocess.CompletedProcess | str) -> dict:
    return helpers.result_of(output if isinstance(output, str) else output.stdout)


def logged_epochs(output: subprocess.CompletedProcess | str) -> list[int]:
    text = output if isinstance(output, str) else output.stdout
    return [int(m) for m in re.findall(r"^epoch +(\d+) ", text, flags=re.MULTILINE)]


@pytest.fixture(scope="module")
def scripts():
    """The two example modules, imported (their main() parses argv like the command line)."""
    sys.path.insert(0, str(SINGLE.parent))
    try:
        import multi_gpu_graphsage
        import node_classification
    finally:
        sys.path.remove(str(SINGLE.parent))
    return {"node_classification": node_classification, "multi_gpu_graphsage": multi_gpu_graphsage}


@pytest.fixture
def in_process(scripts, capsys, monkeypatch):
    """``main(argv)`` of the single-process example here; returns what it printed. The
    example sets torch's thread count: it is restored afterwards."""
    monkeypatch.setenv("GRAPHEMB_PLANETOID_DIR", planetoid_dir())
    yield from _in_process(scripts, capsys)


@pytest.fixture
def in_process_own_graph(scripts, capsys):
    """The same for runs on users' graph files, which need no Planetoid files."""
    yield from _in_process(scripts, capsys)


def _in_process(scripts, capsys):
    threads = torch.get_num_threads()

    def main(*args: str) -> str:
        capsys.readouterr()
        scripts["node_classification"].main(["--no-progress", *args])
        return capsys.readouterr().out

    yield main
    torch.set_num_threads(threads)


@pytest.fixture
def spawning(scripts, capfd, monkeypatch):
    """``main(argv)`` of the multi-process example here: it spawns its ranks (fresh
    interpreters that import the example, as from a command line) and waits for them;
    returns what the ranks printed (captured at the file descriptors they inherit)."""
    monkeypatch.setenv("GRAPHEMB_PLANETOID_DIR", planetoid_dir())
    monkeypatch.syspath_prepend(str(MULTI.parent))  # the ranks import the example's modules

    def main(*args: str) -> str:
        capfd.readouterr()
        scripts["multi_gpu_graphsage"].main(["--no-progress", *args])
        return capfd.readouterr().out

    return main


# ---------------------------------------------------------------------------- command lines
@pytest.mark.parametrize("name", ["node_classification", "multi_gpu_graphsage"])
def test_help(scripts, name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        scripts[name].main(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    for option in ("--dataset", "--no-features", "--epochs", "--emb-lr", "--fanouts", "--seed",
                   "--checkpoint", "--resume", "--quick", "--device"):  # fmt: skip
        assert option in shown
    if name == "multi_gpu_graphsage":
        assert "--num-procs" in shown
    else:
        for option in ("--graph", "--graph-format", "--directed", "--labels", "--features",
                       "--split"):  # fmt: skip
            assert option in shown


@pytest.mark.parametrize(
    "args, message",
    [
        *RESUME_USAGE_ERRORS,
        (["--fanouts", "10,x"], "--fanouts must be comma-separated integers"),
        (["--fanouts", "10,-2"], "--fanouts needs positive integers"),
        (["--no-features", "--emb-dim", "0"], "the model would have no input"),
        (["--dropout", "1"], "--dropout must lie in [0, 1), got 1.0"),
    ],
)
def test_bad_arguments_are_usage_errors(scripts, args, message, capsys):
    assert_usage_error(scripts["node_classification"].main, args, message, capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible here")
def test_device_cuda_without_a_gpu_is_a_usage_error(scripts, capsys):
    for name in ("node_classification", "multi_gpu_graphsage"):
        with pytest.raises(SystemExit) as exit_info:
            scripts[name].main(["--device", "cuda"])
        assert exit_info.value.code == 2
        assert "--device cuda: no CUDA device is visible" in capsys.readouterr().err


def test_without_pyg_the_example_says_what_to_install():
    blocked = WITHOUT_DGL.replace(
        'sys.modules["dgl"] = None', 'sys.modules["torch_geometric"] = None'
    )
    output = run([sys.executable, "-c", blocked, str(SINGLE), "--quick"], expect_ok=False)
    assert output.returncode == 1 and "Traceback" not in output.stderr
    assert "graphemb.nn needs PyTorch Geometric" in output.stderr
    assert "pip install torch_geometric" in output.stderr


# ---------------------------------------------------------------------------- one process
def test_cora_quick_learns_and_resumes_exactly(tmp_path, in_process):
    # 6 epochs and a checkpoint: where DGL is installed, a real command line with DGL
    # blocked (the example must not need it); elsewhere, without DGL anyway, main() here...
    checkpoint = tmp_path / "cora.ckpt"
    first_run = ("--quick", "--epochs", "6", "--checkpoint", str(checkpoint))
    first = example(SINGLE, *first_run).stdout if DGL_INSTALLED else in_process(*first_run)
    assert checkpoint.exists() and logged_epochs(first)[-1] == 6

    uninterrupted = result_of(in_process("--quick"))
    assert uninterrupted["dataset"] == "cora" and uninterrupted["features"] is True
    assert uninterrupted["device"] == "cpu"
    assert uninterrupted["test_acc"] > 4 * uninterrupted["chance"]  # about 0.75 vs 1/7

    # ...which a fresh model resumes at epoch 7, ending where the uninterrupted run did.
    second = in_process("--quick", "--checkpoint", str(checkpoint), "--resume")
    assert f"RESUMED from {checkpoint} after epoch 6" in second
    assert logged_epochs(second)[0] == 7  # starts after the saved epoch, not at 1
    resumed = result_of(second)
    assert resumed["start_epoch"] == 7
    for key in SAME_AFTER_RESUME:
        assert resumed[key] == uninterrupted[key], key


def test_sbm_embeddings_alone_learn_the_communities(in_process):
    result = result_of(in_process("--dataset", "sbm", "--sbm-nodes", "2000", "--quick"))
    assert result["features"] is False
    assert result["test_acc"] > result["chance"] + 0.5  # about 0.97 vs 1/5


def write_community_graph(folder: Path, names: str) -> tuple[Path, list[int]]:
    """An undirected edge list (one line per edge) of 4 planted communities; returns the
    file and each node's community. ``names``: "strings" (v0, v7, ...) or sparse integers."""
    from graphemb.datasets import stochastic_block_model

    graph = stochastic_block_model(400, num_communities=4, seed=0)
    name = (lambda i: f"v{7 * i}") if names == "strings" else (lambda i: str(7 * i + 3))
    lines = [
        f"{name(s)} {name(d)}\n"
        for s, d in zip(graph.src.tolist(), graph.dst.tolist(), strict=True)
        if s < d
    ]
    path = folder / "graph.txt"
    path.write_text("# planted communities\n" + "".join(lines))
    return path, graph.labels.tolist()


def test_own_graph_with_multi_label_labels(tmp_path, in_process_own_graph):
    graph, community = write_community_graph(tmp_path, "strings")
    labels = tmp_path / "labels.txt"  # two labels per node, every fifth node unlabelled
    labels.write_text(
        "".join(f"v{7 * i} a{c} b{c // 2}\n" for i, c in enumerate(community) if i % 5)
    )

    result = result_of(
        in_process_own_graph("--graph", str(graph), "--labels", str(labels), "--quick")
    )

    assert result["dataset"] == "graph.txt" and result["multi_label"] is True
    assert result["features"] is False and result["chance"] == round(1 / 6, 4)
    # each node's 2 best of 6 labels: about 1/3 Micro-F1 by chance, about 0.99 learnt
    assert result["test_micro_f1"] > 0.8 and result["test_macro_f1"] > 0.7


def test_own_graph_with_single_labels_and_features(tmp_path, in_process_own_graph):
    graph, community = write_community_graph(tmp_path, "integers")
    labels = tmp_path / "labels.csv"
    labels.write_text("".join(f"{7 * i + 3},c{c}\n" for i, c in enumerate(community)))
    # Row r: the node named r, its community one-hot (read in another order than the
    # graph's ids, the rows only help if matched by name); the other rows are noise.
    features = torch.rand(7 * 400 + 3, 4, generator=torch.Generator().manual_seed(0))
    for i, c in enumerate(community):
        features[7 * i + 3] = torch.nn.functional.one_hot(torch.tensor(c), 4).float()
    np.save(tmp_path / "features.npy", features.numpy())

    result = result_of(
        in_process_own_graph("--graph", str(graph), "--labels", str(labels), "--features",
                   str(tmp_path / "features.npy"), "--quick")
    )  # fmt: skip

    assert result["multi_label"] is False and result["features"] is True
    assert result["test_acc"] > result["chance"] + 0.6  # about 1.0 vs 1/4
    assert result["test_micro_f1"] == result["final_test_acc"]  # accuracy, single-label


@pytest.mark.parametrize(
    "files, message",
    [
        ({"graph.txt": "a b\nb c d e\n"}, "graph.txt:2: expected 2 columns"),
        ({"graph.txt": "a b\n"}, "graph.txt carries no labels: give them with --labels"),
        ({"graph.txt": "a b\n", "labels.txt": "a x\nzz y\n"}, "labels.txt:2: node 'zz'"),
        (
            {"graph.txt": "a b\n", "labels.txt": "a x\n", "features.emb": "1 1\na 0\n"},
            "features.emb: no features for node 'b'",
        ),
    ],
)
def test_bad_graph_files_are_usage_errors(tmp_path, scripts, capsys, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    argv = ["--graph", str(tmp_path / "graph.txt")]
    if "labels.txt" in files:
        argv += ["--labels", str(tmp_path / "labels.txt")]
    if "features.emb" in files:
        argv += ["--features", str(tmp_path / "features.emb")]
    with pytest.raises(SystemExit) as exit_info:
        scripts["node_classification"].main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cora_quick_on_cuda_learns_and_resumes_exactly(tmp_path, in_process):
    uninterrupted = result_of(in_process("--quick", "--device", "cuda"))
    assert uninterrupted["device"] == "cuda"
    assert uninterrupted["test_acc"] > 4 * uninterrupted["chance"]
    checkpoint = tmp_path / "cuda.ckpt"
    in_process("--quick", "--device", "cuda", "--epochs", "6", "--checkpoint", str(checkpoint))
    resumed = result_of(
        in_process("--quick", "--device", "cuda", "--checkpoint", str(checkpoint), "--resume")
    )
    assert resumed["start_epoch"] == 7
    # Sparse sums on a GPU may add in any order: equal up to a prediction or two.
    for key in ("val_acc", "test_acc", "final_val_acc", "final_test_acc"):
        assert abs(resumed[key] - uninterrupted[key]) <= 0.005, key


# ---------------------------------------------------------------------------- two processes
@pytest.mark.multiprocess
@pytest.mark.one_stack(
    "dgl",
    "3 launches of 2 ranks (~20 s), the same code on both stacks; the modern stack runs the "
    "example in one process, the deepwalk example's 2-process run and the notebooks",
)
def test_two_processes_torchrun_and_spawn_agree_and_resume_exactly(tmp_path, spawning):
    uninterrupted_output = torchrun(MULTI, 2, "--quick")
    uninterrupted = result_of(uninterrupted_output)
    assert uninterrupted["world_size"] == 2 and uninterrupted["device"] == "cpu"
    assert "embedding storage: shared" in uninterrupted_output.stdout
    assert uninterrupted["test_acc"] > 4 * uninterrupted["chance"]

    # --num-procs: ranks spawned by main() (here, not in a fresh interpreter: the ranks are
    # fresh interpreters either way, and this one has torch and PyG imported already).
    checkpoint = tmp_path / "two.ckpt"
    spawning("--num-procs", "2", "--quick", "--epochs", "6", "--checkpoint", str(checkpoint))
    second = spawning("--num-procs", "2", "--quick", "--checkpoint", str(checkpoint), "--resume")
    assert f"RESUMED from {checkpoint} after epoch 6" in second
    assert logged_epochs(second)[0] == 7
    resumed = result_of(second)
    assert resumed["start_epoch"] == 7 and resumed["world_size"] == 2
    # spawn and torchrun run the same training; resuming changes nothing either.
    for key in SAME_AFTER_RESUME:
        assert resumed[key] == uninterrupted[key], key


@pytest.mark.cuda
@pytest.mark.multiprocess
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_two_gpus_partition_the_embedding_and_learn():
    output = example(MULTI, "--num-procs", "2", "--device", "cuda", "--quick")
    result = result_of(output)
    assert result["world_size"] == 2 and result["device"] == "cuda"
    assert "embedding storage: partitioned" in output.stdout
    assert result["test_acc"] > 4 * result["chance"]
