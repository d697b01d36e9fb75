"""notebooks/explore_embeddings.ipynb runs top to bottom, plots, reloads its checkpoint, and
survives re-running cells, on a kernel of this very interpreter (it needs torch + PyG, not
DGL). The run is the same code on both stacks: it runs on the modern stack, the demo's
(``one_stack``), as the deepwalk notebook does. That graphemb's modules import no DGL where
DGL is installed is checked on the dgl stack by test_nn.py's fresh interpreter."""

from __future__ import annotations

import re

import helpers
import pytest
from helpers import REPO, outputs_of, tagged

nbformat = pytest.importorskip("nbformat", reason="needs nbformat (requirements/dev.txt)")

NOTEBOOK = REPO / "notebooks" / "explore_embeddings.ipynb"
KERNEL = "graphemb-test-python"
CELL_TIMEOUT_S = 120


@pytest.fixture
def kernel_of_this_interpreter(tmp_path, monkeypatch):
    """Skips without PyG/nbclient; else a kernelspec that starts ``sys.executable``: the
    notebook runs on the stack under test, whatever `python3` kernel a machine has installed."""
    pytest.importorskip("torch_geometric", reason="the notebook uses graphemb.nn (PyG layers)")
    pytest.importorskip("nbclient", reason="needs nbclient (requirements/dev.txt)")
    pytest.importorskip("ipykernel", reason="needs ipykernel (requirements/dev.txt)")
    return helpers.kernel_of_this_interpreter(tmp_path, monkeypatch, KERNEL, "graphemb test")


def test_committed_notebook_has_no_outputs():
    helpers.assert_committed_without_outputs(NOTEBOOK)


@pytest.mark.one_stack(
    "modern",
    "notebook run (seconds), the same code on both stacks; the dgl stack checks in "
    "test_nn.py that graphemb's modules import no DGL",
)
def test_notebook_runs_plots_reloads_and_reruns(kernel_of_this_interpreter):
    output_dir = kernel_of_this_interpreter
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    import nbclient

    client = nbclient.NotebookClient(
        notebook,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(output_dir.parent)}},
    )
    (train_cell,) = tagged(notebook, "train")
    (model_cell,) = tagged(notebook, "model")
    (reload_cell,) = tagged(notebook, "reload")
    with client.setup_kernel():
        # Top to bottom; a cell that raises fails here with its traceback (CellExecutionError).
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)

        errors = [
            o
            for c in notebook.cells
            if c.cell_type == "code"
            for o in c.outputs
            if o.output_type == "error"
        ]
        assert not errors
        plots = [
            c for c in tagged(notebook, "plot") if "image/png" in outputs_of(notebook.cells[c])[1]
        ]
        assert len(plots) == 2  # the curves and the projection, displayed
        assert {"curves.png", "embedding_pca.png", "cora_nodes.ckpt"} <= {
            p.name for p in output_dir.iterdir()
        }
        assert "same table: True" in outputs_of(notebook.cells[reload_cell])[0]
        trained = outputs_of(notebook.cells[train_cell])[0]
        assert "epoch 30:" in trained
        assert float(re.search(r"val (\d\.\d+)", trained).group(1)) > 2 / 7  # chance: 1/7

        # Re-running the training cell continues training the same model...
        client.execute_cell(notebook.cells[train_cell], train_cell)
        assert "epoch 60:" in outputs_of(notebook.cells[train_cell])[0]
        # ...and re-running the model cell (a new NodeEmbedding of the same name) starts over.
        client.execute_cell(notebook.cells[model_cell], model_cell)
        client.execute_cell(notebook.cells[train_cell], train_cell)
        assert "epoch 30:" in outputs_of(notebook.cells[train_cell])[0]

        # Graph, sampler and layers are graphemb's and PyG's: DGL was never imported.
        probe = nbformat.v4.new_code_cell('import sys; print("DGL LOADED", "dgl" in sys.modules)')
        notebook.cells.append(probe)
        client.execute_cell(probe, len(notebook.cells) - 1)
        assert "DGL LOADED False" in outputs_of(probe)[0]
