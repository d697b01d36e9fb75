"""graphemb.nn: the DGL adapters (EmbeddingInput, GraphSAGE, to_dgl_graph).

Import behaviour is checked on both stacks, in fresh interpreters; everything else needs
DGL and skips on the modern stack.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

from graphemb import NodeEmbedding
from graphemb.datasets import stochastic_block_model
from graphemb.optim import SparseAdam, SparseSGD

NEEDS_DGL = "graphemb.nn needs DGL: run on the dgl stack (.venv/dgl, torch 2.2.1 + DGL 2.1.0)"


def run_python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter of this environment."""
    env = {**os.environ, "DGLBACKEND": "pytorch"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, env=env)


# ---------------------------------------------------------------------------- imports (both stacks)
def test_importing_graphemb_imports_neither_dgl_nor_graphemb_nn():
    result = run_python("""
        import sys
        import graphemb, graphemb.optim, graphemb.datasets
        from graphemb import NodeEmbedding
        loaded = sorted(m for m in sys.modules if m == "dgl" or m.startswith(("dgl.", "graphemb.nn")))
        print("LOADED", loaded)
    """)
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout


def test_graphemb_nn_without_dgl_raises_a_clear_import_error():
    # sys.modules["dgl"] = None makes `import dgl` fail as if DGL were not installed.
    result = run_python("""
        import sys
        sys.modules["dgl"] = None
        try:
            import graphemb.nn
        except ImportError as error:
            print("MESSAGE", error)
        else:
            print("NO ERROR")
        import graphemb                       # the rest of graphemb still works
        print("CORE OK", graphemb.NodeEmbedding(3, 2, "x").weight.shape)
    """)
    assert result.returncode == 0, result.stderr
    message = result.stdout
    assert "NO ERROR" not in message
    assert "graphemb.nn needs DGL" in message
    assert "dgl-stack" in message and "torch <= 2.2.1" in message  # says how to get it
    assert "CORE OK torch.Size([3, 2])" in message


def test_graphemb_nn_error_on_a_stack_without_dgl():
    try:
        import dgl  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("DGL is installed here; the simulated case above covers this stack")
    with pytest.raises(ImportError, match="graphemb.nn needs DGL"):
        import graphemb.nn  # noqa: F401


# ---------------------------------------------------------------------------- helpers
@pytest.fixture
def dgl():
    return pytest.importorskip("dgl", reason=NEEDS_DGL)


def small_graph(dgl, num_nodes=40, num_features=5):
    data = stochastic_block_model(num_nodes, num_communities=3, avg_degree=6.0, seed=1)
    features = torch.rand(num_nodes, num_features)
    data = SimpleNamespace(**{k: getattr(data, k) for k in (
        "num_nodes", "num_classes", "labels", "src", "dst", "train_idx", "val_idx", "test_idx")},
        features=features)
    from graphemb.nn import to_dgl_graph

    return to_dgl_graph(data, normalize_features=False), data


def random_embedding(num_nodes, dim, name, **kwargs):
    generator = torch.Generator().manual_seed(7)
    values = torch.randn(num_nodes, dim, generator=generator)
    return NodeEmbedding(num_nodes, dim, name, init_func=lambda t: t.copy_(values), **kwargs)


def first_batch(dgl, graph, seeds, fanouts, device="cpu"):
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    loader = dgl.dataloading.DataLoader(graph, seeds, sampler, batch_size=len(seeds), device=device)
    return next(iter(loader))


# ---------------------------------------------------------------------------- to_dgl_graph
def test_to_dgl_graph_carries_edges_features_labels_and_masks(dgl):
    graph, data = small_graph(dgl)
    src, dst = graph.edges()
    assert torch.equal(src, data.src) and torch.equal(dst, data.dst)
    assert graph.num_nodes() == data.num_nodes
    assert torch.equal(graph.ndata["label"], data.labels)
    assert torch.equal(graph.ndata["feat"], data.features)
    for split in ("train", "val", "test"):
        assert torch.equal(torch.nonzero(graph.ndata[f"{split}_mask"]).squeeze(1),
                           getattr(data, f"{split}_idx"))


def test_to_dgl_graph_normalises_rows_and_skips_missing_features(dgl):
    from graphemb.nn import to_dgl_graph

    features = torch.tensor([[1.0, 3.0], [0.0, 0.0], [2.0, 2.0]])
    data = SimpleNamespace(num_nodes=3, src=torch.tensor([0, 1]), dst=torch.tensor([1, 2]),
                           labels=torch.tensor([0, 1, 0]), train_idx=torch.tensor([0]),
                           val_idx=torch.tensor([1]), test_idx=torch.tensor([2]), features=features)
    graph = to_dgl_graph(data)
    expected = torch.tensor([[0.25, 0.75], [0.0, 0.0], [0.5, 0.5]])  # zero row stays zero
    assert torch.equal(graph.ndata["feat"], expected)
    assert "feat" not in to_dgl_graph(SimpleNamespace(**{**vars(data), "features": None})).ndata
    looped = to_dgl_graph(data, add_self_loops=True)
    assert looped.num_edges() == 2 + 3 and looped.has_edges_between([0, 1, 2], [0, 1, 2]).all()


# ---------------------------------------------------------------------------- input rows
@pytest.mark.parametrize("with_features", [True, False])
def test_input_layer_reads_the_rows_of_the_blocks_input_nodes(dgl, device, with_features):
    from graphemb.nn import EmbeddingInput

    graph, data = small_graph(dgl)
    emb = random_embedding(data.num_nodes, 4, "rows", device=device)
    layer = EmbeddingInput(emb, num_features=5 if with_features else 0)
    input_nodes, _, blocks = first_batch(dgl, graph.to(device), data.train_idx[:3].to(device), [3])
    assert torch.equal(blocks[0].srcdata[dgl.NID], input_nodes)

    out = layer(blocks[0])
    expected = emb.weight[input_nodes]  # the oracle: the table's own rows for those nodes
    if with_features:
        expected = torch.cat([expected, data.features.to(device)[input_nodes]], dim=1)
    assert out.shape == (len(input_nodes), layer.out_size) and out.device == input_nodes.device
    assert torch.equal(out, expected)


def test_input_layer_takes_explicit_features_and_explains_missing_ones(dgl):
    from graphemb.nn import EmbeddingInput

    graph, data = small_graph(dgl)
    emb = random_embedding(data.num_nodes, 4, "explicit")
    input_nodes, _, blocks = first_batch(dgl, graph, data.train_idx[:3], [3])
    features = torch.full((len(input_nodes), 2), 7.0)
    out = EmbeddingInput(emb, num_features=2)(blocks[0], features)
    assert torch.equal(out, torch.cat([emb.weight[input_nodes], features], dim=1))

    del blocks[0].srcdata["feat"]
    with pytest.raises(KeyError, match="srcdata\\['feat'\\]"):
        EmbeddingInput(emb, num_features=5)(blocks[0])
    with pytest.raises(ValueError, match="needs an embedding, features"):
        EmbeddingInput(None, num_features=0)
    with pytest.raises(TypeError, match="NodeEmbedding"):
        EmbeddingInput(torch.zeros(3, 4), num_features=0)


# ---------------------------------------------------------------------------- GraphSAGE
@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("num_features", [0, 5])
def test_graphsage_shapes(dgl, num_layers, num_features):
    from graphemb.nn import GraphSAGE

    graph, data = small_graph(dgl)
    emb = random_embedding(data.num_nodes, 4, "shapes")
    model = GraphSAGE(emb, num_features, hidden_size=8, num_classes=3, num_layers=num_layers)
    _, output_nodes, blocks = first_batch(dgl, graph, data.train_idx, [4] * num_layers)
    assert model(blocks).shape == (len(output_nodes), 3)
    assert model(graph).shape == (data.num_nodes, 3)  # whole graph, every layer
    with pytest.raises(ValueError, match=f"{num_layers} layers but got {num_layers + 1} blocks"):
        model([blocks[0]] * (num_layers + 1))


def test_embedding_is_an_attribute_not_a_parameter(dgl):
    from graphemb.nn import GraphSAGE

    emb = random_embedding(10, 4, "attr")
    model = GraphSAGE(emb, num_features=3, hidden_size=8, num_classes=2)
    assert model.embedding is emb
    names = [name for name, _ in model.named_parameters()]
    assert names and all(name.startswith("layers.") for name in names)
    assert sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for layer in model.layers for p in layer.parameters())
    assert all(not key.startswith("input") for key in model.state_dict())


def test_gradients_reach_the_embedding_rows_and_the_dense_layers(dgl):
    """One SGD step (lr 1) on the embedding must subtract exactly the gradient that autograd
    computes for a leaf copy of the input rows, and change no other row."""
    from graphemb.nn import GraphSAGE

    graph, data = small_graph(dgl)
    emb = random_embedding(data.num_nodes, 4, "grads")
    model = GraphSAGE(emb, num_features=5, hidden_size=8, num_classes=3, dropout=0.0)
    input_nodes, output_nodes, blocks = first_batch(dgl, graph, data.train_idx, [3, 3])
    labels = data.labels[output_nodes]
    before = emb.weight.clone()

    # Oracle: the same layers fed a leaf tensor holding the same rows.
    leaf_rows = before[input_nodes].clone().requires_grad_()
    h = torch.cat([leaf_rows, blocks[0].srcdata["feat"]], dim=1)
    h = model.layers[1](blocks[1], torch.relu(model.layers[0](blocks[0], h)))
    torch.nn.functional.cross_entropy(h, labels).backward()
    expected_row_grad = leaf_rows.grad
    model.zero_grad()

    loss = torch.nn.functional.cross_entropy(model(blocks), labels)
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    SparseSGD([emb], lr=1.0).step()

    change = before - emb.weight
    torch.testing.assert_close(change[input_nodes], expected_row_grad, rtol=1e-5, atol=1e-6)
    untouched = torch.ones(data.num_nodes, dtype=torch.bool)
    untouched[input_nodes] = False
    assert torch.equal(change[untouched], torch.zeros_like(change[untouched]))
    assert expected_row_grad.abs().sum() > 0


@pytest.fixture
def one_thread():
    # Small batches: more threads only spin against other processes on a busy machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_embeddings_alone_learn_planted_communities(dgl, one_thread):
    """Featureless: a trained embedding classifies far above chance; a frozen (zero)
    embedding -- the same model with the embedding's learning rate at 0 -- cannot."""
    from graphemb.nn import GraphSAGE, to_dgl_graph

    data = stochastic_block_model(600, num_communities=3, avg_degree=10.0, seed=0)
    graph = to_dgl_graph(data)

    def test_accuracy(emb_lr):
        torch.manual_seed(0)
        dgl.seed(0)
        emb = NodeEmbedding(data.num_nodes, 16, f"sbm-{emb_lr}")
        model = GraphSAGE(emb, num_features=0, hidden_size=32, num_classes=3)
        dense_opt = torch.optim.Adam(model.parameters(), lr=0.01)
        sparse_opt = SparseAdam([emb], lr=emb_lr)
        loader = dgl.dataloading.DataLoader(graph, data.train_idx, dgl.dataloading.NeighborSampler(
            [10, 10]), batch_size=20, shuffle=True)
        for _ in range(10):
            for _, output_nodes, blocks in loader:
                loss = torch.nn.functional.cross_entropy(model(blocks), data.labels[output_nodes])
                dense_opt.zero_grad()
                loss.backward()
                dense_opt.step()
                sparse_opt.step()
        model.eval()
        with torch.no_grad():
            predicted = model(graph).argmax(dim=1)
        return (predicted[data.test_idx] == data.labels[data.test_idx]).float().mean().item()

    chance = 1 / 3
    largest_class = torch.bincount(data.labels[data.test_idx]).max().item() / len(data.test_idx)
    assert test_accuracy(0.01) > chance + 0.4  # about 0.94
    assert test_accuracy(0.0) <= largest_class + 1e-6  # constant input, constant prediction
