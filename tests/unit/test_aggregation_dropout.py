"""Dropout inside the aggregation (``csrc/nn/aggregate.cpp`` with a mask): the kernels drop
the rows they read (forward) and the gradient rows they write (backward), and GraphSAGE
uses them for the dropout before each layer. Oracles: the dropout kernel followed by the
aggregation without a mask (itself held to its Python hash and to float64 elsewhere), a
float64 dense transpose, and the same model run as dropout-then-layer from the same seed."""

from __future__ import annotations

import pytest
import torch
from nn_cases import random_embedding, sbm

from graphemb._compiled import compiled_module, disabled
from graphemb.graph import Graph
from graphemb.sampling import Block, NeighborSampler

pytest.importorskip("torch_geometric", reason="graphemb.nn needs torch_geometric")

from graphemb.nn import GraphSAGE  # noqa: E402
from graphemb.nn.aggregation import (  # noqa: E402
    aggregate_embedding_rows,
    aggregate_neighbors,
    aggregate_with_own_rows,
)

pytestmark = pytest.mark.skipif(
    compiled_module() is None or disabled(), reason="the compiled kernels are disabled here"
)


def _block(num_src: int, num_dst: int, num_edges: int, seed: int) -> Block:
    generator = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, num_dst - 2, (num_edges,), generator=generator).sort().values
    src = torch.randint(0, num_src, (num_edges,), generator=generator)
    return Block(torch.arange(num_src), num_dst, torch.stack([src, dst]))


def _dense(block: Block, reduce: str) -> torch.Tensor:
    """The (D, S) float64 aggregation matrix of ``block``."""
    matrix = torch.zeros(block.num_dst_nodes, block.num_src_nodes, dtype=torch.float64)
    src, dst = block.edge_index
    matrix.index_put_((dst, src), torch.ones(block.num_edges, dtype=torch.float64), True)
    return matrix / matrix.sum(1, keepdim=True).clamp(min=1) if reduce == "mean" else matrix


@pytest.mark.parametrize("p", [0.5, 0.3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_masked_kernels_give_the_floats_of_dropout_then_the_aggregation(p, dtype, threads):
    from graphemb.nn.dropout import _draw_mask

    kernels = compiled_module()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        # rows of 13, 64, 130 and 70 features (the vector loops' bodies and tails), rows
        # read many times, and fewer entries than rows (3,000 rows, 500 entries)
        shapes = [(300, 40, 900, 13), (2_000, 300, 9_000, 64), (300, 40, 900, 130),
                  (3_000, 40, 500, 70)]  # fmt: skip
        for seed, (S, D, E, F) in enumerate(shapes):
            block = _block(S, D, E, seed)
            crow, col = block.adj_t.crow_indices(), block.adj_t.col_indices()
            generator = torch.Generator().manual_seed(seed)
            h = torch.randn(S, F, dtype=dtype, generator=generator)
            grad = torch.randn(D, F, dtype=dtype, generator=generator)
            addend = torch.randn(D, F, dtype=dtype, generator=generator)
            mask = _draw_mask(p, torch.Generator().manual_seed(10 + seed))
            dropped = kernels.dropout_masked_scale(h, *mask)
            assert (dropped == 0).any() and (dropped != 0).any()
            for mean in (False, True):
                fused = kernels.csr_aggregate(crow, col, None, h, mean, mask)
                assert torch.equal(fused, kernels.csr_aggregate(crow, col, None, dropped, mean))
                backward = kernels.csr_aggregate_transposed(crow, col, grad, mean, S, addend, mask)
                plain = kernels.csr_aggregate_transposed(crow, col, grad, mean, S, addend)
                assert torch.equal(backward, kernels.dropout_masked_scale(plain, *mask))
                # and against float64: the dropout's zeros where its factor is 0
                factor = (dropped.double() / h.double()).nan_to_num()
                expected = _dense(block, "mean" if mean else "sum").T @ grad.double()
                expected[:D] += addend.double()
                tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
                torch.testing.assert_close(backward.double(), expected * factor, **tolerance)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("used", ["both", "aggregated", "h_dst", "neither"])
@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_aggregation_with_a_mask_is_dropout_then_aggregation(used, reduce):
    """Outputs and the gradient of h, whichever outputs reach the loss, equal to the
    dropout module followed by the aggregation (same key), and to float64."""
    from graphemb.nn.dropout import _draw_mask, dropout

    block = _block(500, 60, 2_000, seed=3)
    generator = torch.Generator().manual_seed(4)
    h = torch.randn(500, 9, generator=generator)
    upstream = torch.randn(60, 9, generator=generator), torch.randn(60, 9, generator=generator)
    results = []
    for fused in (True, False):
        leaf = h.clone().requires_grad_()
        if fused:
            mask = _draw_mask(0.5, torch.Generator().manual_seed(5))
            aggregated, h_dst = aggregate_neighbors(block, leaf, reduce, mask)
        else:  # the same key, drawn by the dropout itself
            dropped = dropout(leaf, 0.5, generator=torch.Generator().manual_seed(5))
            aggregated, h_dst = aggregate_neighbors(block, dropped, reduce)
        terms = {
            "aggregated": (aggregated * upstream[0]).sum(),
            "h_dst": (h_dst * upstream[1]).sum(),
        }
        loss = sum(terms.values()) if used == "both" else terms.get(used, aggregated.sum() * 0)
        loss.backward()
        results.append((aggregated.detach(), h_dst.detach(), leaf.grad))
    for fused, plain in zip(*results, strict=True):
        assert torch.equal(fused, plain)
    factor = (results[1][1] / h[:60]).nan_to_num()  # h_dst = h[:60] * factor
    assert torch.equal(results[0][1], h[:60] * factor)


@pytest.mark.parametrize("input_dropout", [0.5, 0.2])
def test_graphsage_training_step_equals_dropout_then_each_layer(input_dropout, monkeypatch):
    """A training-mode forward and backward of GraphSAGE (its dropouts inside the
    aggregations) against the same model stepped by hand: dropout, then the layer, from
    the same seed. Logits and every gradient (layers and embedding rows) are equal."""
    data = sbm()
    graph = Graph.from_dataset(data)
    emb = random_embedding(graph.num_nodes, 6, "fused-dropout")
    model = GraphSAGE(emb, 0, 16, 3, num_layers=2, dropout=0.5, input_dropout=input_dropout)
    generator = torch.Generator().manual_seed(0)
    _, _, blocks = NeighborSampler([5, 4]).sample_blocks(
        graph, data.train_idx[:20], generator=generator
    )
    import graphemb.nn.sage as sage

    masks, relus, in_place = [], [], []

    def spy(block, h, reduce="mean", mask=None, relu=False):
        masks.append(mask)
        relus.append(relu)
        return aggregate_with_own_rows(block, h, reduce, mask, relu)

    def spy_table_reads(block, embedding, reduce, dropout):
        pair = aggregate_embedding_rows(block, embedding, reduce, dropout)
        in_place.append(pair is not None)
        return pair

    monkeypatch.setattr(sage, "aggregate_with_own_rows", spy)
    monkeypatch.setattr(sage, "aggregate_embedding_rows", spy_table_reads)
    runs = []
    for fused in (True, False):
        torch.manual_seed(11)  # the dropouts' keys
        if fused:
            logits = model(blocks)
            assert in_place == [True]  # the first layer: the table's rows, dropped as read
            assert len(masks) == 1 and masks[0] is not None  # the second: fused
            assert relus == [True]  # the hidden layer's ReLU read by the second
        else:
            h = model.input(blocks[0], None)
            for index, (layer, block) in enumerate(zip(model.layers, blocks, strict=True)):
                if index:
                    h = model.activation(h)
                drop = model.dropout if index else model.input_dropout
                h = model.convolve(layer, block, drop(h))
            logits = h
        model.zero_grad()
        emb.clear_gradients()
        logits.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        rows = emb.take_gradients()
        runs.append((logits.detach(), [*grads, rows.ids, rows.grads]))
    assert torch.equal(runs[0][0], runs[1][0])
    assert bool((runs[0][1][-1] == 0).any())  # the input dropout zeroed some gradient entries
    for mine, reference in zip(runs[0][1], runs[1][1], strict=True):
        assert torch.equal(mine, reference)
