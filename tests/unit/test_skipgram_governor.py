"""The compiled trainer's thread governor against simulated machines: which thread count
each chunk gets, and the time that saves against always running every thread."""

from __future__ import annotations

import pytest
import torch

from graphemb.graph import Graph
from graphemb.skipgram import SkipGramOptions, train_node_embeddings
from graphemb.skipgram.backends import compiled_kernel
from graphemb.skipgram.backends.governor import ThreadGovernor
from graphemb.skipgram.corpus import Corpus


def drive(governor: ThreadGovernor, rate, chunks: int, products: int = 1_000_000):
    """Run ``chunks`` chunks on a simulated machine whose throughput (products per second)
    is ``rate(threads, chunk)``; return the thread counts chosen and the seconds taken."""
    chosen, seconds = [], 0.0
    for chunk in range(chunks):
        threads = governor.threads()
        took = products / rate(threads, chunk)
        governor.record(threads, products, took)
        chosen.append(threads)
        seconds += took
    return chosen, seconds


def episode_machine(threads: int, chunk: int) -> float:
    """Two threads 1.4x one thread, except chunks 20..39 where they contend (0.35x)."""
    if threads == 1:
        return 1.0
    return 0.35 if 20 <= chunk < 40 else 1.4


def test_one_worker_is_never_governed():
    chosen, _ = drive(ThreadGovernor(1, 50), episode_machine, 50)
    assert chosen == [1] * 50


def test_threads_outside_an_episode_one_thread_inside():
    chosen, seconds = drive(ThreadGovernor(2, 80), episode_machine, 80)
    assert chosen[2] == 1  # the one calibration chunk
    # Back on two threads at most `longest_retry` (8) chunks after the episode.
    outside = chosen[3:20] + chosen[48:]
    assert outside.count(2) == len(outside)
    assert chosen[20:40].count(1) >= 14  # the episode: mostly one thread
    always = sum(1e6 / episode_machine(2, c) for c in range(80))
    # Every chunk of the episode on one thread would take 1e6 / 1.0 instead of 1e6 / 0.35.
    assert seconds < 0.75 * always


def test_a_machine_where_threads_never_help_runs_one():
    chosen, _ = drive(
        ThreadGovernor(4, 200), lambda threads, chunk: 1.0 if threads == 1 else 0.8, 200
    )
    assert chosen[100:].count(1) >= 85  # a retry of the threads every 8 chunks


def test_a_machine_where_threads_always_help_keeps_them():
    chosen, _ = drive(
        ThreadGovernor(2, 200), lambda threads, chunk: 1.0 if threads == 1 else 1.7, 200
    )
    assert chosen.count(1) == 1  # the calibration chunk alone


def test_short_runs_are_not_calibrated():
    chosen, _ = drive(ThreadGovernor(2, 3), lambda threads, chunk: 1.0 if threads == 1 else 1.7, 3)
    assert chosen == [2, 2, 2]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(workers=0, chunks=3),
        dict(workers=2, chunks=3, slowdown=1.0),
        dict(workers=2, chunks=3, retry=0),
    ],
)
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="need workers >= 1"):
        ThreadGovernor(**kwargs)


@pytest.mark.skipif(
    compiled_kernel() is None, reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)"
)
def test_the_trainer_runs_each_chunk_on_the_governors_thread_count(monkeypatch):
    """Every chunk on one thread (the governor's choice) gives exactly the one-thread run,
    which depends only on the seed."""
    gen = torch.Generator().manual_seed(0)
    src, dst = torch.randint(40, (2, 200), generator=gen)
    graph = Graph.from_edges(torch.cat([src, dst]), torch.cat([dst, src]), 40)
    kw = dict(
        dimensions=8,
        walk_length=10,
        num_walks=4,
        window=3,
        backend="compiled",
        seed=3,
        chunk_walks=16,
    )
    single = train_node_embeddings(graph, workers=1, **kw)
    monkeypatch.setattr(ThreadGovernor, "threads", lambda self: 1)
    assert torch.equal(train_node_embeddings(graph, workers=2, **kw), single)


def _ring(num_nodes: int) -> Graph:
    nodes = torch.arange(num_nodes)
    ahead = (nodes + 1) % num_nodes
    return Graph.from_edges(torch.cat([nodes, ahead]), torch.cat([ahead, nodes]), num_nodes)


@pytest.mark.parametrize("num_nodes, chunk_walks", [(40, 16), (48, 16), (5, 16)])
def test_chunk_count_is_the_count_chunks_yields(num_nodes, chunk_walks):
    """One owner of the chunk arithmetic: Corpus.count is what chunks() reports and yields."""
    options = SkipGramOptions(walk_length=10, num_walks=3, epochs=2, chunk_walks=chunk_walks)
    corpus = Corpus(_ring(num_nodes), options)
    drawn = list(corpus.chunks())
    assert corpus.count == -(-num_nodes // chunk_walks) * 6
    assert len(drawn) == corpus.count
    assert {chunk.count for chunk in drawn} == {corpus.count}
    assert [chunk.index for chunk in drawn] == list(range(corpus.count))


def test_every_round_starts_one_walk_from_every_node_in_its_own_order():
    options = SkipGramOptions(walk_length=3, num_walks=3, chunk_walks=16, seed=5)
    corpus = Corpus(_ring(50), options)
    # (cloned: the next chunk is written into the same buffer)
    starts = torch.cat([chunk.walks[:, 0].clone() for chunk in corpus.chunks()]).view(3, 50)
    for order in starts:
        assert torch.equal(order.sort().values, torch.arange(50))
    assert not torch.equal(starts[0], starts[1]) and not torch.equal(starts[1], starts[2])
    again = torch.cat([chunk.walks[:, 0].clone() for chunk in corpus.chunks()]).view(3, 50)
    assert torch.equal(again, starts)  # seeded


@pytest.mark.parametrize("world_size", [2, 3])
def test_each_rank_starts_its_tensor_split_share_of_every_chunk(world_size):
    """Rank r's walks of a chunk start from ``tensor_split(chunk's starts, world)[r]``, the
    starts one process draws (50 nodes in chunks of 16: the last chunk of 2 leaves a rank of
    3 without walks)."""
    options = SkipGramOptions(walk_length=3, num_walks=2, chunk_walks=16, seed=9)
    graph = _ring(50)
    single = [chunk.walks[:, 0].clone() for chunk in Corpus(graph, options).chunks()]
    shares = [
        [
            (chunk.walks[:, 0].clone(), chunk.size)
            for chunk in Corpus(graph, options, rank, world_size).chunks()
        ]
        for rank in range(world_size)
    ]
    assert all(len(drawn) == len(single) for drawn in shares)
    for index, whole in enumerate(single):
        for rank, part in enumerate(torch.tensor_split(whole, world_size)):
            starts, size = shares[rank][index]
            assert torch.equal(starts, part), (index, rank)
            assert size == whole.numel()


@pytest.mark.skipif(
    compiled_kernel() is None, reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)"
)
def test_the_trainer_builds_one_governor_for_the_runs_chunks(monkeypatch):
    """The governor is built once, before the first chunk, with the run's chunk count."""
    built = []
    init = ThreadGovernor.__init__

    def recording_init(self, workers, chunks, **kwargs):
        built.append((workers, chunks))
        init(self, workers, chunks, **kwargs)

    monkeypatch.setattr(ThreadGovernor, "__init__", recording_init)
    kw = dict(dimensions=8, walk_length=10, num_walks=4, window=3, backend="compiled")
    train_node_embeddings(_ring(40), workers=2, chunk_walks=16, **kw)
    assert built == [(2, 3 * 4)]  # ceil(40 / 16) chunks a round, 4 rounds
