"""The seed loader (graphemb.sampling.SeedLoader): batches partition the seeds, shuffles are
reproducible, ranks get equal batch counts and disjoint shares, prefetching and DataLoader
workers change nothing; on CUDA, prefetching and device moves. The blocks are held to the
edge list as oracle (``sampling_cases.EdgeList``), on both sampler paths."""

from __future__ import annotations

import math

import pytest
import torch
from sampling_cases import EdgeList, sampler_path, seeded  # noqa: F401 (an autouse fixture)

from graphemb.sampling import (
    Block,
    NeighborSampler,
    SeedLoader,
    sample_neighbors,
)


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
