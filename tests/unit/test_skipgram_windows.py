"""The pairs of a batch of walks in rounds, word2vec's dynamic window and subsampling
(graphemb.skipgram.windows), against brute-force pairs, a chi-square test and word2vec.c's
formula."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from scipy import stats
from skipgram_batches import tiny_walks

from graphemb.sampling.walks import PAD
from graphemb.skipgram import dynamic_radii, keep_probabilities, pair_rounds, subsample_walks

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread


def _expected_pairs(walks: torch.Tensor, radii: torch.Tensor) -> Counter:
    """Every (context, node) pair of word2vec's dynamic window, position by position."""
    expected: Counter = Counter()
    for row, row_radii in zip(walks.tolist(), radii.tolist(), strict=True):
        for t, node in enumerate(row):
            for c, context in enumerate(row):
                if PAD not in (node, context) and 0 < abs(t - c) <= row_radii[t]:
                    expected[(context, node)] += 1
    return expected


@pytest.mark.parametrize("window", [1, 2, 7])
def test_rounds_hold_every_pair_of_the_dynamic_window_once(window):
    walks, _ = tiny_walks()
    radii = dynamic_radii(walks.shape, window, generator=torch.Generator().manual_seed(window))
    rounds = pair_rounds(walks, radii, window)
    got: Counter = Counter()
    for contexts, nodes in rounds:
        got.update(zip(contexts.tolist(), nodes.tolist(), strict=True))
    assert got == _expected_pairs(walks, radii)
    assert len(rounds) == 2 * min(window, walks.shape[1] - 1)


def test_no_position_is_trained_twice_within_a_round():
    """Positions, not node ids (a node may repeat along a walk): each round uses a walk
    position at most once as a context and at most once as a node."""
    length = 9
    positions = torch.arange(length).repeat(3, 1) + 100 * torch.arange(3)[:, None]
    radii = torch.full(positions.shape, 4)
    for contexts, nodes in pair_rounds(positions, radii, 4):
        assert contexts.unique().numel() == contexts.numel()
        assert nodes.unique().numel() == nodes.numel()


def test_dynamic_window_is_uniform_in_one_to_window():
    radii = dynamic_radii((200, 50), 5, generator=torch.Generator().manual_seed(0))
    counts = torch.bincount(radii.view(-1), minlength=6)
    assert counts[0] == 0 and int(radii.max()) == 5
    assert stats.chisquare(counts[1:].numpy()).pvalue > 1e-4


def test_subsampling_keeps_tokens_with_word2vecs_probability():
    counts = torch.tensor([1000.0, 100.0, 10.0, 1.0, 0.0])
    sample = 1e-2
    total = float(counts.sum())
    for count, keep in zip(
        counts.tolist(), keep_probabilities(counts, sample).tolist(), strict=True
    ):
        if count == 0:
            continue
        # word2vec.c: ran = (sqrt(cn / (sample * train_words)) + 1) * (sample * train_words) / cn
        ran = (np.sqrt(count / (sample * total)) + 1) * (sample * total) / count
        assert keep == pytest.approx(min(ran, 1.0), rel=1e-12)
    assert keep_probabilities(counts, 0.0).eq(1).all()
    # Empirical: node 0 kept at its rate, the order of kept tokens unchanged.
    keep = torch.tensor([0.3, 1.0, 1.0])
    walks = torch.tensor([[0, 1, 0, 2, 0, 1, PAD]]).repeat(4000, 1)
    kept = subsample_walks(walks, keep, generator=torch.Generator().manual_seed(0))
    zeros = int((kept == 0).sum())
    assert abs(zeros - 0.3 * 12000) < 5 * (12000 * 0.3 * 0.7) ** 0.5
    without_zero = [[v for v in row if v not in (0, PAD)] for row in kept[:50].tolist()]
    assert all(row == [1, 2, 1] for row in without_zero)
    real = kept != PAD
    assert bool((real[:, :-1] >= real[:, 1:]).all())  # PAD only at the end
