"""The skip-gram trainers' node frequencies (``Corpus.token_counts``, from
``Graph.weighted_in_degrees``): what word2vec would count in the walks' tokens, which sets
the noise distribution and the subsampling.

The oracle is the walks themselves: the node at a late position of independent weighted
walks, counted and tested against the predicted shares with a chi-square test (scipy), and
the exact weighted in-degrees summed by hand from the edge list.
"""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from graphemb.graph import Graph
from graphemb.sampling.walks import RandomWalker
from graphemb.skipgram import SkipGramOptions
from graphemb.skipgram.corpus import Corpus

pytestmark = pytest.mark.usefixtures("one_thread")

# Undirected and weighted, with triangles, so that walks mix fast (the second eigenvalue of
# the transition matrix is 0.8: 60 steps from any start leave the walk 1e-8 from its
# stationary distribution). Node 0 has the most edges and the least weight, nodes 4 and 5
# the heaviest edges.
EDGES = [
    (0, 1, 0.5), (0, 2, 0.5), (0, 3, 0.5), (0, 4, 0.5), (4, 5, 3.0), (1, 2, 1.0), (3, 5, 2.0),
    (2, 5, 1.5), (1, 4, 1.5), (3, 4, 1.0),
]  # fmt: skip
STRENGTHS = [2.0, 3.0, 3.0, 3.5, 6.0, 6.5]  # sum of each node's edge weights, by hand
DEGREES = [4, 3, 3, 3, 4, 3]


def weighted_graph() -> Graph:
    src, dst, weight = zip(*EDGES, strict=True)
    return Graph.from_edges(list(src), list(dst), 6, undirected=True, edge_weight=list(weight))


def token_counts(graph: Graph, weighted: bool) -> torch.Tensor:
    return Corpus(graph, SkipGramOptions(weighted=weighted)).token_counts


def test_token_counts_are_in_degrees_or_weighted_in_degrees():
    graph = weighted_graph()
    assert token_counts(graph, weighted=False).tolist() == DEGREES
    torch.testing.assert_close(
        token_counts(graph, weighted=True), torch.tensor(STRENGTHS, dtype=torch.float64)
    )
    unweighted = Graph.from_edges(graph.edges()[0], graph.edges()[1], 6)
    assert unweighted.weighted_in_degrees().tolist() == DEGREES


def test_weighted_walks_visit_nodes_in_proportion_to_their_token_counts():
    # One token per walk (position 60 of 20000 walks from uniform starts): independent draws
    # of where a weighted walk is after it has mixed.
    graph = weighted_graph()
    walker = RandomWalker(graph, weighted=True)
    starts = torch.arange(6).repeat(20000 // 6 + 1)[:20000]
    late = walker(starts, 60, generator=torch.Generator().manual_seed(0))[:, -1]
    visits = torch.bincount(late, minlength=6).double()

    def p_value(counts: torch.Tensor) -> float:
        expected = counts / counts.sum() * visits.sum()
        return float(stats.chisquare(visits.numpy(), expected.numpy()).pvalue)

    assert p_value(token_counts(graph, weighted=True)) > 1e-3
    # The counts of edges (what the trainers used before) are not what these walks visit.
    assert p_value(token_counts(graph, weighted=False)) < 1e-12


def test_noise_distribution_of_weighted_walks_follows_weighted_in_degrees():
    graph = weighted_graph()

    corpus = Corpus(graph, SkipGramOptions(weighted=True, sample=0.1))
    noise, keep = corpus.noise, corpus.keep
    strengths = torch.tensor(STRENGTHS, dtype=torch.float64)
    expected = strengths.pow(0.75) / strengths.pow(0.75).sum()
    torch.testing.assert_close(noise.probabilities.double(), expected)
    # word2vec's keep probability from each node's share of the tokens (sample 0.1).
    share = strengths / strengths.sum()
    torch.testing.assert_close(
        keep, ((share / 0.1).sqrt() + 1).mul(0.1 / share).clamp(max=1.0), rtol=1e-12, atol=0
    )
