"""The compiled CPU neighbour sampler (``graphemb_kernels.sample_blocks``) on its own.

tests/unit/test_sampling.py runs every sampling test on both paths; these test what only
the compiled path has: a hub's draws through whole ``sample_blocks`` calls (chi-square of
every in-edge's inclusion frequency against ``fanout / degree``), and the marker array it
keeps between calls (scratch space whose contents never change a sample).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from graphemb._compiled import DISABLE_VARIABLE, compiled_module
from graphemb.graph import Graph
from graphemb.sampling import NeighborSampler

P_VALUE = 1e-3

pytestmark = pytest.mark.skipif(
    not hasattr(compiled_module(), "sample_blocks"),
    reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)",
)


@pytest.fixture(autouse=True)
def kernels_enabled(monkeypatch):
    monkeypatch.delenv(DISABLE_VARIABLE, raising=False)


def inclusion_statistic(counts: np.ndarray, draws: int, k: int) -> float:
    """Chi-square statistic (``d - 1`` degrees of freedom) of inclusion counts of ``draws``
    samples of ``k`` out of ``d`` without replacement: Var(c_j) = R p (1 - p) and the counts
    sum to R k, so on the sum-zero subspace their covariance is R (p - p2) I."""
    degree = counts.size
    p, p2 = k / degree, k * (k - 1) / (degree * (degree - 1))
    return float(((counts - draws * p) ** 2).sum() / (draws * (p - p2)))


def hub_inclusion_counts(degree: int, k: int, draws: int) -> np.ndarray:
    """How often each in-edge of a hub (node 0, sources 1..degree) is sampled over
    ``draws`` calls of ``sample_blocks`` with seeds 0 .. draws-1 of one generator each."""
    graph = Graph.from_edges(torch.arange(1, degree + 1), torch.zeros(degree, dtype=torch.int64))
    sampler = NeighborSampler([k])
    counts = np.zeros(degree, dtype=np.int64)
    for seed in range(draws):
        gen = torch.Generator().manual_seed(seed)
        _, _, (block,) = sampler.sample_blocks(graph, torch.tensor([0]), gen)
        ids = block.edge_ids.numpy()
        assert ids.size == k and np.unique(ids).size == k
        counts += np.bincount(ids, minlength=degree)
    return counts


@pytest.mark.parametrize("degree, k", [(500, 10), (100, 90)])
def test_hub_draws_include_every_in_edge_with_probability_fanout_over_degree(degree, k):
    draws = 1500
    counts = hub_inclusion_counts(degree, k, draws)
    assert counts.sum() == draws * k
    assert stats.chi2.sf(inclusion_statistic(counts, draws, k), degree - 1) > P_VALUE
    # the same statistic rejects a sampler biased towards the first half of the edges
    biased = counts.copy()
    shift = draws * k // (4 * degree)
    biased[: degree // 2] += shift
    biased[degree // 2 : degree // 2 * 2] -= shift
    assert stats.chi2.sf(inclusion_statistic(biased, draws, k), degree - 1) < 1e-6


def random_graph(seed: int = 0, num_nodes: int = 3000) -> Graph:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, 30000)
    dst = (rng.pareto(1.2, 30000) * 10).astype(np.int64) % num_nodes  # a few hubs
    return Graph.from_edges(src, dst, num_nodes)


def _clean_sampler(graph: Graph) -> NeighborSampler:
    """A sampler whose marker array holds -1 everywhere (no node seen) before its call."""
    sampler = NeighborSampler([5, 4, 3])
    sampler._local.marker = torch.full((graph.num_nodes,), -1, dtype=torch.int32)
    return sampler


@pytest.mark.parametrize("scan_fraction", [1, 10**9])  # sort-only, scan-only relabelling
def test_what_the_marker_array_holds_before_a_batch_changes_nothing(monkeypatch, scan_fraction):
    """The marker array is scratch space that no entry is read from before the call wrote
    it: filled with ids of other nodes (what earlier batches leave, and worse) before each
    batch, it gives the blocks of a marker that holds -1 everywhere."""
    from graphemb.sampling import neighbor

    monkeypatch.setattr(neighbor, "_SCAN_FRACTION", scan_fraction)
    graph = random_graph()
    sampler = NeighborSampler([5, 4, 3])
    batches = [torch.arange(0, 300, 7), torch.arange(1, 3000, 13), torch.tensor([2999, 0, 5])]
    garbage = torch.Generator().manual_seed(5)
    for i, seeds in enumerate(batches):
        if i:  # the first batch makes the marker; later ones find it filled with garbage
            sampler._local.marker.random_(-3, graph.num_nodes, generator=garbage)
        ours = sampler.sample_blocks(graph, seeds, torch.Generator().manual_seed(i))
        clean = _clean_sampler(graph).sample_blocks(graph, seeds, torch.Generator().manual_seed(i))
        for a, b in zip(ours[2], clean[2], strict=True):
            assert torch.equal(a.src_nodes, b.src_nodes)
            assert torch.equal(a.edge_index, b.edge_index)
            assert torch.equal(a.edge_ids, b.edge_ids)
    # a refused batch (repeated seed) changes nothing either
    with pytest.raises(ValueError, match="node 7 appears more than once"):
        sampler.sample_blocks(graph, torch.tensor([7, 1, 7]))
    again = sampler.sample_blocks(graph, batches[0], torch.Generator().manual_seed(0))
    clean = _clean_sampler(graph).sample_blocks(graph, batches[0], torch.Generator().manual_seed(0))
    for a, b in zip(again[2], clean[2], strict=True):
        assert torch.equal(a.edge_index, b.edge_index)


@pytest.mark.parametrize("threads", [1, 2])
def test_scan_and_sort_number_the_new_sources_alike(monkeypatch, threads):
    """A layer's new sources numbered by the scan of the per-thread node maps or by the
    sort of the few collected from the edges: the same blocks, both in increasing id order
    after the destinations, every source once."""
    from graphemb.sampling import neighbor

    # 80k edges into the first 20k of 300k nodes: fraction 1 sorts every layer (E < N),
    # 10^9 scans every one, in parts of 2^17 nodes (four, on 2 threads); 5,000 seeds make
    # three chunks of draws and of row pointers
    generator = torch.Generator().manual_seed(2)
    graph = Graph.from_edges(
        torch.randint(0, 300_000, (80_000,), generator=generator),
        torch.randint(0, 20_000, (80_000,), generator=generator),
        300_000,
    )
    seeds = torch.arange(0, 20_000, 4)
    before = torch.get_num_threads()
    results = []
    try:
        torch.set_num_threads(threads)
        for scan_fraction in (10**9, 1):
            monkeypatch.setattr(neighbor, "_SCAN_FRACTION", scan_fraction)
            gen = torch.Generator().manual_seed(3)
            results.append(NeighborSampler([6, 5, 4]).sample_blocks(graph, seeds, gen)[2])
    finally:
        torch.set_num_threads(before)
    for scanned, sorted_ in zip(*results, strict=True):
        assert torch.equal(scanned.src_nodes, sorted_.src_nodes)
        assert torch.equal(scanned.edge_index, sorted_.edge_index)
        new = scanned.src_nodes[scanned.num_dst_nodes :]
        assert bool((new[1:] > new[:-1]).all())  # increasing, hence distinct
        assert not bool(torch.isin(new, scanned.dst_nodes).any())
        used = torch.unique(scanned.edge_index[0])
        assert torch.equal(used[used >= scanned.num_dst_nodes],
                           torch.arange(scanned.num_dst_nodes, scanned.num_src_nodes))  # fmt: skip


def test_blocks_do_not_depend_on_the_thread_count():
    graph = random_graph(1)
    seeds = torch.arange(0, 3000, 3)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            gen = torch.Generator().manual_seed(4)
            results.append(NeighborSampler([8, -1, 6]).sample_blocks(graph, seeds, gen)[2])
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*results, strict=True):
        assert torch.equal(a.src_nodes, b.src_nodes) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.edge_ids, b.edge_ids)
        # adj_t from the sampler's row pointers: the transposed adjacency
        dense = torch.zeros(a.num_dst_nodes, a.num_src_nodes)
        dense.index_put_((a.edge_index[1], a.edge_index[0]), torch.ones(a.num_edges), True)
        assert torch.equal(a.adj_t.to_dense(), dense)
