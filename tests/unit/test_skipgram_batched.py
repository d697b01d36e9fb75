"""The torch backend of the skip-gram trainer (graphemb.skipgram.backends.batched).

Oracles: word2vec's sequential per-pair update written out in float64 Python (a round of
distinct rows must equal it, in any pair order); planted communities recovered far above
chance; the guard's bound checked on tables made to cross it."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from graphemb.datasets import stochastic_block_model
from graphemb.evaluation import node_classification_f1
from graphemb.graph import Graph
from graphemb.skipgram import MAX_ROW_NORM, TorchOptions, TrainingDiverged, train_node_embeddings
from graphemb.skipgram.backends.batched import train_round_
from graphemb.skipgram.backends.rows import LocalRows
from graphemb.skipgram.guard import check_rows

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread


def sequential_word2vec(syn0, syn1, contexts, nodes, noise, lr, order):
    """word2vec.c's skip-gram update, one pair after the other in ``order``: the context's
    row against the node (label 1) and its noise nodes (label 0, skipped where equal to the
    node), the context's change added after its targets."""
    syn0 = [row[:] for row in syn0.tolist()]
    syn1 = [row[:] for row in syn1.tolist()]
    for pair in order:
        c, node = int(contexts[pair]), int(nodes[pair])
        change = [0.0] * len(syn0[c])
        targets = [(node, 1.0)] + [(int(n), 0.0) for n in noise[pair] if int(n) != node]
        for target, label in targets:
            f = sum(a * b for a, b in zip(syn0[c], syn1[target], strict=True))
            g = (label - 1.0 / (1.0 + math.exp(-f))) * lr
            change = [ch + g * b for ch, b in zip(change, syn1[target], strict=True)]
            syn1[target] = [b + g * a for a, b in zip(syn0[c], syn1[target], strict=True)]
        syn0[c] = [a + ch for a, ch in zip(syn0[c], change, strict=True)]
    return torch.tensor(syn0, dtype=torch.float64), torch.tensor(syn1, dtype=torch.float64)


def _tables(num_nodes: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    syn0 = torch.randn(num_nodes, dim, generator=generator, dtype=torch.float64)
    syn1 = torch.randn(num_nodes, dim, generator=generator, dtype=torch.float64)
    return syn0, syn1


def test_a_round_of_distinct_rows_is_word2vecs_sequential_update_in_any_order():
    syn0, syn1 = _tables(30, 6, seed=0)
    contexts = torch.tensor([0, 1, 2, 3])
    nodes = torch.tensor([4, 5, 6, 7])
    noise = torch.arange(8, 20).view(4, 3)  # every output row distinct
    expected = None
    for order in itertools.islice(itertools.permutations(range(4)), 0, 24, 7):
        reference = sequential_word2vec(syn0, syn1, contexts, nodes, noise, 0.3, order)
        if expected is not None:  # the reference itself does not depend on the order
            torch.testing.assert_close(reference, expected, rtol=1e-12, atol=1e-12)
        expected = reference
    got0, got1 = syn0.clone(), syn1.clone()
    bad = train_round_(LocalRows(got0, got1), contexts, nodes, noise, 0.3)
    assert not bool(bad)
    torch.testing.assert_close((got0, got1), expected, rtol=1e-12, atol=1e-12)
    assert not torch.equal(got0, syn0) and not torch.equal(got1, syn1)


def test_a_noise_node_equal_to_the_node_is_skipped():
    syn0, syn1 = _tables(10, 4, seed=1)
    contexts, nodes = torch.tensor([0]), torch.tensor([5])
    noise = torch.tensor([[5, 6, 5]])  # the node itself, twice
    expected = sequential_word2vec(syn0, syn1, contexts, nodes, noise, 0.2, [0])
    train_round_(LocalRows(syn0, syn1), contexts, nodes, noise, 0.2)
    torch.testing.assert_close((syn0, syn1), expected, rtol=1e-12, atol=1e-12)


def test_a_non_finite_score_is_reported():
    syn0, syn1 = _tables(10, 4, seed=2)
    syn1[3] = float("inf")
    assert bool(train_round_(LocalRows(syn0, syn1), torch.tensor([0]), torch.tensor([3]),
                             torch.tensor([[1]]), 0.1))  # fmt: skip


def _communities(seed: int = 1) -> tuple[Graph, torch.Tensor]:
    data = stochastic_block_model(600, num_communities=4, avg_degree=10.0,
                                  intra_fraction=0.9, seed=seed)  # fmt: skip
    return Graph.from_dataset(data), data.labels


def test_the_torch_backend_recovers_planted_communities():
    graph, labels = _communities()
    rows = train_node_embeddings(
        graph, backend="torch", dimensions=32, walk_length=20, num_walks=5, window=5, seed=0
    )
    score = node_classification_f1(rows, labels, (0.5,), repeats=2)[0]
    untrained = node_classification_f1(torch.randn(600, 32), labels, (0.5,), repeats=2)[0]
    assert untrained.micro_f1 < 0.45  # chance: 0.25
    assert score.micro_f1 > 0.9 and score.macro_f1 > 0.9


def test_step_size_does_not_change_what_a_step_means():
    """Steps of one walk and steps of a tenth of the graph train the same corpus: both
    recover the communities (the step only groups pairs into rounds)."""
    graph, labels = _communities(seed=2)
    for tokens in (20, 60 * 20):
        rows = train_node_embeddings(
            graph, backend="torch", torch_options=TorchOptions(step_tokens=tokens),
            dimensions=32, walk_length=20, num_walks=5, window=5, seed=1,
        )  # fmt: skip
        assert node_classification_f1(rows, labels, (0.5,), repeats=2)[0].micro_f1 > 0.9


def test_a_learning_rate_that_diverges_stops_the_run():
    graph, _ = _communities()
    with pytest.raises(
        TrainingDiverged, match=r"diverged (in walk chunk 1 of|by the end).*lower lr"
    ):
        train_node_embeddings(graph, backend="torch", lr=1e6, dimensions=16, walk_length=10,
                              num_walks=1)  # fmt: skip


@pytest.mark.parametrize("bad_row", [0, 5, 2_051, (1 << 14) + 3])
def test_the_guard_names_the_first_row_past_the_norm_bound(bad_row):
    rows = torch.ones((1 << 14) + 10, 4)
    rows[bad_row, 2] = 2 * MAX_ROW_NORM
    with pytest.raises(TrainingDiverged, match=rf"embedding row {bad_row} has norm 2e\+04"):
        check_rows(rows, 0.025, "by the end of training")
    rows[bad_row, 2] = float("nan")
    with pytest.raises(TrainingDiverged, match=rf"embedding row {bad_row} is not finite"):
        check_rows(rows, 0.025, "by the end of training")
    rows[bad_row, 2] = 1.0
    check_rows(rows, 0.025, "by the end of training")  # nothing to say


def test_workers_set_torchs_threads_for_the_run_only(monkeypatch):
    seen = []
    original = train_round_

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr("graphemb.skipgram.backends.batched.train_round_", spy)
    graph, _ = _communities()
    before = torch.get_num_threads()
    train_node_embeddings(graph, backend="torch", workers=2, dimensions=8, walk_length=5,
                          num_walks=1)  # fmt: skip
    assert seen and set(seen) == {2}
    assert torch.get_num_threads() == before
