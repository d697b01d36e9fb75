"""graphemb.nn (models on PyG layers over graphemb blocks).

Oracles: float64 dense re-derivations of each layer's published formula on the block's own
edges; PyG's own ``SAGEConv`` path; full-graph inference against sampling every neighbour;
autograd on a leaf copy of the input rows. DGL's layers as oracles and the DGL adapters:
``test_nn_dgl.py``; imports and signatures: ``test_nn_api.py``.
"""

from __future__ import annotations

import pytest
import torch
from nn_cases import (
    assert_one_sgd_step_moves_exactly,
    dense_adjacency,
    f64,
    random_embedding,
    sage_reference,
    sbm,
)

from graphemb import NodeEmbedding
from graphemb.datasets import stochastic_block_model
from graphemb.graph import Graph
from graphemb.optim import SparseAdam, SparseSGD
from graphemb.sampling import Block, NeighborSampler

pytest.importorskip("torch_geometric", reason="graphemb.nn needs torch_geometric")

from graphemb.nn import GAT, EmbeddingInput, GraphSAGE, as_blocks, full_block  # noqa: E402

# DGL's DataLoader suggests a CPU-affinity tweak each time: not an error, only noise.
pytestmark = pytest.mark.filterwarnings("ignore:.*CPU affinity")


# ---------------------------------------------------------------------------- helpers
def with_isolated_node(data):
    """The graph of ``data`` plus one node without in-edges: zero-degree destinations."""
    return Graph.from_edges(data.src, data.dst, data.num_nodes + 1)


def sample(graph, seeds, fanouts, seed=0):
    generator = torch.Generator(device=graph.device).manual_seed(seed)
    return NeighborSampler(fanouts).sample_blocks(graph, seeds, generator=generator)


def gat_reference(layer, block: Block, h: torch.Tensor, concat: bool) -> torch.Tensor:
    """Graph attention in float64 on dense matrices, from the layer's weights, with one
    self-loop per destination node (replacing any sampled one)."""
    heads, channels = layer.heads, layer.out_channels
    adjacency = dense_adjacency(block)
    num_dst = block.num_dst_nodes
    diagonal = torch.arange(num_dst)
    adjacency[diagonal, diagonal] = 1.0  # exactly one self-loop: GATConv removes, then adds
    z = (f64(h) @ f64(layer.lin.weight).T).view(-1, heads, channels)  # (S, H, C)
    alpha_src = (z * f64(layer.att_src)).sum(-1)  # (S, H)
    alpha_dst = (z[:num_dst] * f64(layer.att_dst)).sum(-1)  # (D, H)
    scores = torch.nn.functional.leaky_relu(
        alpha_dst[:, None, :] + alpha_src[None, :, :], layer.negative_slope
    )  # (D, S, H)
    # Parallel edges count as separate messages: weight each pair by its edge count.
    weights = torch.exp(scores - scores.amax(dim=1, keepdim=True)) * adjacency[:, :, None]
    attention = weights / weights.sum(dim=1, keepdim=True)
    out = torch.einsum("dsh,shc->dhc", attention, z)
    out = out.reshape(num_dst, heads * channels) if concat else out.mean(dim=1)
    return out + f64(layer.bias)


# ---------------------------------------------------------------------------- blocks
def test_full_block_is_the_whole_graph():
    data = sbm()
    graph = Graph.from_dataset(data)
    block = full_block(graph)
    assert block.num_src_nodes == block.num_dst_nodes == data.num_nodes
    assert torch.equal(block.src_nodes, torch.arange(data.num_nodes))
    edges = sorted(zip(block.edge_index[0].tolist(), block.edge_index[1].tolist(), strict=True))
    assert edges == sorted(zip(data.src.tolist(), data.dst.tolist(), strict=True))
    with pytest.raises(TypeError, match="graphemb Graph"):
        full_block(block)


def test_as_blocks_checks_count_chaining_and_types():
    data = sbm()
    graph = Graph.from_dataset(data)
    _, _, blocks = sample(graph, data.train_idx[:4], [3, 3])
    assert as_blocks(blocks, 2) == blocks
    assert len(as_blocks(graph, 3)) == 3
    with pytest.raises(ValueError, match="2 layers but got 1 blocks"):
        as_blocks(blocks[:1], 2)
    with pytest.raises(ValueError, match="blocks do not chain"):
        as_blocks([blocks[1], blocks[0]], 2)
    with pytest.raises(TypeError, match="list of graphemb Blocks"):
        as_blocks(blocks[0], 1)
    with pytest.raises(TypeError, match=r"blocks\[1\] is a str"):
        as_blocks([blocks[0], "block"], 2)


# ---------------------------------------------------------------------------- input rows
@pytest.mark.parametrize("with_features", [True, False])
def test_input_layer_reads_the_rows_of_the_blocks_source_nodes(device, with_features):
    data = sbm()
    graph = Graph.from_dataset(data, device=device)
    features = torch.rand(data.num_nodes, 5)  # stays on the CPU: only rows move
    emb = random_embedding(data.num_nodes, 4, "rows", device=device)
    layer = EmbeddingInput(emb, num_features=5 if with_features else 0)
    input_nodes, _, blocks = sample(graph, data.train_idx[:3].to(device), [3])
    assert torch.equal(blocks[0].src_nodes, input_nodes)

    out = layer(blocks[0], features if with_features else None)
    expected = emb.weight[input_nodes]  # the oracle: the table's own rows for those nodes
    if with_features:
        expected = torch.cat([expected, features[input_nodes.cpu()].to(device)], dim=1)
    assert out.shape == (len(input_nodes), layer.out_size) and out.device == input_nodes.device
    assert torch.equal(out, expected)


def test_input_layer_refuses_bad_features_and_arguments():
    emb = random_embedding(10, 4, "bad-input")
    block = Block(torch.tensor([3, 1, 2]), 1, torch.tensor([[1, 2], [0, 0]]))
    layer = EmbeddingInput(emb, num_features=2)
    with pytest.raises(ValueError, match="pass the feature table of all nodes"):
        layer(block)
    with pytest.raises(ValueError, match=r"shape \(num_nodes, 2\), got \(10, 3\)"):
        layer(block, torch.ones(10, 3))
    with pytest.raises(ValueError, match="features has 9 rows but the embedding has 10"):
        layer(block, torch.ones(9, 2))
    with pytest.raises(TypeError, match="floating-point"):
        layer(block, torch.ones(10, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="needs an embedding, features"):
        EmbeddingInput(None, num_features=0)
    with pytest.raises(ValueError, match="num_features must be an int >= 0, got -1"):
        EmbeddingInput(emb, num_features=-1)
    with pytest.raises(TypeError, match="NodeEmbedding"):
        EmbeddingInput(torch.zeros(3, 4), num_features=0)
    features_only = EmbeddingInput(None, num_features=2)
    assert torch.equal(features_only(block, torch.eye(4, 2)), torch.eye(4, 2)[[3, 1, 2]])


# ---------------------------------------------------------------------------- GraphSAGE
@pytest.mark.parametrize("aggregator", ["mean", "sum", "max", "pool"])
def test_graphsage_matches_a_float64_reference_on_sampled_blocks(aggregator):
    data = sbm()
    graph = with_isolated_node(data)
    features = torch.rand(graph.num_nodes, 5)
    emb = random_embedding(graph.num_nodes, 4, f"ref-{aggregator}")
    model = GraphSAGE(emb, 5, hidden_size=8, num_classes=3, aggregator_type=aggregator).eval()
    seeds = torch.cat([data.train_idx[:6], torch.tensor([data.num_nodes])])  # + isolated node
    input_nodes, _, blocks = sample(graph, seeds, [4, 3])
    assert int(blocks[-1].in_degrees()[-1]) == 0

    h = torch.cat([emb.weight[input_nodes], features[input_nodes]], dim=1)
    expected = sage_reference(model.layers[0], blocks[0], h, aggregator).relu()
    expected = sage_reference(model.layers[1], blocks[1], expected, aggregator)
    out = model(blocks, features)
    assert out.shape == (len(seeds), 3)
    torch.testing.assert_close(f64(out), expected, rtol=1e-5, atol=1e-5)


def random_block(num_src, num_dst, num_edges, seed):
    """Edges sorted by destination, repeated edges and destinations without in-edges."""
    generator = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, max(num_dst - 3, 1), (num_edges,), generator=generator).sort().values
    src = torch.randint(0, num_src, (num_edges,), generator=generator)
    return Block(torch.arange(num_src), num_dst, torch.stack([src, dst]))


def hub_block(seed):
    """2000 sources, 300 destinations; destination 5 holds 4000 of the 9000 edges and
    source 7 is a quarter of all sources drawn: work far from even per row."""
    generator = torch.Generator().manual_seed(seed)
    dst = torch.cat([torch.full((4000,), 5), torch.randint(0, 297, (5000,), generator=generator)])
    src = torch.randint(0, 2000, (9000,), generator=generator)
    src[torch.rand(9000, generator=generator) < 0.25] = 7
    dst, order = dst.sort(stable=True)
    return Block(torch.arange(2000), 300, torch.stack([src[order], dst]))


@pytest.fixture(params=["compiled", "torch"])
def aggregation_path(request, monkeypatch):
    """The aggregation on graphemb's compiled kernel and on torch's CSR product."""
    from graphemb._compiled import DISABLE_VARIABLE, compiled_module

    if request.param == "compiled" and not hasattr(compiled_module(), "csr_aggregate"):
        pytest.skip("the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)")
    if request.param == "torch":
        monkeypatch.setenv(DISABLE_VARIABLE, "1")
    return request.param


@pytest.mark.parametrize("reduce", ["mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [6, 67])
def test_block_aggregation_and_its_backward_match_float64_and_pygs_own_path(
    reduce, dtype, width, aggregation_path
):
    from torch_geometric.utils import spmm

    from graphemb.nn.aggregation import aggregate_neighbors

    shapes = [(40, 12, 150), (7, 7, 0), (300, 1, 9), None]
    for seed, shape in enumerate(shapes):
        block = random_block(*shape, seed) if shape is not None else hub_block(seed)
        num_src, num_dst = block.num_src_nodes, block.num_dst_nodes
        generator = torch.Generator().manual_seed(seed)
        h = torch.randn(num_src, width, dtype=dtype, generator=generator)
        upstream = torch.randn(num_dst, width, dtype=dtype, generator=generator)
        upstream_dst = torch.randn(num_dst, width, dtype=dtype, generator=generator)

        leaf = h.clone().requires_grad_()
        aggregated, h_dst = aggregate_neighbors(block, leaf, reduce)
        ((aggregated * upstream).sum() + (h_dst * upstream_dst).sum()).backward()

        # float64 dense reference of the forward and of the gradient
        adjacency = dense_adjacency(block)
        if reduce == "mean":
            adjacency = adjacency / adjacency.sum(1, keepdim=True).clamp(min=1)
        expected_grad = adjacency.T @ f64(upstream)
        expected_grad[:num_dst] += f64(upstream_dst)
        # float32 sums of up to 4000 terms: rounding in the order of the entries
        tolerance = {"rtol": 1e-4, "atol": 2e-4} if dtype == torch.float32 else {}
        torch.testing.assert_close(f64(aggregated), adjacency @ f64(h), **tolerance)
        torch.testing.assert_close(f64(h_dst), f64(h[:num_dst]), rtol=0, atol=0)
        torch.testing.assert_close(f64(leaf.grad), expected_grad, **tolerance)

        # PyG's own path on the block's adj_t (what SAGEConv does with a sparse adjacency)
        pyg_leaf = h.clone().requires_grad_()
        pyg_out = spmm(block.adj_t.to(dtype), pyg_leaf, reduce=reduce)
        ((pyg_out * upstream).sum() + (pyg_leaf[:num_dst] * upstream_dst).sum()).backward()
        torch.testing.assert_close(aggregated, pyg_out, **tolerance)
        torch.testing.assert_close(leaf.grad, pyg_leaf.grad, **tolerance)


@pytest.mark.parametrize("root_bias", [False, True], ids=["pyg-root", "root-with-bias"])
def test_graphsage_layer_equals_pygs_sageconv_on_adj_t(root_bias):
    """The model swaps SAGEConv's aggregation step for its own, and sums the root weight's
    product into the output in place: output and gradients of every weight stay those of
    ``SAGEConv((h, h[:D]), adj_t)``, also for a root weight given a bias of its own."""
    block = random_block(50, 20, 200, seed=3)
    emb = random_embedding(50, 5, f"sage-layer-vs-pyg-{root_bias}")
    model = GraphSAGE(emb, 0, 8, 4, num_layers=1, dropout=0.0)
    layer = model.layers[0]
    if root_bias:
        layer.lin_r.bias = torch.nn.Parameter(torch.randn(4))
    h = torch.randn(50, 5)
    ours = model.convolve(layer, block, h)
    ours.square().sum().backward()
    ours_grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    theirs = layer((h, h[:20]), block.adj_t)
    theirs.square().sum().backward()
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    for mine, reference in zip(ours_grads, (p.grad for p in layer.parameters()), strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-6)


def test_graphsage_lstm_aggregator_and_float64_inputs_run():
    data = sbm()
    graph = Graph.from_dataset(data)
    _, _, blocks = sample(graph, data.train_idx[:5], [3, 3])
    lstm = GraphSAGE(None, 5, hidden_size=8, num_classes=3, aggregator_type="lstm")
    assert lstm(blocks, torch.rand(data.num_nodes, 5)).shape == (5, 3)
    # float64 features and layers: the block's float32 adj_t is cast, not mixed in.
    model = GraphSAGE(None, 5, hidden_size=8, num_classes=3).double().eval()
    features = torch.rand(data.num_nodes, 5, dtype=torch.float64)
    out = model(blocks, features)
    h = sage_reference(model.layers[0], blocks[0], features[blocks[0].src_nodes], "mean").relu()
    torch.testing.assert_close(out, sage_reference(model.layers[1], blocks[1], h, "mean"))


@pytest.mark.parametrize("model_class", [GraphSAGE, GAT])
def test_full_graph_inference_equals_sampling_every_neighbour(model_class):
    """model(graph) reads every in-edge of every node: the same logits as blocks sampled
    with fanout -1 (all in-edges) for some seeds, through two independent code paths."""
    data = sbm(80)
    graph = with_isolated_node(data)
    features = torch.rand(graph.num_nodes, 3)
    emb = random_embedding(graph.num_nodes, 4, f"full-{model_class.__name__}")
    model = model_class(emb, 3, hidden_size=8, num_classes=3, num_layers=2).eval()
    seeds = torch.tensor([5, 0, data.num_nodes, 41])
    _, _, blocks = sample(graph, seeds, [-1, -1])
    whole = model(graph, features)
    assert whole.shape == (graph.num_nodes, 3)
    torch.testing.assert_close(model(blocks, features), whole[seeds], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("num_features", [0, 5])
def test_graphsage_shapes_and_block_errors(num_layers, num_features):
    data = sbm()
    graph = Graph.from_dataset(data)
    features = torch.rand(data.num_nodes, 5)[:, :num_features]
    emb = random_embedding(data.num_nodes, 4, "shapes")
    model = GraphSAGE(emb, num_features, hidden_size=8, num_classes=3, num_layers=num_layers)
    _, output_nodes, blocks = sample(graph, data.train_idx, [4] * num_layers)
    assert model(blocks, features).shape == (len(output_nodes), 3)
    assert model(graph, features).shape == (data.num_nodes, 3)  # whole graph, every layer
    with pytest.raises(ValueError, match=f"{num_layers} layers but got {num_layers + 1} blocks"):
        model([blocks[0]] * (num_layers + 1), features)


def test_an_empty_batch_gives_empty_logits_and_no_gradient_rows():
    data = sbm()
    graph = Graph.from_dataset(data)
    emb = random_embedding(data.num_nodes, 4, "empty")
    model = GraphSAGE(emb, 0, hidden_size=8, num_classes=3)
    _, _, blocks = sample(graph, torch.empty(0, dtype=torch.int64), [3, 3])
    logits = model(blocks)
    assert logits.shape == (0, 3)
    before = emb.weight.clone()
    logits.sum().backward()
    SparseSGD([emb], lr=1.0).step()
    assert torch.equal(emb.weight, before)


def test_model_arguments_are_checked():
    emb = random_embedding(10, 4, "args")
    with pytest.raises(ValueError, match="aggregator_type must be one of .*got 'gcn'"):
        GraphSAGE(emb, 0, 8, 3, aggregator_type="gcn")
    for what, kwargs in (
        ("hidden_size", {"hidden_size": 0}),
        ("num_classes", {"num_classes": 2.0}),
        ("num_layers", {"num_layers": True}),
    ):
        arguments = {"hidden_size": 8, "num_classes": 3, "num_layers": 2, **kwargs}
        with pytest.raises(ValueError, match=f"{what} must be a positive int"):
            GraphSAGE(emb, 0, **arguments)
    with pytest.raises(ValueError, match="dropout must be a number in \\[0, 1\\), got 1.5"):
        GraphSAGE(emb, 0, 8, 3, dropout=1.5)
    with pytest.raises(
        ValueError, match="hidden_size \\(10\\) must be a multiple of heads \\(4\\)"
    ):
        GAT(emb, 0, 10, 3, heads=4)
    with pytest.raises(ValueError, match="attention_dropout"):
        GAT(emb, 0, 8, 3, heads=4, attention_dropout=-0.1)


def test_embedding_is_an_attribute_not_a_parameter():
    emb = random_embedding(10, 4, "attr")
    for model in (GraphSAGE(emb, 3, 8, 2), GAT(emb, 3, 8, 2, heads=2)):
        assert model.embedding is emb
        names = [name for name, _ in model.named_parameters()]
        assert names and all(name.startswith("layers.") for name in names)
        assert all(not key.startswith("input") for key in model.state_dict())


# ---------------------------------------------------------------------------- GAT
def test_gat_matches_a_float64_reference_on_sampled_blocks():
    data = sbm()
    graph = with_isolated_node(data)
    emb = random_embedding(graph.num_nodes, 6, "gat-ref")
    model = GAT(emb, 0, hidden_size=8, num_classes=3, heads=2, output_heads=2).eval()
    seeds = torch.cat([data.train_idx[:6], torch.tensor([data.num_nodes])])
    input_nodes, _, blocks = sample(graph, seeds, [4, 3])
    h = torch.nn.functional.elu(
        gat_reference(model.layers[0], blocks[0], emb.weight[input_nodes], True)
    )
    expected = gat_reference(model.layers[1], blocks[1], h, concat=False)
    torch.testing.assert_close(f64(model(blocks)), expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- training
@pytest.mark.parametrize("model_class", [GraphSAGE, GAT])
def test_gradients_reach_the_embedding_rows_and_the_dense_layers(model_class):
    """One SGD step (lr 1) on the embedding must subtract exactly the gradient that autograd
    computes for a leaf copy of the input rows, and change no other row."""
    data = sbm()
    graph = Graph.from_dataset(data)
    features = torch.rand(data.num_nodes, 5)
    emb = random_embedding(data.num_nodes, 4, f"grads-{model_class.__name__}")
    model = model_class(emb, 5, hidden_size=8, num_classes=3, dropout=0.0)
    input_nodes, output_nodes, blocks = sample(graph, data.train_idx, [3, 3])
    labels = data.labels[output_nodes]
    before = emb.weight.clone()

    # Oracle: the same layers fed a leaf tensor holding the same rows.
    leaf_rows = before[input_nodes].clone().requires_grad_()
    h = torch.cat([leaf_rows, features[input_nodes]], dim=1)
    h = model.convolve(model.layers[0], blocks[0], h)
    h = model.convolve(model.layers[1], blocks[1], model.activation(h))
    torch.nn.functional.cross_entropy(h, labels).backward()
    expected_row_grad = leaf_rows.grad
    model.zero_grad()

    torch.nn.functional.cross_entropy(model(blocks, features), labels).backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    assert_one_sgd_step_moves_exactly(emb, before, input_nodes, expected_row_grad)
    assert expected_row_grad.abs().sum() > 0


def test_embeddings_alone_learn_planted_communities(one_thread):
    """Featureless: a trained embedding classifies far above chance; a frozen (zero)
    embedding -- the same model with the embedding's learning rate at 0 -- cannot."""
    data = stochastic_block_model(600, num_communities=3, avg_degree=10.0, seed=0)
    graph = Graph.from_dataset(data)
    sampler = NeighborSampler([10, 10])

    def test_accuracy(emb_lr):
        torch.manual_seed(0)
        generator = torch.Generator().manual_seed(0)
        emb = NodeEmbedding(data.num_nodes, 16, f"sbm-{emb_lr}")
        model = GraphSAGE(emb, num_features=0, hidden_size=32, num_classes=3)
        dense_opt = torch.optim.Adam(model.parameters(), lr=0.01)
        sparse_opt = SparseAdam([emb], lr=emb_lr)
        for _ in range(10):
            order = data.train_idx[torch.randperm(len(data.train_idx), generator=generator)]
            for seeds in order.split(20):
                _, output_nodes, blocks = sampler.sample_blocks(graph, seeds, generator)
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
    assert test_accuracy(0.01) > chance + 0.4  # about 0.9
    assert test_accuracy(0.0) <= largest_class + 1e-6  # constant input, constant prediction


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("model_class", [GraphSAGE, GAT])
def test_models_on_cuda_match_the_cpu_and_train(model_class):
    """Graph, sampling, embedding and layers on the GPU: the same logits as on the CPU for
    the same blocks and weights, and a training step moves the sampled rows."""
    data = sbm(200)
    graph = Graph.from_dataset(data)
    features = torch.rand(data.num_nodes, 5)
    cpu_emb = random_embedding(data.num_nodes, 4, "cuda-cpu")
    gpu_emb = random_embedding(data.num_nodes, 4, "cuda-gpu", device="cuda")
    cpu_model = model_class(cpu_emb, 5, hidden_size=8, num_classes=3).eval()
    gpu_model = model_class(gpu_emb, 5, hidden_size=8, num_classes=3).cuda().eval()
    gpu_model.load_state_dict(cpu_model.state_dict())
    _, _, blocks = sample(graph, data.train_idx, [4, 4])
    gpu_blocks = [block.to("cuda") for block in blocks]
    expected = cpu_model(blocks, features)
    torch.testing.assert_close(gpu_model(gpu_blocks, features.cuda()).cpu(), expected)
    torch.testing.assert_close(
        gpu_model(graph.to("cuda"), features.cuda()).cpu(), cpu_model(graph, features)
    )

    gpu_graph = graph.to("cuda")
    input_nodes, output_nodes, cuda_blocks = sample(gpu_graph, data.train_idx.cuda(), [4, 4])
    assert all(block.device.type == "cuda" for block in cuda_blocks)
    gpu_model.train()
    before = gpu_emb.weight.clone()
    logits = gpu_model(cuda_blocks, features)  # CPU feature table, rows moved to the GPU
    torch.nn.functional.cross_entropy(logits, data.labels.cuda()[output_nodes]).backward()
    SparseAdam([gpu_emb], lr=0.1).step()
    moved = (gpu_emb.weight != before).any(dim=1)
    outside = torch.ones_like(moved)
    outside[input_nodes] = False
    assert not moved[outside].any()  # only the rows the batch looked up
    assert int(moved.sum()) > len(input_nodes) // 2  # (a row whose gradient is 0 stays)
