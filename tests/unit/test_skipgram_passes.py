"""train_node_embeddings' ``passes`` (the command line's ``--iter``): SGD passes over the
same walks, the learning rate decaying over all of them, checked on the torch trainer's
steps (what each step gets) against the schedule written out here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphemb.graph import Graph
from graphemb.skipgram import SkipGram, train_node_embeddings

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread

NODES, WALKS, LENGTH, BATCH = 30, 3, 6, 10


def ring() -> Graph:
    return Graph.from_edges(
        torch.arange(NODES), (torch.arange(NODES) + 1) % NODES, NODES, undirected=True
    )


def recorded_steps(monkeypatch, passes: int) -> list[tuple[float, torch.Tensor]]:
    """``(lr, walks)`` of every SGD step of a run with ``passes`` passes."""
    steps: list[tuple[float, torch.Tensor]] = []

    def record(self, walks, negatives, *, lr, **options):
        steps.append((lr, walks.clone()))

    monkeypatch.setattr(SkipGram, "sgd_step", record)
    train_node_embeddings(
        ring(),
        dimensions=4,
        walk_length=LENGTH,
        num_walks=WALKS,
        window=2,
        batch_walks=BATCH,
        lr=0.025,
        sample=0,  # no subsampling: a pass trains exactly the walks drawn
        passes=passes,
        trainer="torch",
        workers=1,
    )
    return steps


@pytest.mark.parametrize("passes", [0, -1, 1.5, "2"])
def test_passes_must_be_a_positive_integer(passes):
    with pytest.raises(ValueError, match="passes"):
        train_node_embeddings(ring(), dimensions=4, passes=passes, trainer="torch")


@pytest.mark.parametrize("passes", [1, 3])
def test_each_chunk_of_walks_is_trained_passes_times_and_the_rate_decays_over_all(
    monkeypatch, passes
):
    steps = recorded_steps(monkeypatch, passes)

    per_chunk = -(-NODES // BATCH)  # one chunk per round of walks: NODES walks
    assert len(steps) == WALKS * passes * per_chunk
    # the same walks, pass after pass, before the next chunk is drawn
    for round_ in range(WALKS):
        first = steps[round_ * passes * per_chunk : (round_ * passes + 1) * per_chunk]
        for repeat in range(1, passes):
            start = (round_ * passes + repeat) * per_chunk
            again = steps[start : start + per_chunk]
            for (_, a), (_, b) in zip(first, again, strict=True):
                assert torch.equal(a, b)
    # and fresh walks in the next round
    assert not torch.equal(steps[0][1], steps[passes * per_chunk][1])
    # word2vec's linear decay from lr to lr / 250, over every pass of every walk
    total = NODES * WALKS * passes
    done = np.cumsum([0] + [walks.shape[0] for _, walks in steps[:-1]])
    expected = 0.025 * np.maximum(1 - (1 - 1 / 250) * done / total, 1 / 250)
    np.testing.assert_allclose([lr for lr, _ in steps], expected, rtol=1e-12)
    assert done[-1] + steps[-1][1].shape[0] == total


def test_one_pass_is_the_default_and_more_passes_train_further():
    """``passes=1`` is the run without it; 3 passes move the rows further from their
    start (a larger summed learning rate on the same walks)."""
    options = dict(dimensions=8, walk_length=LENGTH, num_walks=WALKS, window=2, seed=3)
    options.update(trainer="torch", workers=1)
    default = train_node_embeddings(ring(), **options)
    one = train_node_embeddings(ring(), passes=1, **options)
    three = train_node_embeddings(ring(), passes=3, **options)
    assert torch.equal(default, one)
    start = train_node_embeddings(ring(), lr=1e-12, **options)  # rows barely moved
    assert (three - start).norm() > 1.5 * (one - start).norm()
