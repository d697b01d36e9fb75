"""DeepWalk on several ranks (graphemb.skipgram with a process group): every rank trains its
share of every step on NodeEmbedding tables -- in shared memory on one machine, or
partitioned across (simulated) machines -- and all end with the same rows, which recover
planted communities as one process does; a divergence on the ranks stops every rank."""

from __future__ import annotations

import os

import pytest
import torch
from _multiprocess import run_ranks

from graphemb.datasets import stochastic_block_model
from graphemb.evaluation import node_classification_f1
from graphemb.graph import Graph
from graphemb.skipgram import TorchOptions, TrainingDiverged, train_node_embeddings

pytestmark = pytest.mark.multiprocess

# Steps of 100 walks: every round of a step is an exchange, so few of them (seconds)
OPTIONS = dict(dimensions=16, walk_length=20, num_walks=5, window=5, seed=0, workers=1,
               torch_options=TorchOptions(step_tokens=2000))  # fmt: skip


def _communities() -> tuple[Graph, torch.Tensor]:
    data = stochastic_block_model(400, 4, avg_degree=10.0, intra_fraction=0.9, seed=3)
    return Graph.from_dataset(data), data.labels


def _train(rank: int, world_size: int, machines: str | None, options: dict) -> object:
    if machines is not None:
        os.environ["GRAPHEMB_MACHINES"] = machines  # simulated machines: partitioned rows
    graph, _ = _communities()
    try:
        return train_node_embeddings(graph, **options)
    except TrainingDiverged as error:
        return error


@pytest.mark.parametrize("machines", [None, "0,1"], ids=["shared-memory", "two-machines"])
def test_ranks_train_one_table_that_recovers_the_communities(machines):
    rows = run_ranks(_train, 2, machines, OPTIONS, timeout=240)
    assert torch.equal(rows[0], rows[1])  # one table, the same on every rank
    _, labels = _communities()
    score = node_classification_f1(rows[0], labels, (0.5,), repeats=2)[0]
    single = train_node_embeddings(_communities()[0], backend="torch", **OPTIONS)
    alone = node_classification_f1(single, labels, (0.5,), repeats=2)[0]
    assert score.micro_f1 > 0.9 and alone.micro_f1 > 0.9  # chance: 0.25


def test_a_divergence_stops_every_rank():
    diverging = {**OPTIONS, "lr": 1e6, "num_walks": 1}
    errors = run_ranks(_train, 2, None, diverging, timeout=240)
    assert all(isinstance(e, TrainingDiverged) and "lower lr" in str(e) for e in errors), errors
