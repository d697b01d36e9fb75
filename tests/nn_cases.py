"""Cases the graphemb.nn tests share (tests/unit/test_nn.py, test_nn_dgl.py)."""

from __future__ import annotations

import torch

from graphemb import NodeEmbedding
from graphemb.datasets import stochastic_block_model
from graphemb.optim import SparseSGD

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
