"""graphemb.nn against DGL's own layers, and graphemb.dgl (the DGL adapters), on the dgl
stack: DGL's ``SAGEConv`` / ``GATConv`` on DGL's block for the same sampled edges, with the
weights copied over; the adapters' graphs, input layers and gradients against DGL's own
objects and autograd."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from nn_cases import NEEDS_DGL, assert_one_sgd_step_moves_exactly, random_embedding, sbm

from graphemb.datasets import stochastic_block_model
from graphemb.graph import Graph
from graphemb.sampling import Block

pytest.importorskip("torch_geometric", reason="graphemb.nn needs torch_geometric")

from graphemb.nn import GAT, GraphSAGE  # noqa: E402

# DGL's DataLoader suggests a CPU-affinity tweak each time: not an error, only noise.
pytestmark = pytest.mark.filterwarnings("ignore:.*CPU affinity")


# ---------------------------------------------------------------------------- DGL oracles
@pytest.fixture
def dgl():
    return pytest.importorskip("dgl", reason=NEEDS_DGL)


def dgl_batch(dgl, data, seeds, fanouts):
    """A DGL-sampled batch, and the same edges as graphemb Blocks."""
    dgl_graph = dgl.graph((data.src, data.dst), num_nodes=data.num_nodes, idtype=torch.int64)
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    dgl.seed(0)
    input_nodes, output_nodes, dgl_blocks = sampler.sample_blocks(dgl_graph, seeds)
    blocks = []
    for dgl_block in dgl_blocks:
        src, dst = dgl_block.edges(order="eid")
        order = torch.sort(dst, stable=True).indices  # a Block's edges are sorted by dst
        edge_index = torch.stack([src[order], dst[order]])
        blocks.append(Block(dgl_block.srcdata[dgl.NID], dgl_block.num_dst_nodes(), edge_index))
    return input_nodes, output_nodes, dgl_blocks, blocks


@pytest.mark.dgl
@pytest.mark.parametrize("aggregator", ["mean", "pool"])
def test_graphsage_matches_dgl_sageconv_with_copied_weights(dgl, aggregator):
    from graphemb.dgl import GraphSAGE as DGLGraphSAGE

    data = sbm(80)
    features = torch.rand(data.num_nodes, 5)
    emb = random_embedding(data.num_nodes, 4, f"dgl-sage-{aggregator}")
    ours = GraphSAGE(emb, 5, hidden_size=8, num_classes=3, aggregator_type=aggregator).eval()
    theirs = DGLGraphSAGE(emb, 5, hidden_size=8, num_classes=3, aggregator_type=aggregator)
    theirs.eval()
    with torch.no_grad():
        for mine, dgl_layer in zip(ours.layers, theirs.layers, strict=True):
            dgl_layer.fc_neigh.weight.copy_(mine.lin_l.weight)
            dgl_layer.fc_self.weight.copy_(mine.lin_r.weight)
            dgl_layer.fc_self.bias.copy_(mine.lin_l.bias)  # DGL keeps the one bias there
            if aggregator == "pool":
                dgl_layer.fc_pool.weight.copy_(mine.lin.weight)
                dgl_layer.fc_pool.bias.copy_(mine.lin.bias)
    input_nodes, output_nodes, dgl_blocks, blocks = dgl_batch(
        dgl, data, data.train_idx[:10], [4, 3]
    )
    assert torch.equal(blocks[-1].dst_nodes, output_nodes)
    expected = theirs(dgl_blocks, features[input_nodes])
    torch.testing.assert_close(ours(blocks, features), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.dgl
def test_gat_matches_dgl_gatconv_with_copied_weights(dgl):
    from dgl.nn import GATConv

    data = sbm(80)
    emb = random_embedding(data.num_nodes, 6, "dgl-gat")
    model = GAT(emb, 0, hidden_size=8, num_classes=3, heads=2).eval()
    input_nodes, output_nodes, dgl_blocks, blocks = dgl_batch(
        dgl, data, data.train_idx[:10], [4, 3]
    )
    h = emb.weight[input_nodes]
    for index, (mine, dgl_block) in enumerate(zip(model.layers, dgl_blocks, strict=True)):
        layer = GATConv(mine.in_channels, mine.out_channels, mine.heads)
        with torch.no_grad():
            layer.fc.weight.copy_(mine.lin.weight)
            layer.attn_l.copy_(mine.att_src)
            layer.attn_r.copy_(mine.att_dst)
            layer.bias.copy_(mine.bias.repeat(mine.heads) if not mine.concat else mine.bias)
        # DGL adds no self-loops itself: give every destination node one.
        num_dst = dgl_block.num_dst_nodes()
        src, dst = dgl_block.edges()
        loops = torch.arange(num_dst)
        looped = dgl.create_block(
            (torch.cat([src, loops]), torch.cat([dst, loops])),
            num_src_nodes=dgl_block.num_src_nodes(),
            num_dst_nodes=num_dst,
        )
        h = layer(looped, (h, h[:num_dst]))
        h = h.flatten(1) if mine.concat else h.mean(1)
        if index == 0:
            h = torch.nn.functional.elu(h)
    torch.testing.assert_close(model(blocks), h, rtol=1e-5, atol=1e-5)


@pytest.mark.dgl
def test_graph_from_dgl_matches_the_dgl_graph(dgl):
    from graphemb.dgl import to_dgl_graph

    data = sbm()
    dgl_graph = to_dgl_graph(data)
    graph = Graph.from_dgl(dgl_graph)
    assert graph.num_nodes == dgl_graph.num_nodes()
    assert torch.equal(graph.in_degrees(), dgl_graph.in_degrees())
    src, dst = graph.edges()
    dgl_src, dgl_dst = dgl_graph.edges()
    assert sorted(zip(src.tolist(), dst.tolist(), strict=True)) == sorted(
        zip(dgl_src.tolist(), dgl_dst.tolist(), strict=True)
    )


# ---------------------------------------------------------------------------- graphemb.dgl
def small_dgl_graph(dgl, num_nodes=40, num_features=5):
    from graphemb.dgl import to_dgl_graph

    data = stochastic_block_model(num_nodes, num_communities=3, avg_degree=6.0, seed=1)
    features = torch.rand(num_nodes, num_features)
    fields = (
        "num_nodes",
        "num_classes",
        "labels",
        "src",
        "dst",
        "train_idx",
        "val_idx",
        "test_idx",
    )
    data = SimpleNamespace(**{k: getattr(data, k) for k in fields}, features=features)
    return to_dgl_graph(data, normalize_features=False), data


def first_dgl_batch(dgl, graph, seeds, fanouts, device="cpu"):
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    loader = dgl.dataloading.DataLoader(graph, seeds, sampler, batch_size=len(seeds), device=device)
    return next(iter(loader))


@pytest.mark.dgl
def test_to_dgl_graph_carries_edges_features_labels_and_masks(dgl):
    graph, data = small_dgl_graph(dgl)
    src, dst = graph.edges()
    assert torch.equal(src, data.src) and torch.equal(dst, data.dst)
    assert graph.num_nodes() == data.num_nodes
    assert torch.equal(graph.ndata["label"], data.labels)
    assert torch.equal(graph.ndata["feat"], data.features)
    for split in ("train", "val", "test"):
        assert torch.equal(
            torch.nonzero(graph.ndata[f"{split}_mask"]).squeeze(1),
            getattr(data, f"{split}_idx"),
        )


@pytest.mark.dgl
def test_to_dgl_graph_normalises_rows_and_skips_missing_features(dgl):
    from graphemb.dgl import to_dgl_graph

    features = torch.tensor([[1.0, 3.0], [0.0, 0.0], [2.0, 2.0]])
    data = SimpleNamespace(
        num_nodes=3, src=torch.tensor([0, 1]), dst=torch.tensor([1, 2]),
        labels=torch.tensor([0, 1, 0]), train_idx=torch.tensor([0]),
        val_idx=torch.tensor([1]), test_idx=torch.tensor([2]), features=features,
    )  # fmt: skip
    graph = to_dgl_graph(data)
    expected = torch.tensor([[0.25, 0.75], [0.0, 0.0], [0.5, 0.5]])  # zero row stays zero
    assert torch.equal(graph.ndata["feat"], expected)
    assert "feat" not in to_dgl_graph(SimpleNamespace(**{**vars(data), "features": None})).ndata
    looped = to_dgl_graph(data, add_self_loops=True)
    assert looped.num_edges() == 2 + 3 and looped.has_edges_between([0, 1, 2], [0, 1, 2]).all()


@pytest.mark.dgl
@pytest.mark.parametrize("with_features", [True, False])
def test_dgl_input_layer_reads_the_rows_of_the_blocks_input_nodes(dgl, device, with_features):
    from graphemb.dgl import EmbeddingInput as DGLEmbeddingInput

    graph, data = small_dgl_graph(dgl)
    emb = random_embedding(data.num_nodes, 4, "dgl-rows", device=device)
    layer = DGLEmbeddingInput(emb, num_features=5 if with_features else 0)
    seeds = data.train_idx[:3].to(device)
    input_nodes, _, blocks = first_dgl_batch(dgl, graph.to(device), seeds, [3])
    assert torch.equal(blocks[0].srcdata[dgl.NID], input_nodes)

    out = layer(blocks[0])
    expected = emb.weight[input_nodes]  # the oracle: the table's own rows for those nodes
    if with_features:
        expected = torch.cat([expected, data.features.to(device)[input_nodes]], dim=1)
    assert out.shape == (len(input_nodes), layer.out_size) and out.device == input_nodes.device
    assert torch.equal(out, expected)


@pytest.mark.dgl
def test_dgl_input_layer_takes_explicit_features_and_explains_missing_ones(dgl):
    from graphemb.dgl import EmbeddingInput as DGLEmbeddingInput

    graph, data = small_dgl_graph(dgl)
    emb = random_embedding(data.num_nodes, 4, "dgl-explicit")
    input_nodes, _, blocks = first_dgl_batch(dgl, graph, data.train_idx[:3], [3])
    features = torch.full((len(input_nodes), 2), 7.0)
    out = DGLEmbeddingInput(emb, num_features=2)(blocks[0], features)
    assert torch.equal(out, torch.cat([emb.weight[input_nodes], features], dim=1))

    del blocks[0].srcdata["feat"]
    with pytest.raises(KeyError, match="srcdata\\['feat'\\]"):
        DGLEmbeddingInput(emb, num_features=5)(blocks[0])
    with pytest.raises(ValueError, match="needs an embedding, features"):
        DGLEmbeddingInput(None, num_features=0)
    with pytest.raises(TypeError, match="NodeEmbedding"):
        DGLEmbeddingInput(torch.zeros(3, 4), num_features=0)


@pytest.mark.dgl
@pytest.mark.parametrize("num_layers", [1, 3])
@pytest.mark.parametrize("num_features", [0, 5])
def test_dgl_graphsage_shapes(dgl, num_layers, num_features):
    from graphemb.dgl import GraphSAGE as DGLGraphSAGE

    graph, data = small_dgl_graph(dgl)
    emb = random_embedding(data.num_nodes, 4, "dgl-shapes")
    model = DGLGraphSAGE(emb, num_features, hidden_size=8, num_classes=3, num_layers=num_layers)
    _, output_nodes, blocks = first_dgl_batch(dgl, graph, data.train_idx, [4] * num_layers)
    assert model(blocks).shape == (len(output_nodes), 3)
    assert model(graph).shape == (data.num_nodes, 3)  # whole graph, every layer
    with pytest.raises(ValueError, match=f"{num_layers} layers but got {num_layers + 1} blocks"):
        model([blocks[0]] * (num_layers + 1))


@pytest.mark.dgl
def test_dgl_graphsage_gradients_reach_the_embedding_rows(dgl):
    from graphemb.dgl import GraphSAGE as DGLGraphSAGE

    graph, data = small_dgl_graph(dgl)
    emb = random_embedding(data.num_nodes, 4, "dgl-grads")
    model = DGLGraphSAGE(emb, num_features=5, hidden_size=8, num_classes=3, dropout=0.0)
    input_nodes, output_nodes, blocks = first_dgl_batch(dgl, graph, data.train_idx, [3, 3])
    labels = data.labels[output_nodes]
    before = emb.weight.clone()

    leaf_rows = before[input_nodes].clone().requires_grad_()
    h = torch.cat([leaf_rows, blocks[0].srcdata["feat"]], dim=1)
    h = model.layers[1](blocks[1], torch.relu(model.layers[0](blocks[0], h)))
    torch.nn.functional.cross_entropy(h, labels).backward()
    expected_row_grad = leaf_rows.grad
    model.zero_grad()

    torch.nn.functional.cross_entropy(model(blocks), labels).backward()
    assert_one_sgd_step_moves_exactly(emb, before, input_nodes, expected_row_grad)
