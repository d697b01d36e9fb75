"""Noise nodes for negative sampling (graphemb.sampling.negatives.NegativeSampler): the exact
degree ** 0.75 distribution (chi-square), the alias table's implied probabilities, bad weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from graphemb.graph import Graph
from graphemb.sampling import NegativeSampler

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread


def test_negatives_follow_degree_to_the_three_quarters():
    src = torch.tensor([0, 0, 0, 0, 1, 1, 2, 3, 3, 3, 4])
    dst = torch.tensor([1, 2, 3, 4, 0, 2, 0, 0, 1, 2, 0])
    graph = Graph.from_edges(src, dst, num_nodes=6)  # node 5: no in-edges, never drawn
    sampler = NegativeSampler.from_graph(graph)
    draws = sampler((40000,), generator=torch.Generator().manual_seed(0))
    counts = np.bincount(draws.numpy(), minlength=6)
    in_degree = np.bincount(dst.numpy(), minlength=6).astype(float)
    expected = in_degree**0.75 / (in_degree**0.75).sum()
    assert counts[5] == 0
    assert stats.chisquare(counts[:5], expected[:5] * counts.sum()).pvalue > 1e-3
    # the test can tell power 0.75 from power 1 at this sample size
    wrong = in_degree / in_degree.sum()
    assert stats.chisquare(counts[:5], wrong[:5] * counts.sum()).pvalue < 1e-6
    assert sampler((2, 3, 4)).shape == (2, 3, 4)


@pytest.mark.parametrize("shape", ["power-law", "one-hub", "uniform", "single"])
def test_alias_table_gives_every_node_exactly_its_probability(shape):
    """The distribution the table implies -- column c drawn with 1/n, kept with keep[c],
    else its alias -- equals weight ** 0.75 normalised, computed here in float64 (exact up
    to rounding), zero-weight nodes included (never drawn); the sampler's probabilities
    read the same."""
    gen = torch.Generator().manual_seed(5)
    weights = {
        "power-law": (1 / torch.rand(3000, generator=gen, dtype=torch.float64)) ** 1.5,
        "one-hub": torch.cat([torch.full((1,), 5000.0), torch.ones(999)]).double(),
        "uniform": torch.ones(7, dtype=torch.float64),
        "single": torch.tensor([0.0, 2.0, 0.0]),
    }[shape]
    if shape == "power-law":
        weights[::7] = 0.0
    sampler = NegativeSampler(weights)
    columns = sampler._nodes.numel()
    weights = weights.double()
    implied = torch.zeros_like(weights)
    implied.index_add_(0, sampler._nodes, sampler._keep / columns)
    implied.index_add_(0, sampler._alias_nodes, (1 - sampler._keep) / columns)
    expected = weights**0.75 / (weights**0.75).sum()
    torch.testing.assert_close(implied, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(sampler.probabilities, expected, rtol=0, atol=1e-12)
    assert bool((implied[weights == 0] == 0).all())
    assert sampler.num_nodes == weights.numel()


@pytest.mark.parametrize(
    "weights, power, error, message",
    [
        (torch.tensor([1.0, -1.0]), 0.75, ValueError, r"weights\[1\] = -1.0"),
        (torch.zeros(3), 0.75, ValueError, "all zero"),
        (torch.tensor([1.0, float("nan")]), 0.75, ValueError, "finite"),
        (torch.ones(2, 2), 0.75, TypeError, "1-dimensional"),
        (torch.ones(3), -1.0, ValueError, "power"),
        (torch.tensor([True, False]), 0.75, TypeError, "real numbers"),
    ],
)
def test_sampler_refuses_bad_weights(weights, power, error, message):
    with pytest.raises(error, match=message):
        NegativeSampler(weights, power)


def test_the_skipgram_package_still_exports_the_sampler():
    import graphemb.skipgram

    assert graphemb.skipgram.NegativeSampler is NegativeSampler
