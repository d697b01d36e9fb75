"""GraphSAGE's first layer reading the embedding's rows from the table in place
(``NodeEmbedding.read_in_place``, ``aggregate_embedding_rows``) instead of looking them up.

Oracles: GraphSAGE's formula in float64 on dense matrices; the same layers fed a leaf copy
of the rows, with the dropout's key drawn from the same generator state (its output and its
gradient exactly); one SGD step moving exactly the rows read. The lookup path is asserted
taken where the rows cannot be read in place, and the in-place one where they can.
"""

from __future__ import annotations

import pytest
import torch
from nn_cases import assert_one_sgd_step_moves_exactly, f64, random_embedding, sage_reference, sbm

from graphemb._compiled import compiled_module, disabled
from graphemb.graph import Graph
from graphemb.sampling import NeighborSampler

pytest.importorskip("torch_geometric", reason="graphemb.nn needs torch_geometric")

import graphemb.nn.sage as sage_module  # noqa: E402
from graphemb.nn import GraphSAGE  # noqa: E402

pytestmark = pytest.mark.skipif(
    compiled_module() is None or disabled(), reason="reading in place needs the compiled kernels"
)


@pytest.fixture
def in_place_reads(monkeypatch):
    """The results of the model's in-place reads: a tensor each where the rows were read in
    place, None where the model looked them up."""
    results: list[torch.Tensor | None] = []
    original = sage_module.aggregate_embedding_rows

    def spy(*args, **kwargs):
        results.append(original(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(sage_module, "aggregate_embedding_rows", spy)
    return results


def batch(fanouts=(4, 3), seed=0):
    data = sbm(num_nodes=90)
    graph = Graph.from_dataset(data)
    generator = torch.Generator().manual_seed(seed)
    input_nodes, output_nodes, blocks = NeighborSampler(list(fanouts)).sample_blocks(
        graph, data.train_idx, generator=generator
    )
    return data, input_nodes, output_nodes, blocks


@pytest.mark.parametrize("aggregator", ["mean", "sum"])
def test_embedding_rows_alone_match_a_float64_reference(aggregator, in_place_reads):
    data, input_nodes, _, blocks = batch()
    emb = random_embedding(data.num_nodes, 6, f"in-place-ref-{aggregator}")
    model = GraphSAGE(emb, 0, hidden_size=8, num_classes=3, aggregator_type=aggregator).eval()
    expected = sage_reference(model.layers[0], blocks[0], emb.weight[input_nodes], aggregator)
    expected = sage_reference(model.layers[1], blocks[1], expected.relu(), aggregator)
    out = model(blocks)
    torch.testing.assert_close(f64(out), expected, rtol=1e-5, atol=1e-5)
    assert len(in_place_reads) == 1 and in_place_reads[0] is not None


@pytest.mark.parametrize("aggregator", ["mean", "sum"])
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_in_place_reads_give_the_floats_and_row_gradients_of_a_leaf_copy(
    aggregator, dropout, in_place_reads
):
    """With the hashed dropout on the rows, forward and the recorded gradient are exactly
    those of the layers on a leaf copy of the rows (the key drawn from the same state)."""
    data, input_nodes, output_nodes, blocks = batch(fanouts=(5, 4, 3))
    emb = random_embedding(data.num_nodes, 5, f"in-place-grad-{aggregator}-{dropout}")
    model = GraphSAGE(emb, 0, 8, 3, num_layers=3, aggregator_type=aggregator, dropout=dropout)
    labels = data.labels[output_nodes]
    before = emb.weight.clone()

    leaf = before[input_nodes].clone().requires_grad_()
    torch.manual_seed(11)
    h = model.convolve_dropped(model.layers[0], blocks[0], leaf, model.input_dropout)
    for layer, block in zip(model.layers[1:], blocks[1:], strict=True):
        h = model.convolve_dropped(layer, block, h, model.dropout, activate=True)
    torch.nn.functional.cross_entropy(h, labels).backward()
    model.zero_grad()

    torch.manual_seed(11)
    out = model(blocks)
    assert torch.equal(out, h)
    torch.nn.functional.cross_entropy(out, labels).backward()
    assert in_place_reads[-1] is not None
    recorded = emb.take_gradients()
    assert torch.equal(recorded.ids, input_nodes) and torch.equal(recorded.grads, leaf.grad)
    assert leaf.grad.abs().sum() > 0

    torch.manual_seed(11)
    torch.nn.functional.cross_entropy(model(blocks), labels).backward()
    assert_one_sgd_step_moves_exactly(emb, before, input_nodes, leaf.grad)


def test_a_pending_prefetch_or_features_take_the_lookup(in_place_reads):
    data, input_nodes, _, blocks = batch()
    emb = random_embedding(data.num_nodes, 4, "in-place-fallback")
    model = GraphSAGE(emb, 0, 8, 3).eval()
    read_in_place = model(blocks)
    emb.prefetch(input_nodes)
    assert torch.equal(model(blocks), read_in_place)  # the lookup took the prefetch
    assert in_place_reads[0] is not None and in_place_reads[1] is None

    with_features = GraphSAGE(emb, 2, 8, 3).eval()
    with_features(blocks, torch.ones(data.num_nodes, 2))
    assert len(in_place_reads) == 2  # features: the input layer concatenates a lookup


def test_read_in_place_checks_ids_as_a_lookup_and_records_nothing_without_grad():
    emb = random_embedding(10, 3, "in-place-ids")

    def read(weight, ids):
        return weight[ids].sum(1)

    def gradient(grad):
        return grad[:, None].expand(-1, 3)

    with pytest.raises(IndexError, match="10"):
        emb.read_in_place(torch.tensor([1, 10]), read, gradient)
    with pytest.raises(TypeError):
        emb.read_in_place(torch.tensor([1.0]), read, gradient)
    assert emb.read_in_place(torch.tensor([[1, 2]]), read, gradient) is None
    with torch.no_grad():
        out = emb.read_in_place(torch.tensor([1, 2]), read, gradient)
    assert torch.equal(out, emb.weight[[1, 2]].sum(1))
    assert emb.take_gradients().ids.numel() == 0

    emb.read_in_place(torch.tensor([4, 4, 0]), read, gradient).sum().backward()
    recorded = emb.take_gradients()
    assert torch.equal(recorded.ids, torch.tensor([4, 4, 0]))
    assert torch.equal(recorded.grads, torch.ones(3, 3))
