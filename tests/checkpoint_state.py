"""A small trained embedding and optimizer, and their state, for the single-process
checkpoint tests (``tests/multiprocess/test_checkpoint*.py``)."""

from __future__ import annotations

import torch

from graphemb import NodeEmbedding
from graphemb.optim import SparseAdam


def small_training(name="victim", optimizer=SparseAdam):
    emb = NodeEmbedding(50, 4, name, init_func=lambda t: t.copy_(torch.arange(200.0).view(50, 4)))
    opt = optimizer([emb], lr=0.1)
    for step in range(3):
        ids = torch.tensor([step, 7, 7, 49])
        emb(ids).pow(2).sum().backward()
        opt.step()
    return emb, opt


def state_of(emb, opt):
    return {
        "weight": emb.weight.clone(),
        **{k: v.clone() for k, v in opt.state[emb].items()},
        "groups": [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups],
    }


def assert_unchanged(before, emb, opt):
    after = state_of(emb, opt)
    assert before.keys() == after.keys()
    for key in before:
        if key == "groups":
            assert before[key] == after[key]
        else:
            assert torch.equal(before[key], after[key]), key
