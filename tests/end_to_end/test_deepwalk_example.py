"""examples/deepwalk.py and notebooks/deepwalk.ipynb, run as a user runs them.

The example ends with ``RESULT {json}``; F1 scores are compared with chance. Runs call the
script's ``main()`` in this process (the same code as the command line, without a second
interpreter start). The notebook runs top to bottom through nbclient on a kernel of this
interpreter; it is the same code on both stacks and runs on the modern stack only
(``one_stack``).
"""

from __future__ import annotations

import pytest
import torch
from helpers import (
    COMPILED_BACKEND,
    REPO,
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
    for option in ("--walk", "--p", "--q", "--backend", "--device", "--quick", "--dataset",
                   "--window", "--negatives", "--ratios", "--workers", "--num-procs"):  # fmt: skip
        assert option in shown, option


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ratios", "0.5,x"], "--ratios must be comma-separated numbers"),
        (["--ratios", "1.5"], "--ratios must lie in (0, 1)"),
        (["--p", "0", "--walk", "node2vec"], "p must be a positive number, got 0"),
        (["--window", "0"], "window must be"),
        (["--backend", "gpu"], "invalid choice: 'gpu'"),
    ],
)
def test_bad_arguments_are_usage_errors(deepwalk, args, message, capsys):
    assert_usage_error(deepwalk.main, args, message, capsys)


@pytest.mark.parametrize("backend", [COMPILED_BACKEND, "torch"])
def test_cora_quick_learns_with_either_backend(deepwalk, backend, capsys):
    result = deepwalk.main(["--quick", "--no-progress", "--backend", backend, "--workers", "1"])
    printed = capsys.readouterr().out
    assert f"backend {backend}" in printed and "RESULT " in printed
    assert result["micro_f1_at_50"] > 4 * result["chance"]  # chance: 1/7
    assert result["split_accuracy"] > 3 * result["chance"]


def test_sbm_node2vec_recovers_the_communities(deepwalk):
    result = deepwalk.main(["--quick", "--no-progress", "--dataset", "sbm", "--walk",
                            "node2vec", "--sbm-nodes", "2000"])  # fmt: skip
    assert result["walk"] == "node2vec" and result["q"] == 0.5
    assert result["micro_f1_at_50"] > result["chance"] + 0.5  # about 0.9 vs 1/5


@pytest.mark.multiprocess
@pytest.mark.one_stack("modern", "2-rank run of the example, the same code on both stacks")
def test_two_ranks_train_one_table_and_learn(deepwalk, capfd):
    capfd.readouterr()
    argv = ["--quick", "--no-progress", "--num-procs", "2", "--backend", "torch"]
    assert deepwalk.main(argv) is None  # the ranks print
    printed = capfd.readouterr().out  # the ranks write to the file descriptors they inherit
    assert "2 rank(s)" in printed
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
def test_notebook_trains_scores_plots_saves_and_reloads(tmp_path, monkeypatch):
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
        assert "5 walks per node:" in outputs_of(notebook.cells[train_cell])[0]
        evaluated = outputs_of(notebook.cells[evaluate_cell])[0]
        micro = float(evaluated.split("Micro-F1 at 50% labels:")[1].split()[0])
        assert micro > 4 / 7  # chance: 1/7
        assert "image/png" in outputs_of(notebook.cells[plot_cell])[1]
        assert {"deepwalk_projection.png", "cora_walks.npy", "cora_walks.emb"} <= {
            p.name for p in output_dir.iterdir()
        }
        assert "same table: True" in outputs_of(notebook.cells[reload_cell])[0]
