"""Weighted random walks (``weighted=True``): transition frequencies against exact float64
probabilities -- ``w_e / sum of out-weights`` for DeepWalk, ``w_e * bias(t, x)`` normalized
for node2vec -- computed by hand from an edge dictionary, with chi-square tests (scipy).

Every statistical test draws from a seeded generator, so it is deterministic; each also
checks that a slightly different distribution is rejected.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
import torch
from helpers import DEVICES
from sampling_cases import walker_path  # noqa: F401 (a fixture)
from scipy import stats

from graphemb.graph import Graph
from graphemb.sampling.walks import PAD, RandomWalker, random_walks

P_VALUE = 1e-3

pytestmark = pytest.mark.usefixtures("one_thread", "walker_path")

# Undirected weighted test graph: (u, v, weight). Edge 4-5 weighs 0, so node 5 has only
# zero out-weights (a sink for weighted walks); 0-4 and 2-3 make rows unsorted by edge id.
EDGES = [
    (0, 3, 7.0),
    (0, 1, 1.0),
    (0, 2, 2.0),
    (0, 4, 0.5),
    (2, 1, 3.0),
    (3, 2, 1.5),
    (4, 3, 4.0),
    (4, 5, 0.0),
    (1, 4, 0.25),
]


def seeded(device, seed=0) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def weighted_graph(device="cpu") -> Graph:
    src, dst, weight = zip(*EDGES, strict=True)
    return Graph.from_edges(
        list(src), list(dst), 6, device, undirected=True, edge_weight=list(weight)
    )


def adjacency() -> dict[int, dict[int, float]]:
    """The oracle's view of EDGES: out-weights per node, both directions."""
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for u, v, w in EDGES:
        out[u][v] = w
        out[v][u] = w
    return out


def first_order_probabilities() -> dict[tuple[int, int], float]:
    out = adjacency()
    return {
        (v, x): w / sum(row.values())
        for v, row in out.items()
        if sum(row.values()) > 0
        for x, w in row.items()
    }


def node2vec_probabilities(p: float, q: float) -> dict[tuple[int, int, int], float]:
    """P(x | t -> v) for every step t -> v of positive weight, in float64 by hand."""
    out = adjacency()
    expected = {}
    for t, row in out.items():
        for v, w_tv in row.items():
            if w_tv == 0:
                continue
            scores = {}
            for x, w in out[v].items():
                bias = 1 / p if x == t else (1.0 if x in out[t] else 1 / q)
                scores[x] = w * bias
            total = sum(scores.values())
            if total > 0:
                expected.update({(t, v, x): s / total for x, s in scores.items()})
    return expected


def grouped_p_value(observed: Counter, expected: dict) -> float:
    """Chi-square p-value of the counts ``observed[key]`` against ``expected[key]``, keys
    grouped by all but their last entry; an outcome of probability 0 must never occur."""
    totals: Counter = Counter()
    for key, count in observed.items():
        assert expected.get(key, 0.0) > 0, f"impossible step {key} taken {count} times"
        totals[key[:-1]] += count
    statistic, dof = 0.0, 0
    for key, probability in expected.items():
        n = totals[key[:-1]]
        if probability == 0 or n == 0:
            continue
        mean = n * probability
        statistic += (observed[key] - mean) ** 2 / mean
        dof += 1
    dof -= len([g for g in totals if totals[g]])
    return float(stats.chi2.sf(statistic, dof))


@pytest.mark.parametrize("device", DEVICES)
def test_one_step_follows_the_weights(device):
    weights = [1.0, 2.0, 7.0, 0.5]
    graph = Graph.from_edges([0, 0, 0, 0], [1, 2, 3, 4], 5, device, edge_weight=weights)
    start = torch.zeros(100_000, dtype=torch.long, device=device)
    walks = random_walks(graph, start, 1, weighted=True, generator=seeded(device, 3)).cpu()
    counts = torch.bincount(walks[:, 1], minlength=5)[1:].double().numpy()
    exact = torch.tensor(weights, dtype=torch.float64).numpy() / sum(weights)
    assert stats.chisquare(counts, exact * counts.sum()).pvalue > P_VALUE
    nearby = exact.copy()
    nearby[[0, 1]] += [0.01, -0.01]  # one point moved between two edges is told apart
    assert stats.chisquare(counts, nearby * counts.sum()).pvalue < 1e-6
    # the unweighted walk on the same graph stays uniform
    plain = random_walks(graph, start, 1, generator=seeded(device, 3)).cpu()
    uniform = torch.bincount(plain[:, 1], minlength=5)[1:].double().numpy()
    assert stats.chisquare(uniform).pvalue > P_VALUE


@pytest.mark.parametrize("device", DEVICES)
def test_weighted_deepwalk_transitions(device):
    graph = weighted_graph(device)
    start = torch.arange(5, device=device).repeat(4000)
    walks = random_walks(graph, start, 6, weighted=True, generator=seeded(device, 1)).cpu()
    pairs = torch.stack([walks[:, :-1], walks[:, 1:]], -1).reshape(-1, 2)
    pairs = pairs[pairs[:, 1] != PAD]
    observed = Counter(map(tuple, pairs.tolist()))
    assert grouped_p_value(observed, first_order_probabilities()) > P_VALUE
    # node 5 is reached by no positive edge and starts walks that stop at once
    five = random_walks(graph, torch.tensor([5, 5], device=device), 3, weighted=True)
    assert five.tolist() == [[5, PAD, PAD, PAD]] * 2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p, q", [(0.5, 2.0), (4.0, 0.25), (1.0, 1.0)])
def test_weighted_node2vec_second_steps(device, p, q):
    graph = weighted_graph(device)
    walker = RandomWalker(graph, p, q, weighted=True)
    start = torch.arange(5, device=device).repeat(6000)
    walks = walker(start, 2, generator=seeded(device, 7)).cpu()
    triples = walks[walks[:, 2] != PAD]
    observed = Counter(map(tuple, triples.tolist()))
    assert grouped_p_value(observed, node2vec_probabilities(p, q)) > P_VALUE
    if p != q:  # the swapped parameters are told apart
        assert grouped_p_value(observed, node2vec_probabilities(q, p)) < 1e-6
    # the first step follows the weights alone
    first = Counter(map(tuple, walks[:, :2].tolist()))
    assert grouped_p_value(first, first_order_probabilities()) > P_VALUE


def test_walks_are_seeded_and_weighted_needs_weights():
    graph = weighted_graph()
    start = torch.arange(5).repeat(50)
    walker = RandomWalker(graph, 0.5, 2.0, weighted=True)
    first = walker(start, 10, generator=seeded("cpu", 4))
    assert torch.equal(first, walker(start, 10, generator=seeded("cpu", 4)))
    assert not torch.equal(first, walker(start, 10, generator=seeded("cpu", 5)))
    unweighted = Graph.from_edges([0, 1], [1, 0])
    with pytest.raises(ValueError, match="edge weights"):
        RandomWalker(unweighted, weighted=True)
    with pytest.raises(TypeError, match="weighted must be a bool"):
        RandomWalker(graph, weighted=1)  # type: ignore[arg-type]


def test_extreme_weight_ratios_never_take_a_zero_edge():
    """Weights 6 orders of magnitude apart between zero-weight edges (at the row's start
    and end, where rounding could land): only the two positive edges are ever taken."""
    weights = [0.0, 1e6, 0.0, 1.0, 0.0]  # probabilities 1e6/(1e6+1) and 1/(1e6+1)
    graph = Graph.from_edges([1, 1, 1, 1, 1], [0, 2, 3, 4, 5], 6, edge_weight=weights)
    start = torch.ones(200_000, dtype=torch.long)
    steps = random_walks(graph, start, 1, weighted=True, generator=seeded("cpu", 2))[:, 1]
    assert set(steps.unique().tolist()) <= {2, 4}
    assert int((steps == 4).sum()) < 10  # expected 0.2


def test_unsorted_csr_rows_keep_their_weights():
    """node2vec sorts each CSR row for its neighbour test: the weights must move along."""
    graph = weighted_graph()
    indptr, indices, edge_ids = graph.csr()
    weight = graph.csr_edge_weight()
    order = torch.cat([torch.arange(indptr[v], indptr[v + 1]).flip(0) for v in range(6)])
    graph._csr = (indptr, indices[order], edge_ids[order])
    graph._csr_weight = weight[order]
    start = torch.arange(5).repeat(6000)
    walks = RandomWalker(graph, 0.5, 2.0, weighted=True)(start, 2, generator=seeded("cpu", 9))
    observed = Counter(map(tuple, walks[walks[:, 2] != PAD].tolist()))
    assert grouped_p_value(observed, node2vec_probabilities(0.5, 2.0)) > P_VALUE


def test_walks_on_an_undirected_graph_read_its_csc_arrays(monkeypatch):
    """An undirected graph's out-neighbours are its in-neighbours: walkers (weighted,
    node2vec, uniform) never build the CSR copy, which would double the graph's memory;
    the transition tests above run on this path."""
    graph = weighted_graph()
    assert graph.symmetric
    assert not Graph.from_edges([0, 1], [1, 2]).symmetric
    assert not graph.reverse().symmetric  # a rebuilt graph does not claim what it can't know

    def no_csr(self):
        raise AssertionError("the walker built the CSR of a symmetric graph")

    monkeypatch.setattr(Graph, "csr", no_csr)
    start = torch.arange(5).repeat(20)
    for walker in (RandomWalker(graph), RandomWalker(graph, 0.5, 2.0, weighted=True)):
        walks = walker(start, 4, generator=seeded("cpu"))
        steps = torch.stack([walks[:, :-1], walks[:, 1:]], -1).reshape(-1, 2)
        steps = steps[steps[:, 1] != PAD].tolist()
        neighbours = adjacency()
        assert steps and all(v in neighbours[u] for u, v in steps)


def test_weighted_steps_drawn_after_rejected_proposals_follow_the_weights():
    """A directed ring of 6 with weighted chords i -> i+1 (1), i+2 (3), i+3 (0.5); p = q =
    1000. After a jump t -> t+3 no out-edge of v leads to a node at distance 1 from t:
    every candidate weighs 1/1000 of the envelope, so nearly every such step comes from
    the exact draw after 32 rejected proposals, which must follow the weights alone (a
    return and a far node weigh the same here)."""
    offsets, weights = [1, 2, 3], [1.0, 3.0, 0.5]
    src = [i for i in range(6) for _ in offsets]
    dst = [(i + k) % 6 for i in range(6) for k in offsets]
    graph = Graph.from_edges(src, dst, 6, edge_weight=weights * 6)
    walker = RandomWalker(graph, 1000.0, 1000.0, weighted=True)
    walks = walker(torch.arange(6).repeat(5000), 6, generator=seeded("cpu", 4))
    triples = torch.stack([walks[:, :-2], walks[:, 1:-1], walks[:, 2:]], -1).reshape(-1, 3)
    jumped = triples[(triples[:, 1] - triples[:, 0]) % 6 == 3]
    observed = Counter((v, (x - v) % 6) for _, v, x in jumped.tolist())
    assert sum(observed.values()) > 2_000
    share = {k: w / sum(weights) for k, w in zip(offsets, weights, strict=True)}
    by_weight = {(v, k): share[k] for v in range(6) for k in offsets}
    assert grouped_p_value(observed, by_weight) > P_VALUE
    # the proposals' own distribution would be the same; a uniform one is told apart
    uniform = {(v, k): 1 / 3 for v in range(6) for k in offsets}
    assert grouped_p_value(observed, uniform) < 1e-6
