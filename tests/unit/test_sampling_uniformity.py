"""Uniformity of the neighbour sampler's draws: chi-square tests (scipy) of whole subsets
and of inclusion frequencies, for both of Floyd's variants (bitset and comparisons) and rows
mixing them; on the dgl stack two-sample tests against ``dgl.sampling.sample_neighbors``.
Every statistical test draws from a seeded generator, so it is deterministic; its threshold
(p > 1e-3) is checked to reject a biased sampler (the first k edges, or Floyd without its
fallback)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from helpers import DEVICES
from sampling_cases import P_VALUE, sampler_path, seeded  # noqa: F401 (an autouse fixture)
from scipy import stats

from graphemb.graph import Graph
from graphemb.sampling import (
    _floyd,
    sample_neighbors,
)


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
