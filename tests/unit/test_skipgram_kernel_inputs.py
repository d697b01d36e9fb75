"""What the compiled skip-gram kernel reads of a corpus (graphemb.skipgram.backends.
kernel_inputs): the counts and the noise read in place from the graph where they can be,
with the distributions word2vec defines (checked against float64 formulas)."""

from __future__ import annotations

import pytest
import torch

from graphemb._native.skipgram import SlotNoise
from graphemb.graph import Graph
from graphemb.skipgram import CompiledOptions, SkipGramOptions, train_node_embeddings
from graphemb.skipgram.backends import compiled_kernel
from graphemb.skipgram.backends.kernel_inputs import (
    FLOOR_CAP,
    MAX_UNIFORM_ATTEMPTS,
    MIN_SLOT_ACCEPTANCE,
    kernel_inputs,
    lack_bound,
    slot_plan,
)
from graphemb.skipgram.corpus import Corpus


def alias_probabilities(table, num_nodes: int) -> torch.Tensor:
    """The distribution an alias table ``(nodes, keep, alias)`` draws from (float64)."""
    nodes, keep, alias = table
    probabilities = torch.zeros(num_nodes, dtype=torch.float64)
    if nodes.numel():
        probabilities.index_add_(0, nodes, keep / nodes.numel())
        probabilities.index_add_(0, alias, (1 - keep) / nodes.numel())
    return probabilities


def implied_noise(degrees: torch.Tensor, plan) -> torch.Tensor:
    """The distribution of a slot draw under ``plan``: a uniform slot (node v with
    probability degree / total) accepted with probability min(1, (floor / degree) ** 0.25),
    retried until accepted; with probability ``plan.share`` instead the alias table, or
    (``lack_bound`` > 0) a uniform node of degree d in (0, floor) accepted with probability
    (d ** 0.75 floor ** 0.25 - d) / lack_bound, retried until accepted."""
    d = degrees.double()
    accept = torch.where(d > 0, (plan.floor / d.clamp(min=1)) ** 0.25, 0.0).clamp(max=1)
    slots = d * accept
    slots = slots / slots.sum()
    if plan.lack_bound > 0:
        below = (d > 0) & (d < plan.floor)
        assert plan.alias[0].numel() == 0
        assert bool((d.pow(0.75) * plan.floor**0.25 - d)[below].le(plan.lack_bound).all())
        lack = torch.where(below, d.pow(0.75) * plan.floor**0.25 - d, 0.0) / plan.lack_bound
        return (1 - plan.share) * slots + plan.share * lack / lack.sum()
    return (1 - plan.share) * slots + plan.share * alias_probabilities(plan.alias, d.numel())


@pytest.mark.parametrize("rejection", [True, False])
@pytest.mark.parametrize("floor", [None, 3.0, 8.0])
def test_slot_plans_draw_degree_to_the_power_three_quarters(floor, rejection):
    gen = torch.Generator().manual_seed(0)
    degrees = torch.randint(0, 12, (500,), generator=gen)
    degrees[:5] = torch.tensor([40, 0, 1, 1, 2])  # a hub, isolated and rare nodes
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
    plan = slot_plan(indptr, floor, rejection=rejection)
    if floor is not None:  # (the default floor, 1, leaves nothing below it)
        assert plan.floor == floor and plan.share > 0
        assert (plan.lack_bound > 0) == rejection == (plan.alias[0].numel() == 0)
    expected = degrees.double() ** 0.75
    torch.testing.assert_close(implied_noise(degrees, plan), expected / expected.sum(),
                               rtol=1e-9, atol=1e-15)  # fmt: skip
    d = degrees.double()  # the expected acceptance, by its definition
    want = (d * torch.where(d > 0, (plan.floor / d.clamp(min=1)) ** 0.25, 0.0).clamp(max=1)).sum()
    assert plan.acceptance == pytest.approx(float(want / d.sum()), rel=1e-12)
    assert implied_noise(degrees, plan).sum() == pytest.approx(1.0)


def test_the_default_floor_leaves_few_nodes_below_it():
    order = torch.randperm(1000, generator=torch.Generator().manual_seed(3))
    degrees = torch.arange(1, 1001)[order]
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
    plan = slot_plan(indptr, rejection=False)
    assert plan.floor == 31  # the 31st smallest of 1000 counts
    assert plan.alias[0].numel() == 30  # the nodes below it
    assert sorted(plan.alias[0].tolist()) == sorted(torch.nonzero(degrees < 31).view(-1).tolist())


def test_a_huge_count_shares_the_floors_top_bin():
    """Counts from FLOOR_CAP up are binned together: the quantile is still the k-th."""
    degrees = torch.tensor([1 << 20] * 40 + [3] * 2)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
    assert slot_plan(indptr).floor == 3  # the first of 42
    degrees = torch.tensor([1 << 20] * 40)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
    assert slot_plan(indptr).floor == FLOOR_CAP  # the cap: then nothing lies below it


def test_the_lack_bound_is_the_largest_lack_below_the_floor():
    for floor in (2.0, 5.0, 31.0, 1000.0):
        lacks = [c**0.75 * floor**0.25 - c for c in range(1, int(floor))]
        assert lack_bound(floor) == max(lacks) > 0
    assert lack_bound(1.0) == 0.0  # no count lies below


@pytest.mark.parametrize("isolated, rejection", [(0, True), (200_000, False)])
def test_rejection_below_the_floor_unless_it_would_try_too_many_nodes(isolated, rejection):
    """Twenty nodes of degree 1 below a floor of 2: by rejection from uniform nodes, unless
    so many nodes have no in-edge that a noise draw would try more than
    MAX_UNIFORM_ATTEMPTS of them (1.5 with 200,000 isolated nodes)."""
    degrees = torch.tensor([1] * 20 + [2] * 20 + [64] * 960 + [0] * isolated)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
    plan = slot_plan(indptr)
    assert plan.floor == 2 and plan.share > 0
    attempts = plan.share * degrees.numel() * plan.lack_bound / (20 * (2**0.25 - 1))
    assert (plan.lack_bound > 0) == rejection
    if rejection:
        assert attempts <= MAX_UNIFORM_ATTEMPTS
    expected = degrees.double() ** 0.75
    torch.testing.assert_close(implied_noise(degrees, plan), expected / expected.sum(),
                               rtol=1e-9, atol=1e-15)  # fmt: skip


def ring_of_cliques(cliques: int = 20, size: int = 6) -> Graph:
    src, dst = [], []
    for c in range(cliques):
        members = range(c * size, (c + 1) * size)
        src += [u for u in members for v in members if u != v]
        dst += [v for u in members for v in members if u != v]
        src.append(c * size)
        dst.append(((c + 1) % cliques) * size)
    return Graph.from_edges(torch.tensor(src), torch.tensor(dst), cliques * size, undirected=True)


def test_an_unweighted_graph_is_read_in_place():
    graph = ring_of_cliques()
    inputs = kernel_inputs(Corpus(graph, SkipGramOptions(sample=1e-3)))
    assert isinstance(inputs.noise, SlotNoise)
    # the graph's own arrays: no copy of N or E entries
    assert inputs.counts.data_ptr() == graph.indptr.data_ptr()
    assert inputs.noise.slots.data_ptr() == graph.indices.data_ptr()
    assert inputs.subsample_threshold == pytest.approx(1e-3 * graph.num_edges)


def test_a_directed_graph_draws_from_its_out_lists():
    """A slot of the out-neighbour lists is a node once per in-edge."""
    gen = torch.Generator().manual_seed(1)
    src, dst = (
        torch.randint(0, 50, (600,), generator=gen),
        torch.randint(0, 50, (600,), generator=gen),
    )
    graph = Graph.from_edges(src, dst, 50)
    inputs = kernel_inputs(Corpus(graph, SkipGramOptions()))
    assert isinstance(inputs.noise, SlotNoise)
    assert torch.equal(torch.bincount(inputs.noise.slots, minlength=50), graph.in_degrees())


def test_a_graph_of_hubs_falls_back_to_the_alias_table():
    """A star: most slots hold the hub, whose draws would mostly be refused."""
    leaves = torch.arange(1, 400)
    graph = Graph.from_edges(torch.zeros_like(leaves), leaves, 400, undirected=True)
    assert slot_plan(graph.indptr).acceptance < MIN_SLOT_ACCEPTANCE
    inputs = kernel_inputs(Corpus(graph, SkipGramOptions()))
    assert isinstance(inputs.noise, tuple)
    expected = graph.in_degrees().double() ** 0.75
    torch.testing.assert_close(alias_probabilities(inputs.noise, 400), expected / expected.sum())


def test_weighted_walks_count_weights_and_build_their_alias_table():
    graph = ring_of_cliques()
    graph.edge_weight = torch.rand(graph.num_edges, generator=torch.Generator().manual_seed(2))
    inputs = kernel_inputs(Corpus(graph, SkipGramOptions(weighted=True, sample=0.1)))
    strengths = graph.weighted_in_degrees().double()
    assert inputs.counts.dtype == torch.float64
    torch.testing.assert_close(inputs.counts, strengths)
    assert inputs.subsample_threshold == pytest.approx(0.1 * float(strengths.sum()))
    expected = strengths**0.75
    torch.testing.assert_close(
        alias_probabilities(inputs.noise, graph.num_nodes), expected / expected.sum()
    )


def test_a_graph_without_edges_draws_uniform_noise():
    graph = Graph.from_edges(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 7)
    inputs = kernel_inputs(Corpus(graph, SkipGramOptions()))
    assert inputs.subsample_threshold == 0
    torch.testing.assert_close(
        alias_probabilities(inputs.noise, 7), torch.full((7,), 1 / 7.0, dtype=torch.float64)
    )


def test_without_a_pool_the_alias_table_serves():
    """Draws resolved where they are needed: no dependent reads of slots."""
    inputs = kernel_inputs(Corpus(ring_of_cliques(), SkipGramOptions()), pooled=False)
    assert isinstance(inputs.noise, tuple)


@pytest.mark.skipif(compiled_kernel() is None, reason="the compiled kernels are disabled")
@pytest.mark.parametrize("noise_reuse, slots", [(1, False), (10, True)])
def test_the_trainer_reads_slots_only_with_a_pool(skipgram_kernel_calls, noise_reuse, slots):
    graph = ring_of_cliques()
    train_node_embeddings(
        graph, dimensions=8, walk_length=5, num_walks=1, backend="compiled",
        compiled_options=CompiledOptions(noise_reuse=noise_reuse),
    )  # fmt: skip
    assert skipgram_kernel_calls
    assert all(isinstance(c["noise"], SlotNoise) == slots for c in skipgram_kernel_calls)
    assert all(c["counts"].data_ptr() == graph.indptr.data_ptr() for c in skipgram_kernel_calls)
