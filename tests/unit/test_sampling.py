"""Neighbour sampling and blocks (graphemb.sampling): sample_neighbors and NeighborSampler.

* Invariants against the edge list as oracle: every sampled edge is the graph edge its id
  names, no edge twice per seed, exactly min(fanout, in-degree) per seed, DGL's block
  node-order convention, layer chaining, empty seeds, isolated nodes, parallel edges.
* Layers (dgl stack): PyG ``SAGEConv``/``GraphConv`` on our blocks (``edge_index`` and
  ``adj_t``) against DGL's ``SAGEConv``/``GraphConv`` on ``dgl.create_block`` of the same
  edges, weights copied; our relabelling against ``dgl.to_block``.

Uniformity of the draws: ``test_sampling_uniformity.py``; the seed loader:
``test_seed_loader.py``. Every test runs on both sampler paths (``sampling_cases``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from helpers import DEVICES
from sampling_cases import EdgeList, sampler_path, seeded  # noqa: F401 (an autouse fixture)

from graphemb.graph import Graph
from graphemb.sampling import (
    Block,
    NeighborSampler,
    _pieces,
    neighbor,
    sample_neighbors,
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
