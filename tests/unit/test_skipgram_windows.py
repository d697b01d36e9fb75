"""Context pairs, word2vec's dynamic window and subsampling (graphemb.skipgram.windows), against
brute-force pairs, a chi-square test and word2vec.c's formula."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from scipy import stats
from skipgram_batches import tiny_walks

from graphemb.sampling.walks import PAD
from graphemb.skipgram import (
    SkipGram,
    context_pairs,
    dynamic_radii,
    keep_probabilities,
    subsample_walks,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread


def test_context_pairs_are_every_pair_within_the_window():
    walks, _ = tiny_walks()
    for window in (1, 2, 7):
        centers, contexts = context_pairs(walks, window)
        expected = Counter()
        for row in walks.tolist():
            for i, a in enumerate(row):
                for j, b in enumerate(row):
                    if a != PAD and b != PAD and 0 < abs(i - j) <= window:
                        expected[(a, b)] += 1
        assert Counter(zip(centers.tolist(), contexts.tolist(), strict=True)) == expected
        assert SkipGram.num_pairs(walks, window) == sum(expected.values())


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
