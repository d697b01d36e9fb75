"""examples/deepwalk.py and notebooks/deepwalk.ipynb, run as a user runs them.

The example ends with ``RESULT {json}``; F1 scores are compared with chance, and a run
resumed from a checkpoint with an uninterrupted one: training is seeded per epoch, so they
must agree exactly. Runs call the script's ``main()`` in this process (the same code as the
command line, without a second interpreter start); with ``--num-procs 2`` it spawns its
ranks from here, fresh interpreters as from a command line. The notebook runs top to bottom
through nbclient on a kernel of this interpreter, then its training cell is re-run.

The two-process run and the notebook are the same code on both stacks and take seconds:
they run on the modern stack only (``one_stack``); the single-process runs on both.
"""

from __future__ import annotations

import pytest
import torch
from helpers import (
    REPO,
    RESUME_USAGE_ERRORS,
    assert_committed_without_outputs,
    assert_usage_error,
    kernel_of_this_interpreter,
    outputs_of,
    planetoid_dir,
    result_of,
    tagged,
)

SCRIPT = REPO / "examples" / "deepwalk.py"
NOTEBOOK = REPO / "notebooks" / "deepwalk.ipynb"
KERNEL = "graphemb-deepwalk-test"
TIMEOUT_S = 300


@pytest.fixture
def deepwalk(monkeypatch):
    """The example module; its runs may set torch's thread count, restored afterwards."""
    monkeypatch.setenv("GRAPHEMB_PLANETOID_DIR", planetoid_dir())
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    import deepwalk as module

    threads = torch.get_num_threads()
    yield module
    torch.set_num_threads(threads)


def test_help_lists_the_options(deepwalk, capsys):
    with pytest.raises(SystemExit) as exit_info:
        deepwalk.main(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    for option in (
        "--walk",
        "--p",
        "--q",
        "--num-procs",
        "--quick",
        "--checkpoint",
        "--resume",
        "--dataset",
        "--window",
        "--negatives",
        "--ratios",
        "--optimizer",
    ):
        assert option in shown


@pytest.mark.parametrize(
    "args, message",
    [
        *RESUME_USAGE_ERRORS,
        (["--ratios", "0.5,x"], "--ratios must be comma-separated numbers"),
        (["--ratios", "1.5"], "--ratios must lie in (0, 1)"),
        (["--p", "0"], "--p and --q must be > 0"),
        (["--window", "0"], "--window must be >= 1"),
    ],
)
def test_bad_arguments_are_usage_errors(deepwalk, args, message, capsys):
    assert_usage_error(deepwalk.main, args, message, capsys)


def test_cora_quick_learns_and_resumes_exactly(deepwalk, tmp_path, capsys):
    uninterrupted = deepwalk.main(["--quick", "--no-progress"])
    assert uninterrupted["dataset"] == "cora" and uninterrupted["epochs"] == 3
    # about 0.75 after the quick run; chance 1/7
    assert uninterrupted["micro_f1_at_50"] > 4 * uninterrupted["chance"]

    # Exact resumption with an optimizer whose schedule does not depend on --epochs (sgd's
    # learning rate decays over all --epochs, so a run of 2 then 3 epochs differs).
    uninterrupted = deepwalk.main(["--quick", "--no-progress", "--optimizer", "adam"])
    checkpoint = tmp_path / "walks.ckpt"
    first = deepwalk.main(
        ["--quick", "--no-progress", "--optimizer", "adam", "--epochs", "2"]
        + ["--checkpoint", str(checkpoint)]
    )
    assert checkpoint.exists() and first["epochs"] == 2
    capsys.readouterr()
    resumed = deepwalk.main(
        ["--quick", "--no-progress", "--optimizer", "adam", "--checkpoint", str(checkpoint)]
        + ["--resume"]
    )
    printed = capsys.readouterr().out
    assert f"RESUMED from {checkpoint} after epoch 2" in printed
    assert "epoch   3 " in printed and "epoch   1 " not in printed
    assert resumed["start_epoch"] == 3
    for key in ("final_loss", "micro_f1_at_50", "macro_f1_at_50", "scores"):
        assert resumed[key] == uninterrupted[key], key


def test_sbm_node2vec_recovers_the_communities(deepwalk):
    result = deepwalk.main(
        [
            "--quick",
            "--no-progress",
            "--dataset",
            "sbm",
            "--walk",
            "node2vec",
            "--sbm-nodes",
            "2000",
        ]
    )
    assert result["walk"] == "node2vec" and result["q"] == 0.5
    assert result["micro_f1_at_50"] > result["chance"] + 0.5  # about 0.9 vs 1/5


@pytest.mark.multiprocess
@pytest.mark.one_stack(
    "modern", "2-process run of the example, the same code on both stacks (as the notebook)"
)
def test_two_processes_share_the_tables_and_learn(deepwalk, capfd):
    capfd.readouterr()
    assert deepwalk.main(["--quick", "--no-progress", "--num-procs", "2"]) is None  # ranks print
    printed = capfd.readouterr().out  # the ranks write to the file descriptors they inherit
    assert "tables: shared" in printed
    result = result_of(printed)
    assert result["world_size"] == 2
    assert result["micro_f1_at_50"] > 4 * result["chance"]


# ---------------------------------------------------------------------------- notebook
def test_committed_notebook_has_no_outputs():
    assert_committed_without_outputs(NOTEBOOK)


@pytest.mark.one_stack(
    "modern",
    "notebook run (seconds), the same code on both stacks",
)
def test_notebook_trains_scores_plots_reloads_and_reruns(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="needs nbformat (requirements/dev.txt)")
    nbclient = pytest.importorskip("nbclient", reason="needs nbclient (requirements/dev.txt)")
    pytest.importorskip("ipykernel", reason="needs ipykernel (requirements/dev.txt)")
    # A kernelspec that starts this very interpreter: the notebook runs on the stack under test.
    output_dir = kernel_of_this_interpreter(tmp_path, monkeypatch, KERNEL, "graphemb deepwalk test")

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        kernel_name=KERNEL,
        timeout=TIMEOUT_S,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    (train_cell,) = tagged(notebook, "train")
    (evaluate_cell,) = tagged(notebook, "evaluate")
    (plot_cell,) = tagged(notebook, "plot")
    (reload_cell,) = tagged(notebook, "reload")
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):  # a failing cell raises here
            client.execute_cell(cell, index)
        assert "epoch 4:" in outputs_of(notebook.cells[train_cell])[0]
        evaluated = outputs_of(notebook.cells[evaluate_cell])[0]
        micro = float(evaluated.split("Micro-F1 at 50% labels:")[1].split()[0])
        assert micro > 4 / 7  # chance: 1/7
        assert "image/png" in outputs_of(notebook.cells[plot_cell])[1]
        assert {"deepwalk_projection.png", "cora_walks.ckpt"} <= {
            p.name for p in output_dir.iterdir()
        }
        assert "same table: True" in outputs_of(notebook.cells[reload_cell])[0]
        # Re-running the training cell continues training the same model.
        client.execute_cell(notebook.cells[train_cell], train_cell)
        assert "epoch 8:" in outputs_of(notebook.cells[train_cell])[0]
