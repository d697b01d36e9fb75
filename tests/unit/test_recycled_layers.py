"""GraphSAGE's layers write their large results into recycled memory (aggregates, products,
input gradients). Two batches' autograd graphs alive at once must give each batch's logits
and gradients as that batch gives them alone: a block still held by one graph is never
handed to the other. The batches are large enough that every layer-1 result is recycled
(over 4 MiB)."""

from __future__ import annotations

import pytest
import torch
from nn_cases import random_embedding

from graphemb._compiled import compiled_module, disabled
from graphemb.graph import Graph
from graphemb.sampling import NeighborSampler

pytest.importorskip("torch_geometric", reason="graphemb.nn needs torch_geometric")

from graphemb.nn import GraphSAGE  # noqa: E402

pytestmark = pytest.mark.skipif(
    compiled_module() is None or disabled(), reason="the compiled kernels are disabled here"
)

NODES, DIM, HIDDEN, CLASSES = 40_000, 64, 128, 5


def _batches(graph: Graph) -> list:
    generator = torch.Generator().manual_seed(0)
    seeds = torch.randperm(NODES, generator=generator)
    sampler = NeighborSampler([6, 6])
    return [sampler.sample_blocks(graph, seeds[i * 2500 : (i + 1) * 2500], generator)[2]
            for i in range(2)]  # fmt: skip


def _loss(model: GraphSAGE, blocks: list, labels: torch.Tensor, key: int):
    torch.manual_seed(key)  # the dropouts' keys
    logits = model(blocks)
    return logits, torch.nn.functional.cross_entropy(logits, labels[blocks[-1].dst_nodes])


def test_two_batches_in_flight_give_what_each_gives_alone():
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(0, NODES, (NODES * 8,), generator=generator)
    dst = torch.randint(0, NODES, (NODES * 8,), generator=generator)
    graph = Graph.from_edges(src, dst, NODES)
    labels = torch.randint(0, CLASSES, (NODES,), generator=generator)
    batches = _batches(graph)
    assert batches[0][0].num_dst_nodes * 2 * DIM * 4 > 4 << 20  # recycled, not fresh

    emb = random_embedding(NODES, DIM, "recycled-layers")
    model = GraphSAGE(emb, 0, HIDDEN, CLASSES, num_layers=2, dropout=0.5)
    alone = []
    for key, blocks in enumerate(batches):
        logits, loss = _loss(model, blocks, labels, key)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        alone.append((logits.detach().clone(), grads))
        model.zero_grad(set_to_none=True)
        emb.weight.grad = None

    in_flight = [_loss(model, blocks, labels, key) for key, blocks in enumerate(batches)]
    for (logits, _), (expected, _) in zip(in_flight, alone, strict=True):
        assert torch.equal(logits, expected)
    for _, loss in reversed(in_flight):  # the later graph first: its blocks are the newest
        loss.backward()
    for param, first, second in zip(model.parameters(), alone[0][1], alone[1][1], strict=True):
        torch.testing.assert_close(param.grad, first + second, rtol=1e-5, atol=1e-6)
