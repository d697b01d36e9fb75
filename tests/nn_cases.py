"""Cases and oracles the graphemb.nn tests share (tests/unit/test_nn*.py)."""

from __future__ import annotations

import torch

from graphemb import NodeEmbedding
from graphemb.datasets import stochastic_block_model
from graphemb.optim import SparseSGD
from graphemb.sampling import Block

NEEDS_DGL = "needs DGL: run on the dgl stack (.venv/dgl, torch 2.2.1 + DGL 2.1.0)"


def sbm(num_nodes=60, seed=1):
    """A small 3-community graph (average degree 6)."""
    return stochastic_block_model(num_nodes, num_communities=3, avg_degree=6.0, seed=seed)


def random_embedding(num_nodes, dim, name, **kwargs):
    """A NodeEmbedding whose rows are standard normal draws of a fixed seed."""
    values = torch.randn(num_nodes, dim, generator=torch.Generator().manual_seed(7))
    return NodeEmbedding(num_nodes, dim, name, init_func=lambda t: t.copy_(values), **kwargs)


def assert_one_sgd_step_moves_exactly(emb, before, input_nodes, expected_row_grad):
    """One SparseSGD step (lr 1) moves the rows of ``input_nodes`` by their expected gradient
    and leaves every other row bit-identical."""
    SparseSGD([emb], lr=1.0).step()
    change = before - emb.weight
    torch.testing.assert_close(change[input_nodes], expected_row_grad, rtol=1e-5, atol=1e-6)
    untouched = torch.ones(emb.num_embeddings, dtype=torch.bool)
    untouched[input_nodes] = False
    assert torch.equal(change[untouched], torch.zeros_like(change[untouched]))


def dense_adjacency(block: Block) -> torch.Tensor:
    """(D, S) float64 edge counts of ``block``."""
    adjacency = torch.zeros(block.num_dst_nodes, block.num_src_nodes, dtype=torch.float64)
    src, dst = block.edge_index.cpu()
    adjacency.index_put_((dst, src), torch.ones(src.numel(), dtype=torch.float64), accumulate=True)
    return adjacency


def f64(tensor):
    return tensor.detach().cpu().to(torch.float64)


def sage_reference(layer, block: Block, h: torch.Tensor, aggregator: str) -> torch.Tensor:
    """GraphSAGE's formula in float64 on dense matrices, from the layer's weights:
    ``W_l . aggregate(h_src over in-edges) + b + W_r . h_dst``."""
    h = f64(h)
    adjacency = dense_adjacency(block)
    if aggregator == "pool":  # max-pooling aggregator: relu(W_p h + b_p) before the maximum
        h_src = torch.relu(h @ f64(layer.lin.weight).T + f64(layer.lin.bias))
    else:
        h_src = h
    if aggregator == "mean":
        aggregated = adjacency @ h_src / adjacency.sum(1, keepdim=True).clamp(min=1)
    elif aggregator == "sum":
        aggregated = adjacency @ h_src
    else:  # max / pool; no in-edge: 0
        masked = torch.where(adjacency[:, :, None] > 0, h_src[None], -torch.inf)
        aggregated = masked.amax(dim=1)
        aggregated = torch.where(torch.isinf(aggregated), 0.0, aggregated)
    out = aggregated @ f64(layer.lin_l.weight).T + f64(layer.lin_l.bias)
    return out + h[: block.num_dst_nodes] @ f64(layer.lin_r.weight).T
