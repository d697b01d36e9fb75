"""The examples, run as a user runs them (subprocesses, ``--quick``), judged by what they print.

Each example ends with ``RESULT {json}``; accuracies are compared with chance
(1 / num_classes), and a resumed run with an uninterrupted one: training is seeded per
epoch, so resuming after epoch k must reproduce the uninterrupted run exactly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dgl", reason="the examples need DGL: run on the dgl stack (.venv/dgl)")

pytestmark = pytest.mark.dgl

REPO = Path(__file__).resolve().parent.parent
SINGLE = REPO / "examples" / "node_classification.py"
MULTI = REPO / "examples" / "multi_gpu_graphsage.py"
RUN_TIMEOUT_S = 300
# What resuming must reproduce exactly.
SAME_AFTER_RESUME = ("best_epoch", "val_acc", "test_acc", "final_val_acc", "final_test_acc")


def planetoid_dir() -> str:
    """$GRAPHEMB_PLANETOID_DIR, else the shared copy beside the checkout (as CI does)."""
    for candidate in (os.environ.get("GRAPHEMB_PLANETOID_DIR"), REPO.parent / "shared/datasets/planetoid"):
        if candidate and (Path(candidate) / "ind.cora.graph").exists():
            return str(candidate)
    pytest.skip("Planetoid files not found: set GRAPHEMB_PLANETOID_DIR to a folder holding ind.cora.*")


def run(command: list[str], expect_ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "DGLBACKEND": "pytorch", "GRAPHEMB_PLANETOID_DIR": planetoid_dir()}
    result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                            env=env, cwd=REPO)
    if expect_ok:
        assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    return result


def example(script: Path, *args: str, expect_ok: bool = True) -> subprocess.CompletedProcess:
    return run([sys.executable, str(script), "--no-progress", *args], expect_ok)


def torchrun(script: Path, nproc: int, *args: str) -> subprocess.CompletedProcess:
    # --standalone: torchrun's rendezvous takes a free port itself.
    return run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={nproc}", str(script), "--no-progress", *args])


def result_of(output: subprocess.CompletedProcess) -> dict:
    lines = [line for line in output.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, f"expected one RESULT line (rank 0 only), got:\n{output.stdout}"
    return json.loads(lines[0][len("RESULT "):])


def logged_epochs(output: subprocess.CompletedProcess) -> list[int]:
    return [int(m) for m in re.findall(r"^epoch +(\d+) ", output.stdout, flags=re.MULTILINE)]


# ---------------------------------------------------------------------------- command lines
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


@pytest.mark.parametrize("name", ["node_classification", "multi_gpu_graphsage"])
def test_help(scripts, name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        scripts[name].main(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    for option in ("--dataset", "--no-features", "--epochs", "--emb-lr", "--fanouts", "--seed",
                   "--checkpoint", "--resume", "--quick"):
        assert option in shown
    if name == "multi_gpu_graphsage":
        assert "--num-procs" in shown and "--device" in shown


@pytest.mark.parametrize("args, message", [
    (["--resume"], "--resume needs --checkpoint PATH"),
    (["--resume", "--checkpoint", "no/such.ckpt"], "--resume: no checkpoint at no/such.ckpt"),
    (["--fanouts", "10,x"], "--fanouts must be comma-separated integers"),
    (["--no-features", "--emb-dim", "0"], "the model would have no input"),
])
def test_bad_arguments_are_usage_errors(scripts, args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        scripts["node_classification"].main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------------------- one process
def test_cora_quick_learns_and_resumes_exactly(tmp_path):
    uninterrupted = result_of(example(SINGLE, "--quick"))
    assert uninterrupted["dataset"] == "cora" and uninterrupted["features"] is True
    assert uninterrupted["test_acc"] > 4 * uninterrupted["chance"]  # about 0.8 vs 1/7

    checkpoint = tmp_path / "cora.ckpt"
    first = example(SINGLE, "--quick", "--epochs", "6", "--checkpoint", str(checkpoint))
    assert checkpoint.exists() and logged_epochs(first)[-1] == 6

    second = example(SINGLE, "--quick", "--checkpoint", str(checkpoint), "--resume")
    assert f"RESUMED from {checkpoint} after epoch 6" in second.stdout
    assert logged_epochs(second)[0] == 7  # starts after the saved epoch, not at 1
    resumed = result_of(second)
    assert resumed["start_epoch"] == 7
    for key in SAME_AFTER_RESUME:
        assert resumed[key] == uninterrupted[key], key


def test_sbm_embeddings_alone_learn_the_communities():
    result = result_of(example(SINGLE, "--dataset", "sbm", "--no-features", "--quick"))
    assert result["features"] is False
    assert result["test_acc"] > result["chance"] + 0.5  # about 0.97 vs 1/5


# ---------------------------------------------------------------------------- two processes
@pytest.mark.multiprocess
def test_two_processes_torchrun_and_spawn_agree_and_resume_exactly(tmp_path):
    uninterrupted_output = torchrun(MULTI, 2, "--quick")
    uninterrupted = result_of(uninterrupted_output)
    assert uninterrupted["world_size"] == 2 and uninterrupted["device"] == "cpu"
    assert "embedding storage: shared" in uninterrupted_output.stdout
    assert uninterrupted["test_acc"] > 4 * uninterrupted["chance"]

    checkpoint = tmp_path / "two.ckpt"
    example(MULTI, "--num-procs", "2", "--quick", "--epochs", "6", "--checkpoint", str(checkpoint))
    second = example(MULTI, "--num-procs", "2", "--quick", "--checkpoint", str(checkpoint), "--resume")
    assert f"RESUMED from {checkpoint} after epoch 6" in second.stdout
    assert logged_epochs(second)[0] == 7
    resumed = result_of(second)
    assert resumed["start_epoch"] == 7 and resumed["world_size"] == 2
    # spawn and torchrun run the same training; resuming changes nothing either.
    for key in SAME_AFTER_RESUME:
        assert resumed[key] == uninterrupted[key], key
