"""The synthetic graphs of graphemb.datasets: the stochastic block model's determinism
(per seed, and across numpy/torch versions by a pinned digest), sizes, edges, community
structure, splits and argument checks.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
import torch
from helpers import edge_pairs

from graphemb.datasets import PlanetoidDataset, SyntheticGraph, stochastic_block_model

# ------------------------------------------------------------- stochastic block model


def _fields(graph) -> dict:
    return {f.name: getattr(graph, f.name) for f in dataclasses.fields(graph)}


def _same_graph(a: SyntheticGraph, b: SyntheticGraph) -> bool:
    fa, fb = _fields(a), _fields(b)
    return fa.keys() == fb.keys() and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
        for x, y in zip(fa.values(), fb.values(), strict=True)
    )


def test_sbm_is_deterministic_per_seed():
    first = stochastic_block_model(5_000, 5, seed=7)
    assert _same_graph(first, stochastic_block_model(5_000, 5, seed=7))
    other = stochastic_block_model(5_000, 5, seed=8)
    assert not torch.equal(first.labels, other.labels)
    assert first.src.shape != other.src.shape or not torch.equal(first.src, other.src)


# sha256 of (labels, src, dst, train_idx, val_idx, test_idx) as little-endian int64 for
# stochastic_block_model(1_000, 4, avg_degree=6.0, intra_fraction=0.7, seed=123).
SBM_DIGEST = "9460e9eefdf30f36a8487eb4e7f6578d2b5dbd4772b68d1c3d53b72356b87a43"


def test_sbm_is_identical_across_numpy_and_torch_versions():
    # Pinned digest: the suite runs under numpy 1.26 / torch 2.2 and numpy 2.x / torch
    # 2.13, so equality with one constant shows both stacks build the same graph.
    graph = stochastic_block_model(1_000, 4, avg_degree=6.0, intra_fraction=0.7, seed=123)
    digest = hashlib.sha256()
    tensors = (graph.labels, graph.src, graph.dst, graph.train_idx, graph.val_idx, graph.test_idx)
    for tensor in tensors:
        digest.update(tensor.numpy().astype("<i8").tobytes())
    assert digest.hexdigest() == SBM_DIGEST


def test_sbm_sizes_labels_and_balanced_communities():
    graph = stochastic_block_model(10_001, 7, avg_degree=12.0, seed=3)
    assert (graph.num_nodes, graph.num_classes, graph.features) == (10_001, 7, None)
    assert graph.labels.shape == (10_001,) and graph.labels.dtype == torch.int64
    sizes = torch.bincount(graph.labels, minlength=7)
    assert sizes.sum() == 10_001 and int(sizes.max() - sizes.min()) <= 1
    assert graph.src.dtype == graph.dst.dtype == torch.int64
    assert 0 <= int(graph.src.min()) and int(graph.src.max()) < graph.num_nodes
    # round(N * d / 2) undirected draws, both directions, minus rare loops/duplicates.
    assert 0.99 * 10_001 * 12.0 <= graph.num_edges <= 10_001 * 12.0 + 1


def test_sbm_edges_are_symmetric_without_loops_or_duplicates():
    graph = stochastic_block_model(3_000, 3, avg_degree=20.0, seed=5)
    pairs = edge_pairs(graph.src, graph.dst)
    assert all(u != v for u, v in pairs)
    assert len(set(pairs)) == len(pairs)
    assert set(pairs) == {(v, u) for u, v in pairs}
    assert pairs == sorted(pairs)


@pytest.mark.parametrize("intra_fraction", [0.0, 0.3, 0.8, 1.0])
def test_sbm_intra_community_edge_fraction(intra_fraction):
    graph = stochastic_block_model(
        20_000, 5, avg_degree=10.0, intra_fraction=intra_fraction, seed=11
    )
    same = (graph.labels[graph.src] == graph.labels[graph.dst]).double().mean().item()
    # ~100k independent draws: the standard error is below 0.0016; 0.01 is > 6 sigma.
    assert abs(same - intra_fraction) < 0.01


def test_sbm_splits_are_disjoint_and_cover_all_nodes():
    graph = stochastic_block_model(1_000, 4, seed=2, train_fraction=0.25, val_fraction=0.15)
    sizes = (graph.train_idx.numel(), graph.val_idx.numel(), graph.test_idx.numel())
    assert sizes == (250, 150, 600)
    combined = torch.cat((graph.train_idx, graph.val_idx, graph.test_idx))
    assert torch.equal(combined.sort().values, torch.arange(1_000))
    assert (graph.train_mask.long() + graph.val_mask.long() + graph.test_mask.long() == 1).all()
    assert int(graph.train_idx.max()) > 250, "train split should be random, not a prefix"


def test_sbm_one_million_nodes():
    # Vectorised generation: about a second on 2 CPU cores (not timed here).
    graph = stochastic_block_model(1_000_000, 10, avg_degree=10.0, seed=0)
    assert graph.num_nodes == 1_000_000 and graph.labels.shape == (1_000_000,)
    assert 0.999 * 10_000_000 <= graph.num_edges <= 10_000_000
    assert int(graph.labels.max()) == 9 and bool((graph.src != graph.dst).all())


@pytest.mark.parametrize(
    "kwargs, bad",
    [
        (dict(num_nodes=0, num_communities=1), "num_nodes"),
        (dict(num_nodes=10, num_communities=11), "num_communities"),
        (dict(num_nodes=10, num_communities=0), "num_communities"),
        (dict(num_nodes=10, num_communities=2, avg_degree=-1.0), "avg_degree"),
        (dict(num_nodes=10, num_communities=2, intra_fraction=1.5), "intra_fraction"),
        (dict(num_nodes=10, num_communities=2, train_fraction=-0.1), "train_fraction"),
        (
            dict(num_nodes=10, num_communities=2, train_fraction=0.6, val_fraction=0.5),
            "val_fraction",
        ),
    ],
)
def test_sbm_rejects_bad_arguments(kwargs, bad):
    with pytest.raises(ValueError, match=bad):
        stochastic_block_model(**kwargs)


def test_synthetic_and_planetoid_share_field_names():
    planetoid_fields = {f.name for f in dataclasses.fields(PlanetoidDataset)}
    synthetic_fields = {f.name for f in dataclasses.fields(SyntheticGraph)}
    assert synthetic_fields <= planetoid_fields
