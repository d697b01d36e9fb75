"""Neighbour sampling, blocks and the seed loader (graphemb.sampling).

* Invariants against the edge list as oracle: every sampled edge is the graph edge its id
  names, no edge twice per seed, exactly min(fanout, in-degree) per seed, DGL's block
  node-order convention, layer chaining, empty seeds, isolated nodes, parallel edges.
* Uniformity: chi-square tests (scipy) of whole subsets and of inclusion frequencies, for
  both of Floyd's variants (bitset and comparisons) and rows mixing them; on the dgl stack
  two-sample tests against ``dgl.sampling.sample_neighbors``. Every statistical test draws
  from a seeded generator, so it is deterministic; its threshold (p > 1e-3) is checked to
  reject a biased sampler (the first k edges, or Floyd without its fallback).
* Layers (dgl stack): PyG ``SAGEConv``/``GraphConv`` on our blocks (``edge_index`` and
  ``adj_t``) against DGL's ``SAGEConv``/``GraphConv`` on ``dgl.create_block`` of the same
  edges, weights copied; our relabelling against ``dgl.to_block``.
* Loader: batches partition the seeds, shuffles are reproducible, ranks get equal batch
  counts and disjoint shares, prefetching and DataLoader workers change nothing.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch
from helpers import DEVICES
from scipy import stats

from graphemb._compiled import DISABLE_VARIABLE, compiled_module
from graphemb.graph import Graph
from graphemb.sampling import (
    Block,
    NeighborSampler,
    SeedLoader,
    _floyd,
    _pieces,
    neighbor,
    sample_neighbors,
)

P_VALUE = 1e-3


@pytest.fixture(autouse=True, params=["compiled", "torch"])
def sampler_path(request, monkeypatch):
    """Every test runs on the compiled CPU sampler (graphemb_kernels) and on the pure-torch
    one (also the GPU path): both are held to the same oracles."""
    if request.param == "torch":
        monkeypatch.setenv(DISABLE_VARIABLE, "1")
    elif not hasattr(compiled_module(), "sample_blocks"):
        pytest.skip("the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)")
    else:
        monkeypatch.delenv(DISABLE_VARIABLE, raising=False)
    return request.param


def seeded(device, seed=0) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


class EdgeList:
    """A random multigraph and its edge list (the oracle): degrees from 0 to a hub of
    degree 300, parallel edges, self-loops, isolated nodes."""

    def __init__(self, device="cpu", seed=0, num_nodes=200):
        rng = np.random.default_rng(seed)
        n = num_nodes
        src = [rng.integers(0, n, 1500)]
        dst = [rng.integers(0, n - 20, 1500)]  # nodes n-20 .. n-1 have no in-edges
        src.append(rng.integers(0, n, 300))  # node 0: a hub (bitset and compare rows mixed)
        dst.append(np.zeros(300, dtype=np.int64))
        src.append(np.array([4, 4, 4, 4, 6]))  # parallel edges 4 -> 5, a self-loop 6 -> 6
        dst.append(np.array([5, 5, 5, 5, 6]))
        self.src, self.dst = np.concatenate(src), np.concatenate(dst)
        self.num_nodes = n
        self.graph = Graph.from_edges(self.src, self.dst, n, device=device)
        self.degree = np.bincount(self.dst, minlength=n)

    def check_edges(self, src, dst, edge_ids, seeds, fanout):
        """The sampled edges are graph edges, distinct per seed, min(fanout, degree) each,
        grouped by seed in seed order; fanout -1 gives every in-edge."""
        src, dst, edge_ids = (t.cpu().numpy() for t in (src, dst, edge_ids))
        seeds = seeds.cpu().numpy()
        np.testing.assert_array_equal(self.src[edge_ids], src)
        np.testing.assert_array_equal(self.dst[edge_ids], dst)
        position = {int(s): i for i, s in enumerate(seeds)}
        order = np.array([position[int(d)] for d in dst], dtype=np.int64)
        assert (np.diff(order) >= 0).all(), "edges not grouped by seed in seed order"
        for i, seed in enumerate(seeds):
            ids = edge_ids[order == i]
            expected = self.degree[seed] if fanout < 0 else min(fanout, self.degree[seed])
            assert len(ids) == expected, (seed, len(ids), expected)
            assert len(set(ids.tolist())) == len(ids), f"seed {seed} got an edge twice"
            if fanout < 0:
                assert sorted(ids.tolist()) == np.flatnonzero(self.dst == seed).tolist()

    def check_blocks(self, input_nodes, output_nodes, blocks, seeds, fanouts):
        """DGL's block conventions, and every block's edges as check_edges."""
        assert len(blocks) == len(fanouts)
        assert torch.equal(output_nodes, seeds) and torch.equal(blocks[-1].dst_nodes, seeds)
        assert torch.equal(input_nodes, blocks[0].src_nodes)
        for i, (block, fanout) in enumerate(zip(blocks, fanouts, strict=True)):
            if i + 1 < len(blocks):
                assert torch.equal(block.dst_nodes, blocks[i + 1].src_nodes)
            nodes = block.src_nodes.cpu()
            num_dst = block.num_dst_nodes
            assert len(set(nodes.tolist())) == nodes.numel(), "source nodes repeat"
            new = nodes[num_dst:]
            assert bool((new[1:] > new[:-1]).all()), "new source nodes not in increasing order"
            local_src, local_dst = block.edge_index.cpu()
            assert bool((local_dst[1:] >= local_dst[:-1]).all()), "edges not sorted by dst"
            assert local_dst.numel() == 0 or int(local_dst.max()) < num_dst
            # the sources are exactly the dst nodes and the sampled sources
            assert set(nodes.tolist()) == set(nodes[:num_dst].tolist()) | set(
                nodes[local_src].tolist()
            )
            self.check_edges(
                nodes[local_src], nodes[local_dst], block.edge_ids, nodes[:num_dst], fanout
            )


# ---------------------------------------------------------------------------- sample_neighbors
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fanout", [0, 1, 3, 8, 40, -1])
def test_sample_neighbors_invariants(device, fanout):
    edges = EdgeList(device)
    seeds = torch.randperm(edges.num_nodes, generator=seeded("cpu", fanout + 1)).to(device)
    src, dst, edge_ids = sample_neighbors(edges.graph, seeds, fanout, seeded(device))
    assert src.device.type == device and src.dtype == dst.dtype == edge_ids.dtype == torch.int64
    edges.check_edges(src, dst, edge_ids, seeds, fanout)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("slack", [0, 10**6])
@pytest.mark.parametrize("fanout", [3, 30])
def test_both_output_layouts(monkeypatch, device, slack, fanout):
    """Seeds get `fanout` slots each (dense) unless most would stay empty (segments): force
    each layout, for a fanout below and above most degrees."""
    monkeypatch.setattr(neighbor, "_DENSE_SLACK", slack)
    edges = EdgeList(device)
    seeds = torch.arange(edges.num_nodes, device=device)
    result = sample_neighbors(edges.graph, seeds, fanout, seeded(device))
    edges.check_edges(*result, seeds, fanout)


def test_sample_neighbors_repeated_seeds_are_sampled_independently():
    edges = EdgeList()
    seeds = torch.zeros(400, dtype=torch.int64)  # the hub, 400 times
    src, dst, edge_ids = sample_neighbors(edges.graph, seeds, 2, seeded("cpu"))
    assert dst.tolist() == [0] * 800
    pairs = edge_ids.reshape(400, 2)
    assert bool((pairs[:, 0] != pairs[:, 1]).all())
    assert len({tuple(sorted(p)) for p in pairs.tolist()}) > 300  # not one draw repeated


def test_sampling_is_reproducible_and_draws_fanout_numbers_per_seed():
    edges = EdgeList()
    seeds = torch.arange(edges.num_nodes)
    first = sample_neighbors(edges.graph, seeds, 5, seeded("cpu", 3))
    again = sample_neighbors(edges.graph, seeds, 5, seeded("cpu", 3))
    other = sample_neighbors(edges.graph, seeds, 5, seeded("cpu", 4))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[2], other[2])

    # O(fanout) random numbers per seed, whatever the degree: a hub of degree 300+ draws
    # as many as a node of degree 65 (both compare), degree 6 as many as 64 (bitsets)
    def state_after(degree):
        generator = seeded("cpu", 5)
        star = Graph.from_edges(torch.arange(1, degree + 1), torch.zeros(degree, dtype=torch.int64))
        sample_neighbors(star, torch.tensor([0]), 5, generator)
        return generator.get_state()

    assert torch.equal(state_after(65), state_after(3000))
    assert torch.equal(state_after(6), state_after(64))


# ---------------------------------------------------------------------------- uniformity
def replicated_node_graph(degree: int, copies: int) -> Graph:
    """``copies`` nodes 0 .. copies-1, each with in-edges from the sources
    copies .. copies+degree-1 in that order: one call samples ``copies`` independent draws,
    and ``src - copies`` is the offset drawn."""
    dst = torch.arange(copies).repeat_interleave(degree)
    src = copies + torch.arange(degree).repeat(copies)
    return Graph.from_edges(src, dst, copies + degree)


def offsets_of(src: torch.Tensor, copies: int, k: int) -> torch.Tensor:
    return (src - copies).reshape(copies, k).cpu()


def subset_counts(offsets: torch.Tensor, degree: int) -> np.ndarray:
    """How often each k-subset of range(degree) was drawn (all C(degree, k) cells)."""
    codes = (torch.ones_like(offsets) << offsets).sum(1)  # a subset's bitmask
    observed = Counter(codes.tolist())
    cells = [sum(1 << i for i in s) for s in _subsets(degree, offsets.shape[1])]
    assert set(observed) <= set(cells)
    return np.array([observed.get(code, 0) for code in cells])


def _subsets(n, k):
    from itertools import combinations

    return combinations(range(n), k)


def subsets_uniform_pvalue(offsets: torch.Tensor, degree: int) -> float:
    return stats.chisquare(subset_counts(offsets, degree)).pvalue


def inclusion_pvalue(offsets: torch.Tensor, degree: int) -> float:
    """Chi-square test that every offset is included with probability k / degree.

    Inclusion counts of a without-replacement sample are not multinomial: with R draws of
    k out of d, Var(c_j) = R p (1 - p) and the counts sum to R k, so on the sum-zero
    subspace their covariance is R (p - p2) I with p2 = k (k - 1) / (d (d - 1)).
    sum (c_j - R p)^2 / (R (p - p2)) is then chi-square with d - 1 degrees of freedom.
    """
    draws, k = offsets.shape
    counts = np.bincount(offsets.reshape(-1).numpy(), minlength=degree)
    p, p2 = k / degree, k * (k - 1) / (degree * (degree - 1))
    statistic = ((counts - draws * p) ** 2).sum() / (draws * (p - p2))
    return stats.chi2.sf(statistic, degree - 1)


def first_k(copies, degree, k):
    return torch.arange(k).repeat(copies, 1)


def floyd(copies, degree, k, seed=0, off_by_one=False):
    """Floyd's algorithm written out independently (the test's own); ``off_by_one`` draws
    t in [0, j) instead of [0, j], a plausible bug that still gives distinct offsets."""
    gen = torch.Generator().manual_seed(seed)
    chosen = torch.empty(copies, k, dtype=torch.int64)
    for i in range(k):
        j = degree - k + i
        t = torch.rand(copies, generator=gen, dtype=torch.float64) * (j if off_by_one else j + 1)
        t = t.long()
        clash = (chosen[:, :i] == t.unsqueeze(1)).any(1)
        chosen[:, i] = torch.where(clash, torch.full_like(t, j), t)
    return chosen


def test_the_uniformity_tests_pass_floyd_and_reject_biased_samplers():
    assert subsets_uniform_pvalue(floyd(8000, 6, 3), 6) > P_VALUE
    assert inclusion_pvalue(floyd(4000, 20, 15), 20) > P_VALUE
    assert subsets_uniform_pvalue(first_k(8000, 6, 3), 6) < 1e-12
    assert inclusion_pvalue(first_k(4000, 20, 15), 20) < 1e-12
    assert subsets_uniform_pvalue(floyd(8000, 6, 3, off_by_one=True), 6) < 1e-12
    assert inclusion_pvalue(floyd(4000, 20, 15, off_by_one=True), 20) < P_VALUE


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", ["bitset", "compare", "mixed", "mixed-chunks"])
def test_every_subset_is_equally_likely(monkeypatch, device, path):
    """Whole subsets (C(d, k) cells, 8000 draws each) of degrees 6 and 7 in one call."""
    if path == "compare":  # the variant of degrees above 64, here on small degrees
        monkeypatch.setattr(_floyd, "_BITSET_DEGREE", 0)
    elif path.startswith("mixed"):  # degree-6 rows use bitsets, degree-7 rows compare
        monkeypatch.setattr(_floyd, "_BITSET_DEGREE", 6)
    if path == "mixed-chunks":  # CPU rows in chunks of 777: chunks of one kind and of both
        monkeypatch.setattr(_floyd, "_SERIAL_ROWS", 777)
    copies = 8000
    # seeds 0..copies-1 have 6 in-edges, copies..2*copies-1 have 7; sources from 2*copies
    dst = torch.cat(
        [
            torch.arange(copies).repeat_interleave(6),
            torch.arange(copies, 2 * copies).repeat_interleave(7),
        ]
    )
    src = 2 * copies + torch.cat([torch.arange(6).repeat(copies), torch.arange(7).repeat(copies)])
    graph = Graph.from_edges(src, dst, 2 * copies + 7, device=device)
    for k in (2, 3):
        src, dst, _ = sample_neighbors(
            graph, torch.arange(2 * copies, device=device), k, seeded(device, k)
        )
        src, dst = src.cpu(), dst.cpu()
        for degree, rows in ((6, dst < copies), (7, dst >= copies)):
            offsets = (src[rows] - 2 * copies).reshape(copies, k)
            assert subsets_uniform_pvalue(offsets, degree) > P_VALUE, (degree, k)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("degree, k", [(20, 15), (64, 10), (65, 10), (3000, 5)])
def test_every_neighbour_is_included_with_probability_k_over_degree(device, degree, k):
    """Marginals for the bitset path (degree <= 64, 20 = 15 + 5 is where Floyd's fallback
    matters most) and the comparison path (a hub of degree 3000)."""
    copies = 4000 if degree < 1000 else 400
    graph = replicated_node_graph(degree, copies).to(device)
    src, _, _ = sample_neighbors(graph, torch.arange(copies, device=device), k, seeded(device))
    assert inclusion_pvalue(offsets_of(src, copies, k), degree) > P_VALUE


@pytest.mark.dgl
def test_same_distribution_as_dgl():
    """Two-sample tests against dgl.sampling.sample_neighbors (uniform, no replacement):
    whole subsets (multinomial counts: a plain contingency test) and inclusion counts
    (the contingency statistic scaled by (d - 1) / (d - k), see inclusion_pvalue)."""
    dgl = pytest.importorskip("dgl", reason="needs DGL (the dgl stack)")
    dgl.seed(0)
    for degree, k, copies in ((6, 3, 6000), (40, 10, 3000)):
        graph = replicated_node_graph(degree, copies)
        seeds = torch.arange(copies)
        src, dst = graph.edges()
        dgl_graph = dgl.graph((src, dst), num_nodes=graph.num_nodes)
        theirs_src, theirs_dst = dgl.sampling.sample_neighbors(dgl_graph, seeds, k).edges()
        theirs = (theirs_src[torch.argsort(theirs_dst, stable=True)] - copies).reshape(copies, k)
        ours = offsets_of(sample_neighbors(graph, seeds, k, seeded("cpu"))[0], copies, k)
        if degree == 6:
            table = np.stack([subset_counts(ours, degree), subset_counts(theirs, degree)])
            assert stats.chi2_contingency(table).pvalue > P_VALUE
            assert (
                stats.chi2_contingency(
                    np.stack([subset_counts(first_k(copies, degree, k), degree) + 1, table[1]])
                ).pvalue
                < 1e-12
            )  # the test can tell a biased sampler from DGL's
        else:
            table = np.stack(
                [np.bincount(o.reshape(-1).numpy(), minlength=degree) for o in (ours, theirs)]
            )
            statistic = stats.chi2_contingency(table).statistic * (degree - 1) / (degree - k)
            assert stats.chi2.sf(statistic, degree - 1) > P_VALUE
            assert inclusion_pvalue(theirs, degree) > P_VALUE  # DGL is uniform too


# ---------------------------------------------------------------------------- NeighborSampler
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fanouts", [[4], [3, 5], [10, -1, 2], [0, 3], [2, 2, 2, 2]])
def test_sample_blocks_conventions(device, fanouts):
    edges = EdgeList(device)
    seeds = torch.tensor([0, 5, 6, 199, 42, 7, 190], device=device)  # hub, parallel, isolated
    sampler = NeighborSampler(fanouts)
    result = sampler.sample_blocks(edges.graph, seeds, seeded(device))
    edges.check_blocks(*result, seeds, fanouts)
    again = sampler.sample_blocks(edges.graph, seeds, seeded(device))
    for block, same in zip(result[2], again[2], strict=True):
        assert torch.equal(block.src_nodes, same.src_nodes)
        assert torch.equal(block.edge_index, same.edge_index)
        assert torch.equal(block.edge_ids, same.edge_ids)


def test_relabelling_by_scan_and_by_sort_agree(monkeypatch):
    """Large frontiers mark-and-scan, small ones sort: both give the same blocks."""
    edges = EdgeList()
    seeds = torch.arange(0, 200, 3)
    blocks = {}
    for fraction in (1, 10**9):  # sort only; scan only
        monkeypatch.setattr(neighbor, "_SCAN_FRACTION", fraction)
        blocks[fraction] = NeighborSampler([5, 5]).sample_blocks(edges.graph, seeds, seeded("cpu"))
        edges.check_blocks(*blocks[fraction], seeds, [5, 5])
    for a, b in zip(blocks[1][2], blocks[10**9][2], strict=True):
        assert torch.equal(a.src_nodes, b.src_nodes) and torch.equal(a.edge_index, b.edge_index)


@pytest.mark.parametrize("slack", [0, 10**6])  # segment and dense layouts
def test_pieces_and_worker_threads_change_nothing(monkeypatch, slack):
    """Large CPU passes run in pieces spread over worker threads: with pieces of 7 rows on
    2 threads the blocks equal those of one piece on one thread, bit for bit (Floyd's
    chunks, which decide how the random numbers are drawn, stay as they are)."""
    monkeypatch.setattr(neighbor, "_DENSE_SLACK", slack)
    edges = EdgeList()
    seeds = torch.arange(0, 200, 2)
    results = []
    threads = torch.get_num_threads()
    try:
        for rows, num_threads in ((10**9, 1), (7, 2)):
            monkeypatch.setattr(_pieces, "PIECE_SIZE", rows)
            torch.set_num_threads(num_threads)
            sampler = NeighborSampler([4, -1, 3])
            results.append(sampler.sample_blocks(edges.graph, seeds, seeded("cpu")))
            results.append(sample_neighbors(edges.graph, seeds, 40, seeded("cpu")))
    finally:
        torch.set_num_threads(threads)
    (blocks, layer), (blocks_in_pieces, layer_in_pieces) = results[:2], results[2:]
    edges.check_blocks(*blocks_in_pieces, seeds, [4, -1, 3])
    for ours, again in zip(blocks[2], blocks_in_pieces[2], strict=True):
        assert torch.equal(ours.src_nodes, again.src_nodes)
        assert torch.equal(ours.edge_index, again.edge_index)
        assert torch.equal(ours.edge_ids, again.edge_ids)
    assert all(torch.equal(a, b) for a, b in zip(layer, layer_in_pieces, strict=True))


def test_sample_blocks_special_graphs():
    edges = EdgeList()
    sampler = NeighborSampler([3, 3])
    empty = torch.empty(0, dtype=torch.int64)
    input_nodes, output_nodes, blocks = sampler.sample_blocks(edges.graph, empty)
    assert input_nodes.numel() == output_nodes.numel() == 0
    assert [(b.num_src_nodes, b.num_dst_nodes, b.num_edges) for b in blocks] == [(0, 0, 0)] * 2

    isolated = torch.tensor([195, 190])  # no in-edges
    input_nodes, _, blocks = sampler.sample_blocks(edges.graph, isolated)
    assert input_nodes.tolist() == [195, 190] and all(b.num_edges == 0 for b in blocks)

    # parallel edges: four distinct edges 4 -> 5, one source node
    _, _, (block,) = NeighborSampler([-1]).sample_blocks(edges.graph, torch.tensor([5]))
    from_4 = block.edge_ids[block.src_nodes[block.edge_index[0]] == 4]
    assert sorted(from_4.tolist()) == np.flatnonzero((edges.src == 4) & (edges.dst == 5)).tolist()
    assert block.src_nodes.tolist().count(4) == 1
    _, _, (block,) = NeighborSampler([2]).sample_blocks(edges.graph, torch.tensor([5]))
    assert block.num_edges == 2 and len(set(block.edge_ids.tolist())) == 2


def test_sample_blocks_rejects_bad_input_and_changes_nothing():
    edges = EdgeList()
    sampler = NeighborSampler([3, 2])
    generator = seeded("cpu", 11)
    state = generator.get_state()
    bad = [
        (torch.tensor([3, 8, 3]), ValueError, "node 3 appears more than once"),
        (
            torch.tensor([3, 200]),
            ValueError,
            "node id 200 out of range \\[0, 200\\) at seeds\\[1\\]",
        ),
        (torch.tensor([-1, 2]), ValueError, "node id -1"),
        (torch.tensor([1.0, 2.0]), TypeError, "float"),
        (torch.tensor([True]), TypeError, "bool"),
        (torch.tensor([[1, 2]]), ValueError, "1-dimensional"),
        ([1, 2], TypeError, "tensor of node ids"),
        (
            torch.tensor([1, 2], device="meta"),
            ValueError,
            "seeds are on meta but the graph is on cpu",
        ),
    ]
    for seeds, error, message in bad:
        with pytest.raises(error, match=message):
            sampler.sample_blocks(edges.graph, seeds, generator)
    with pytest.raises(TypeError, match="torch.Generator"):
        sampler.sample_blocks(edges.graph, torch.tensor([1]), generator=3)
    with pytest.raises(TypeError, match="graphemb Graph"):
        sampler.sample_blocks("graph", torch.tensor([1]))
    assert torch.equal(generator.get_state(), state), "a refused call drew random numbers"
    # the scratch arrays are clean: the same blocks as a fresh sampler
    ours = sampler.sample_blocks(edges.graph, torch.tensor([0, 9]), seeded("cpu"))
    fresh = NeighborSampler([3, 2]).sample_blocks(edges.graph, torch.tensor([0, 9]), seeded("cpu"))
    for a, b in zip(ours[2], fresh[2], strict=True):
        assert torch.equal(a.src_nodes, b.src_nodes) and torch.equal(a.edge_index, b.edge_index)
    with pytest.raises(ValueError, match="fanout = -2"):
        sample_neighbors(edges.graph, torch.tensor([1]), -2)


@pytest.mark.parametrize(
    "fanouts, error, message",
    [
        ([5, -2], ValueError, "fanouts\\[1\\] = -2"),
        ([1.5], TypeError, "fanouts\\[0\\] must be an integer"),
        ([True], TypeError, "fanouts\\[0\\] must be an integer"),
        ([], ValueError, "at least one layer"),
        ("15", TypeError, "sequence of integers"),
        (15, TypeError, "sequence of integers"),
    ],
)
def test_neighbor_sampler_rejects_bad_fanouts(fanouts, error, message):
    with pytest.raises(error, match=message):
        NeighborSampler(fanouts)


def test_neighbor_sampler_accepts_numpy_fanouts_and_pickles():
    import pickle

    sampler = NeighborSampler(np.array([3, -1]).tolist())
    assert NeighborSampler((np.int64(3), np.int32(-1))).fanouts == sampler.fanouts == [3, -1]
    edges = EdgeList()
    sampler.sample_blocks(edges.graph, torch.tensor([1]))  # builds scratch arrays
    copy = pickle.loads(pickle.dumps(sampler))
    assert copy.fanouts == [3, -1] and repr(copy) == "NeighborSampler(fanouts=[3, -1])"
    edges.check_blocks(
        *copy.sample_blocks(edges.graph, torch.tensor([1, 2])), torch.tensor([1, 2]), [3, -1]
    )


def test_block_adj_t_is_the_transposed_adjacency():
    edges = EdgeList()
    _, _, blocks = NeighborSampler([4, 4]).sample_blocks(edges.graph, torch.arange(0, 60, 7))
    for block in blocks:
        dense = torch.zeros(block.num_dst_nodes, block.num_src_nodes)
        dense.index_put_(
            (block.edge_index[1], block.edge_index[0]), torch.ones(block.num_edges), accumulate=True
        )
        assert torch.equal(block.adj_t.to_dense(), dense)
        assert torch.equal(block.in_degrees(), dense.sum(1).long())


@pytest.mark.parametrize("num_src, num_dst, num_edges", [(9, 4, 30), (50, 50, 400), (6, 2, 0)])
@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_block_aggregation_transpose_is_the_dense_transpose(num_src, num_dst, num_edges, reduce):
    """Against a dense float64 oracle: repeated edges, sources without edges, no edges."""
    generator = torch.Generator().manual_seed(num_edges)
    edge_index = torch.stack(
        [
            torch.randint(0, num_src, (num_edges,), generator=generator),
            torch.randint(0, num_dst, (num_edges,), generator=generator),
        ]
    )
    block = Block(torch.arange(num_src) * 3, num_dst, edge_index)
    dense = torch.zeros(num_dst, num_src, dtype=torch.float64)
    dense.index_put_(
        (edge_index[1], edge_index[0]), torch.ones(num_edges, dtype=torch.float64), accumulate=True
    )
    if reduce == "mean":
        dense /= dense.sum(1, keepdim=True).clamp(min=1)
    transpose = block.aggregation_transpose(reduce, torch.float64)
    assert transpose.shape == (num_src, num_dst)
    torch.testing.assert_close(transpose.to_dense(), dense.T, rtol=1e-12, atol=0.0)
    # each source's destinations in edge order, as a stable sort by source gives them
    order = torch.sort(edge_index[0], stable=True).indices
    assert torch.equal(transpose.col_indices(), edge_index[1][order])
    narrow = Block(torch.arange(num_src) * 3, num_dst, edge_index.int())  # int32 ids too
    narrow_transpose = narrow.aggregation_transpose(reduce, torch.float64)
    torch.testing.assert_close(narrow_transpose.to_dense(), dense.T, rtol=1e-12, atol=0.0)


def test_block_edge_ids_are_gathered_when_read_and_can_be_set():
    edges = EdgeList()
    _, _, (block,) = NeighborSampler([3]).sample_blocks(edges.graph, torch.arange(0, 50, 5))
    src = block.src_nodes[block.edge_index[0]]
    dst = block.dst_nodes[block.edge_index[1]]
    ids = block.edge_ids  # gathered now
    assert torch.equal(torch.from_numpy(edges.src)[ids], src)
    assert torch.equal(torch.from_numpy(edges.dst)[ids], dst)
    assert block.edge_ids is ids  # once
    block.edge_ids = None
    assert block.edge_ids is None
    plain = Block(torch.tensor([7, 3]), 1, torch.tensor([[1], [0]]), torch.tensor([42]))
    assert plain.edge_ids.tolist() == [42] and plain.to("cpu") is plain
    assert repr(plain) == "Block(num_src_nodes=2, num_dst_nodes=1, num_edges=1, device=cpu)"


# ---------------------------------------------------------------------------- layers (dgl stack)
@pytest.mark.dgl
def test_pyg_layers_on_our_blocks_equal_dgl_layers_on_dgl_blocks():
    dgl = pytest.importorskip("dgl", reason="needs DGL (the dgl stack)")
    pytest.importorskip("torch_geometric", reason="needs torch_geometric")
    import dgl.nn as dglnn
    from torch_geometric.nn import GraphConv, SAGEConv

    torch.manual_seed(0)
    edges = EdgeList()
    seeds = torch.tensor([0, 5, 6, 199, 42, 7, 190, 11])
    _, _, blocks = NeighborSampler([6, 4]).sample_blocks(edges.graph, seeds, seeded("cpu"))
    for block in blocks:
        src, dst = block.edge_index
        theirs = dgl.create_block(
            (src, dst), num_src_nodes=block.num_src_nodes, num_dst_nodes=block.num_dst_nodes
        )
        x = torch.randn(block.num_src_nodes, 16, dtype=torch.float64)
        x_dst = x[: block.num_dst_nodes]

        dgl_sage = dglnn.SAGEConv(16, 8, "mean").double()
        sage = SAGEConv(16, 8, aggr="mean").double()
        with torch.no_grad():
            sage.lin_l.weight.copy_(dgl_sage.fc_neigh.weight)
            sage.lin_l.bias.copy_(dgl_sage.fc_self.bias)  # DGL 2.1: the bias is fc_self's
            sage.lin_r.weight.copy_(dgl_sage.fc_self.weight)
        expected = dgl_sage(theirs, (x, x_dst))
        torch.testing.assert_close(sage((x, x_dst), block.edge_index), expected)
        adj_t = block.adj_t.to(torch.float64)
        torch.testing.assert_close(sage((x, x_dst), adj_t), expected)

        dgl_sum = dglnn.GraphConv(16, 8, norm="none", allow_zero_in_degree=True).double()
        graph_conv = GraphConv(16, 8, aggr="add").double()
        with torch.no_grad():
            graph_conv.lin_rel.weight.copy_(dgl_sum.weight.t())
            graph_conv.lin_rel.bias.copy_(dgl_sum.bias)
            graph_conv.lin_root.weight.zero_()  # DGL's GraphConv has no root term
        torch.testing.assert_close(
            graph_conv((x, x_dst), block.edge_index), dgl_sum(theirs, (x, x_dst))
        )


@pytest.mark.dgl
def test_relabelling_matches_dgl_to_block():
    dgl = pytest.importorskip("dgl", reason="needs DGL (the dgl stack)")
    edges = EdgeList()
    seeds = torch.tensor([0, 5, 6, 199, 42, 7, 190, 11])
    _, _, (block,) = NeighborSampler([5]).sample_blocks(edges.graph, seeds, seeded("cpu"))
    src = block.src_nodes[block.edge_index[0]]
    dst = block.dst_nodes[block.edge_index[1]]
    frontier = dgl.graph((src, dst), num_nodes=edges.num_nodes)
    theirs = dgl.to_block(frontier, dst_nodes=seeds)
    their_src = theirs.srcdata[dgl.NID]
    assert torch.equal(their_src[: theirs.num_dst_nodes()], block.dst_nodes)
    assert sorted(their_src.tolist()) == sorted(block.src_nodes.tolist())
    their_u, their_v = theirs.edges()
    ours = Counter(zip(src.tolist(), dst.tolist(), strict=True))
    assert Counter(zip(their_src[their_u].tolist(), seeds[their_v].tolist(), strict=True)) == ours


# ---------------------------------------------------------------------------- SeedLoader
def flat_outputs(loader) -> list[int]:
    return [int(v) for _, output_nodes, _ in loader for v in output_nodes]


def test_loader_batches_partition_the_seeds():
    edges = EdgeList()
    seeds = torch.randperm(200, generator=seeded("cpu"))[:103]
    fanouts = [3, 2]
    loader = SeedLoader(edges.graph, seeds, NeighborSampler(fanouts), 10)
    assert len(loader) == 11
    sizes = []
    for input_nodes, output_nodes, blocks in loader:
        edges.check_blocks(input_nodes, output_nodes, blocks, output_nodes, fanouts)
        sizes.append(output_nodes.numel())
    assert sizes == [10] * 10 + [3]
    assert flat_outputs(loader) == seeds.tolist()  # no shuffle: in the given order

    dropped = SeedLoader(edges.graph, seeds, NeighborSampler(fanouts), 10, drop_last=True)
    assert len(dropped) == 10 and flat_outputs(dropped) == seeds[:100].tolist()
    mask = torch.zeros(200, dtype=torch.bool)
    mask[seeds] = True
    from_mask = SeedLoader(edges.graph, mask, NeighborSampler(fanouts), 10)
    assert flat_outputs(from_mask) == sorted(seeds.tolist())


def test_loader_shuffle_is_reproducible_and_changes_with_the_epoch():
    edges = EdgeList()
    seeds = torch.arange(150)

    def make(seed=0):
        return SeedLoader(edges.graph, seeds, NeighborSampler([3]), 16, shuffle=True, seed=seed)

    loader = make()
    epoch0 = flat_outputs(loader)
    assert sorted(epoch0) == seeds.tolist() and epoch0 != seeds.tolist()
    assert flat_outputs(loader) == epoch0 == flat_outputs(make())  # set_epoch not called
    loader.set_epoch(1)
    epoch1 = flat_outputs(loader)
    assert sorted(epoch1) == seeds.tolist() and epoch1 != epoch0
    assert flat_outputs(make(seed=1)) != epoch0
    loader.set_epoch(0)
    # the whole batch (sampled blocks too) is a function of (seed, epoch, rank, batch)
    for (a_in, _, a_blocks), (b_in, _, b_blocks) in zip(loader, make(), strict=True):
        assert torch.equal(a_in, b_in)
        assert all(
            torch.equal(a.edge_ids, b.edge_ids) for a, b in zip(a_blocks, b_blocks, strict=True)
        )


@pytest.mark.parametrize("num_seeds", [120, 121, 7])
@pytest.mark.parametrize("world_size", [2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_loader_ranks_get_equal_batches_and_disjoint_shares(num_seeds, world_size, drop_last):
    edges = EdgeList()
    seeds = torch.randperm(200, generator=seeded("cpu", 1))[:num_seeds]
    batch_size = 8

    def make(rank, size, batch):
        return SeedLoader(
            edges.graph,
            seeds,
            NeighborSampler([2]),
            batch,
            shuffle=True,
            drop_last=drop_last,
            rank=rank,
            world_size=size,
            seed=5,
        )

    loaders = [make(rank, world_size, batch_size) for rank in range(world_size)]
    batches = [[out.tolist() for _, out, _ in loader] for loader in loaders]
    counts = {len(loader) for loader in loaders} | {len(b) for b in batches}
    assert len(counts) == 1, "ranks disagree on the number of batches"
    sizes = {tuple(len(b) for b in rank_batches) for rank_batches in batches}
    assert len(sizes) == 1, "ranks disagree on batch sizes"
    taken = [v for rank_batches in batches for batch in rank_batches for v in batch]
    if drop_last:
        assert len(taken) == len(set(taken)), "shares overlap"
        assert len(taken) == num_seeds // (world_size * batch_size) * world_size * batch_size
    else:
        assert set(taken) == set(seeds.tolist()), "some seeds are never visited"
        assert len(taken) - len(set(taken)) == -num_seeds % world_size  # padding only
        if num_seeds % world_size == 0:
            assert len(taken) == len(set(taken))
    # the ranks' b-th batches together are one process's b-th batch of world_size * batch_size
    single = [out.tolist() for _, out, _ in make(0, 1, world_size * batch_size)]
    joined = [
        sorted(v for rank_batches in batches for v in rank_batches[b])
        for b in range(len(batches[0]))
    ]
    if drop_last or num_seeds % world_size == 0:
        assert joined == [sorted(b) for b in single]
    else:  # the last batch also holds the padding: the order's first seeds, again
        padding = single[0][: -num_seeds % world_size]
        assert joined[:-1] == [sorted(b) for b in single[:-1]]
        assert joined[-1] == sorted(single[-1] + padding)


def test_loader_prefetch_and_dataloader_workers_change_nothing():
    edges = EdgeList()
    seeds = torch.arange(0, 200, 2)

    def make(prefetch=False):
        return SeedLoader(
            edges.graph, seeds, NeighborSampler([4, 3]), 12, shuffle=True, prefetch=prefetch, seed=3
        )

    def flat(batches):
        out = []
        for input_nodes, output_nodes, blocks in batches:
            out += [input_nodes, output_nodes]
            for block in blocks:
                out += [block.src_nodes, block.edge_index, block.edge_ids]
        return out

    expected = flat(make())
    for batches in (
        make(prefetch=True),
        torch.utils.data.DataLoader(make(), batch_size=None),
        torch.utils.data.DataLoader(make(), batch_size=None, num_workers=2),
    ):
        got = flat(batches)
        assert len(got) == len(expected)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    # abandoning a prefetching iteration half way is fine
    iterator = iter(make(prefetch=True))
    next(iterator)
    iterator.close()
    assert flat(make(prefetch=True)) and len(list(make(prefetch=True))) == math.ceil(100 / 12)


def test_loader_takes_rank_and_world_size_from_torch_distributed(tmp_path):
    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        loader = SeedLoader(EdgeList().graph, torch.arange(10), NeighborSampler([1]), 4)
        assert (loader.rank, loader.world_size) == (0, 1)
    finally:
        dist.destroy_process_group()


def test_loader_rejects_bad_input():
    graph = EdgeList().graph
    sampler = NeighborSampler([2])
    bad = [
        (dict(seeds=torch.tensor([1, 2, 1])), ValueError, "node 1 appears more than once"),
        (dict(seeds=torch.tensor([1, 200])), ValueError, "node id 200"),
        (dict(seeds=[1.5]), TypeError, "integer node ids"),
        (dict(seeds=torch.tensor([1.5])), TypeError, "integer node ids"),
        (dict(seeds=torch.tensor([[1, 2]])), ValueError, "1-dimensional"),
        (dict(seeds=torch.ones(5, dtype=torch.bool)), ValueError, "mask must have shape"),
        (dict(batch_size=0), ValueError, "batch_size must be an integer >= 1"),
        (dict(batch_size=2.0), ValueError, "batch_size"),
        (dict(rank=2, world_size=2), ValueError, "rank = 2 must lie in"),
        (dict(rank=1), ValueError, "give both rank and world_size"),
        (dict(world_size=0, rank=0), ValueError, "world_size"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(sampler=object()), TypeError, "sample_blocks"),
        (dict(graph="g"), TypeError, "graphemb Graph"),
    ]
    for change, error, message in bad:
        arguments = dict(graph=graph, seeds=torch.arange(10), sampler=sampler, batch_size=4)
        arguments.update(change)
        with pytest.raises(error, match=message):
            SeedLoader(**arguments)
    loader = SeedLoader(graph, torch.arange(10), sampler, 4)
    with pytest.raises(ValueError, match="epoch"):
        loader.set_epoch(-1)
    assert loader.epoch == 0
    assert isinstance(next(iter(loader))[2][0], Block)


# ---------------------------------------------------------------------------- CUDA
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_loader_prefetch_and_device_moves():
    edges = EdgeList("cuda")
    cpu_edges = EdgeList("cpu")
    seeds = torch.arange(0, 200, 3)
    fanouts = [5, 3]

    def make(graph, **options):
        return SeedLoader(graph, seeds, NeighborSampler(fanouts), 16, shuffle=True, **options)

    plain = list(make(edges.graph))
    prefetched = list(make(edges.graph, prefetch=True))
    for (a_in, _a_out, a_blocks), (b_in, b_out, b_blocks) in zip(plain, prefetched, strict=True):
        edges.check_blocks(b_in, b_out, b_blocks, b_out, fanouts)
        assert torch.equal(a_in, b_in) and a_in.device.type == "cuda"
        assert all(
            torch.equal(a.edge_ids, b.edge_ids) for a, b in zip(a_blocks, b_blocks, strict=True)
        )
    # sampled on CPU, delivered on the GPU (with and without prefetch)
    for prefetch in (False, True):
        for input_nodes, output_nodes, blocks in make(
            cpu_edges.graph, device="cuda", prefetch=prefetch
        ):
            assert input_nodes.device.type == "cuda"
            assert all(
                b.src_nodes.device.type == b.edge_index.device.type == "cuda" for b in blocks
            )
            cpu_edges.check_blocks(
                input_nodes.cpu(),
                output_nodes.cpu(),
                [b.to("cpu") for b in blocks],
                output_nodes.cpu(),
                fanouts,
            )


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_generator_and_seeds_must_be_on_the_graph_device():
    edges = EdgeList("cuda")
    with pytest.raises(ValueError, match="generator is on cpu"):
        sample_neighbors(edges.graph, torch.tensor([1], device="cuda"), 2, seeded("cpu"))
    with pytest.raises(ValueError, match="seeds are on cpu"):
        NeighborSampler([2]).sample_blocks(edges.graph, torch.tensor([1]))
