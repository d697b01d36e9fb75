"""Sizes given as numpy integers or 0-d integer tensors are accepted wherever a size is taken
(``graphemb._checks.as_size``), and anything else is refused with a message naming it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import graphemb
from graphemb import NodeEmbedding
from graphemb._checks import as_size, is_integer_like
from graphemb.datasets import stochastic_block_model
from graphemb.optim import SparseSGD

INTEGER_LIKE = [
    7,
    np.int64(7),
    np.int32(7),
    np.uint16(7),
    torch.tensor(7),
    torch.tensor(7, dtype=torch.int32),
    torch.tensor(7, dtype=torch.uint8),
]
NOT_INTEGERS = [
    7.0,
    np.float64(7.0),
    np.float32(7.0),
    torch.tensor(7.0),
    torch.tensor([7]),
    torch.tensor(True),
    True,
    np.bool_(True),
    "7",
    None,
    [7],
    7 + 0j,
]


@pytest.mark.parametrize("value", INTEGER_LIKE, ids=repr)
def test_integer_like_values_become_python_ints(value):
    assert is_integer_like(value)
    size = as_size("size", value)
    assert type(size) is int and size == 7


@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_other_values_are_refused_naming_the_argument(value):
    assert not is_integer_like(value)
    with pytest.raises(ValueError, match="num_widgets must be an integer >= 0, got"):
        as_size("num_widgets", value)


def test_minimum():
    assert as_size("n", np.int64(1), minimum=1) == 1
    with pytest.raises(ValueError, match=r"n must be an integer >= 1, got 0"):
        as_size("n", torch.tensor(0), minimum=1)


def test_sbm_accepts_numpy_and_tensor_sizes():
    reference = stochastic_block_model(300, 3, avg_degree=4.0, seed=2)
    for num_nodes, communities in [
        (np.int64(300), np.int32(3)),
        (torch.tensor(300), torch.tensor(3)),
    ]:
        graph = stochastic_block_model(num_nodes, communities, avg_degree=4.0, seed=2)
        assert type(graph.num_nodes) is int and type(graph.num_classes) is int
        assert graph.num_nodes == 300 and graph.num_classes == 3
        assert torch.equal(graph.src, reference.src) and torch.equal(graph.labels, reference.labels)
        assert graph.train_mask.shape == (300,)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_nodes": np.float64(300.0)}, "num_nodes"),
        ({"num_communities": torch.tensor(3.0)}, "num_communities"),
        ({"num_communities": True}, "num_communities"),
    ],
)
def test_sbm_refuses_sizes_that_are_not_integers(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stochastic_block_model(**{"num_nodes": 300, "num_communities": 3, **kwargs})


def test_checkpoint_chunk_bytes(tmp_path):
    emb = NodeEmbedding(10, 2, "chunks", init_func=lambda t: t.normal_())
    graphemb.save(tmp_path / "c", emb, chunk_bytes=np.int64(24))  # 3 rows per chunk
    fresh = NodeEmbedding(10, 2, "chunks")
    graphemb.load(tmp_path / "c", fresh, chunk_bytes=torch.tensor(16))
    assert torch.equal(fresh.weight, emb.weight)
    with pytest.raises(ValueError, match="chunk_bytes must be an integer >= 1, got 0"):
        graphemb.save(tmp_path / "d", emb, chunk_bytes=0)
    assert not (tmp_path / "d").exists()


def test_optimizer_step_counter_from_a_state_dict():
    emb = NodeEmbedding(4, 2, "steps")
    opt = SparseSGD([emb], lr=0.1)
    state = opt.state_dict()
    state["steps_taken"] = np.int64(12)
    opt.load_state_dict(state)
    assert opt.steps_taken == 12 and type(opt.steps_taken) is int
    state["steps_taken"] = 1.5
    with pytest.raises(ValueError, match="steps_taken.*1.5"):
        opt.load_state_dict(state)
    assert opt.steps_taken == 12
