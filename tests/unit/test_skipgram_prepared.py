"""The compiled skip-gram kernel prepared once for a run (``SkipGramTrainer``): each call
trains its own chunk, with its own walks, place in the run and seed, as word2vec's float64
reference does on that chunk; bad walks are refused, naming them, and change nothing."""

from __future__ import annotations

import pytest
import torch
from skipgram_reference import reference

from graphemb._native.skipgram import SkipGramTrainer
from graphemb.skipgram import FINAL_RATE, NegativeSampler
from graphemb.skipgram.backends import compiled_kernel

pytestmark = pytest.mark.skipif(
    compiled_kernel() is None,
    reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)",
)

NODES, DIM, TOTAL = 30, 8, 40


def _tables(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple]:
    gen = torch.Generator().manual_seed(seed)
    syn0 = (torch.rand(NODES, DIM, generator=gen) - 0.5) / DIM
    syn1 = torch.rand(NODES, DIM, generator=gen) * 0.1
    weights = torch.arange(1, NODES + 1, dtype=torch.float64)
    return syn0, syn1, weights, NegativeSampler(weights).alias_table


@pytest.mark.parametrize("sharing", ["pair", "position"])
def test_each_call_trains_its_chunk_as_the_reference_does(sharing):
    syn0, syn1, weights, alias = _tables(seed=1)
    expected0, expected1 = syn0.double(), syn1.double()
    train = SkipGramTrainer(syn0, syn1, weights, alias, 2, 3, 0.5, FINAL_RATE, TOTAL, 1,
                            sharing=sharing)  # fmt: skip
    gen = torch.Generator().manual_seed(2)
    before = 0
    # chunks of different sizes and walk lengths, at their places in the run, seeded apart
    for index, (walks, length) in enumerate([(6, 9), (3, 5), (8, 9)]):
        chunk = torch.randint(NODES, (walks, length), generator=gen)
        seed = 1_000 + 7 * index
        expected0, expected1 = reference(chunk, expected0, expected1, weights, alias, 2, 3,
                                         0.5, before, TOTAL, seed, sharing=sharing)  # fmt: skip
        nonfinite, products = train(chunk, before, 1, seed)
        assert nonfinite == 0 and products > 0
        torch.testing.assert_close(syn0.double(), expected0, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(syn1.double(), expected1, rtol=1e-4, atol=1e-5)
        before += walks


@pytest.mark.parametrize(
    ("walks", "message"),
    [
        (torch.zeros(4, 5), "walks must be int64, got float32"),
        (torch.zeros(4, 5, dtype=torch.int64).t(), r"walks must be a contiguous CPU tensor"),
        (torch.zeros(20, dtype=torch.int64), r"walks must be a contiguous CPU tensor of 2"),
    ],
)
def test_bad_walks_are_refused_by_name_and_change_nothing(walks, message):
    syn0, syn1, weights, alias = _tables(seed=3)
    kept = (syn0.clone(), syn1.clone())
    train = SkipGramTrainer(syn0, syn1, weights, alias, 2, 3, 0.5, FINAL_RATE, TOTAL, 1)
    with pytest.raises((TypeError, ValueError), match=message):
        train(walks, 0, 1, 5)
    assert torch.equal(syn0, kept[0]) and torch.equal(syn1, kept[1])
