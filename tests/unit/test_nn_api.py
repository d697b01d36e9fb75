"""graphemb.nn's surface: what importing it pulls in (PyG and DGL only on demand, with clear
errors without them, checked in fresh interpreters on both stacks) and the signatures that
help() and editors show."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch_geometric", reason="graphemb.nn needs torch_geometric")

from graphemb.nn import GraphSAGE  # noqa: E402


def run_python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter of this environment."""
    env = {**os.environ, "DGLBACKEND": "pytorch"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


# ---------------------------------------------------------------------------- imports
def test_imports_pyg_and_dgl_only_on_demand_with_clear_errors_without_them():
    """One fresh interpreter (imports of torch are slow) goes through the cases in order,
    starting with the core modules (graphemb.datasets included): they import neither PyG
    nor DGL; graphemb.nn imports PyG when its first PyG model is built."""
    result = run_python("""
        import importlib, sys
        import graphemb, graphemb.optim, graphemb.datasets, graphemb.graph, graphemb.sampling
        from graphemb import NodeEmbedding
        def loaded():
            return sorted(m for m in sys.modules if m.split(".")[0] in ("dgl", "torch_geometric")
                          or m.startswith(("graphemb.nn", "graphemb.dgl")))
        print("LOADED", loaded())
        import graphemb.nn
        print("NN LOADED PYG", [m for m in loaded() if m.startswith("torch_geometric")])

        def try_import(module, label):
            try:
                importlib.import_module(module)
            except ImportError as error:
                print(label, "MESSAGE", error)
            else:
                print(label, "NO ERROR")

        # sys.modules[name] = None makes `import name` fail as if it were not installed.
        sys.modules["torch_geometric"] = None
        emb = graphemb.NodeEmbedding(3, 2, "x")
        print("INPUT OK", graphemb.nn.EmbeddingInput(emb).out_size)
        try:
            graphemb.nn.GraphSAGE(emb, 0, 4, 2)
        except ImportError as error:
            print("NN MESSAGE", error)
        else:
            print("NN NO ERROR")
        print("CORE OK", emb.weight.shape)

        del sys.modules["torch_geometric"]
        sys.modules["dgl"] = None
        try_import("graphemb.dgl", "DGL")
        print("NN OK", type(graphemb.nn.GraphSAGE(emb, 0, 4, 2)).__name__)  # without DGL
    """)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "LOADED []" in out  # import graphemb loads neither PyG nor DGL
    assert "NN LOADED PYG []" in out  # nor does import graphemb.nn
    assert "INPUT OK 2" in out  # the input layer needs no PyG
    assert "NN NO ERROR" not in out and "DGL NO ERROR" not in out
    assert "NN MESSAGE graphemb.nn needs PyTorch Geometric for GraphSAGE" in out
    assert "pip install torch_geometric" in out  # says what to install
    assert "CORE OK torch.Size([3, 2])" in out  # the rest of graphemb still works
    assert "DGL MESSAGE graphemb.dgl needs DGL" in out
    assert "dgl-stack" in out and "torch <= 2.2.1" in out
    assert "NN OK GraphSAGE" in out


def test_graphemb_dgl_error_on_a_stack_without_dgl():
    try:
        import dgl  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("DGL is installed here; the simulated case above covers this stack")
    with pytest.raises(ImportError, match="graphemb.dgl needs DGL"):
        import graphemb.dgl  # noqa: F401


def test_graphsage_signature_names_every_parameter():
    """help(), inspect and editors show GraphSAGE's real parameters, not ``*args``."""
    import inspect

    names = list(inspect.signature(GraphSAGE).parameters)
    assert names == [
        "embedding",
        "num_features",
        "hidden_size",
        "num_classes",
        "num_layers",
        "dropout",
        "input_dropout",
        "activation",
        "input_layer",
        "aggregator_type",
    ]
    assert inspect.signature(GraphSAGE).parameters["aggregator_type"].default == "mean"
