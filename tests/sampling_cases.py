"""Cases the sampling tests share (tests/unit/test_sampling*.py, test_seed_loader.py,
test_walks*.py): both sampler paths and both walker paths as fixtures, seeded generators,
and a random multigraph with its edge list as the oracle."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphemb._compiled import DISABLE_VARIABLE, compiled_module
from graphemb.graph import Graph

P_VALUE = 1e-3


def _run_on(path: str, function: str, monkeypatch) -> str:
    """The compiled kernels' ``function`` (``path == "compiled"``) or the pure-torch path."""
    if path == "torch":
        monkeypatch.setenv(DISABLE_VARIABLE, "1")
    elif not hasattr(compiled_module(), function):
        pytest.skip("the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)")
    else:
        monkeypatch.delenv(DISABLE_VARIABLE, raising=False)
    return path


@pytest.fixture(autouse=True, params=["compiled", "torch"])
def sampler_path(request, monkeypatch):
    """Every test runs on the compiled CPU sampler (graphemb_kernels) and on the pure-torch
    one (also the GPU path): both are held to the same oracles."""
    return _run_on(request.param, "sample_blocks", monkeypatch)


@pytest.fixture(params=["compiled", "torch"])
def walker_path(request, monkeypatch):
    """A walks test on the compiled CPU walker and on the pure-torch one (also the GPU
    path): both are held to the same oracles."""
    return _run_on(request.param, "random_walks", monkeypatch)


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
