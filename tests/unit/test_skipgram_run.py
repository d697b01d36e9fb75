"""The run loop of train_node_embeddings (graphemb.skipgram.run), seen by a backend that
records what it is asked: the chunks of walks, the passes over them, the learning rate's
schedule written out here, the options checked before any work, and which backend runs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from helpers import COMPILED_BACKEND

from graphemb import _compiled
from graphemb.datasets import stochastic_block_model
from graphemb.evaluation import node_classification_f1
from graphemb.graph import Graph
from graphemb.skipgram import SkipGramOptions, TrainingDiverged, train_node_embeddings
from graphemb.skipgram import run as run_module

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread

NODES = 30


def ring(nodes: int = NODES) -> Graph:
    return Graph.from_edges(torch.arange(nodes), (torch.arange(nodes) + 1) % nodes, nodes,
                            undirected=True)  # fmt: skip


class Recorder:
    """A backend that trains nothing and records every call."""

    name = "recorder"

    def __init__(self, num_nodes: int, dimensions: int) -> None:
        self.calls: list[tuple[int, int, int, torch.Tensor, float]] = []
        self.rows = torch.zeros(num_nodes, dimensions)
        self.entered = self.exited = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.exited += 1

    def train_chunk(self, chunk, repeat, walks_before, rate):
        self.calls.append((chunk.index, repeat, walks_before, chunk.walks.clone(),
                           rate.at(walks_before)))  # fmt: skip

    def input_rows(self):
        return self.rows


def recorded(monkeypatch, graph: Graph, **options) -> Recorder:
    made: list[Recorder] = []

    def create(choice, corpus, options, **kwargs):
        made.append(Recorder(corpus.num_nodes, options.dimensions))
        return made[0]

    monkeypatch.setattr(run_module, "create_backend", create)
    train_node_embeddings(graph, **options)
    return made[0]


@pytest.mark.parametrize("passes", [1, 3])
def test_chunks_are_trained_passes_times_and_the_rate_decays_over_all(monkeypatch, passes):
    backend = recorded(monkeypatch, ring(), dimensions=4, walk_length=6, num_walks=3,
                       chunk_walks=10, passes=passes, lr=0.025)  # fmt: skip
    per_round = -(-NODES // 10)
    assert len(backend.calls) == 3 * per_round * passes
    assert backend.entered == backend.exited == 1
    for position, (index, repeat, _, walks, _) in enumerate(backend.calls):
        assert (index, repeat) == (position // passes, position % passes)
        first = backend.calls[position - repeat][3]
        assert torch.equal(walks, first)  # the same walks, pass after pass
    # word2vec's schedule, written out: linear from lr to lr / 250 over every pass of every
    # walk, held for blocks of 10,000 // walk_length walks
    total, hold = 3 * NODES * passes, 10_000 // 6
    done = np.cumsum([0] + [call[3].shape[0] for call in backend.calls[:-1]])
    assert [call[2] for call in backend.calls] == done.tolist()
    expected = 0.025 * np.maximum(1 - (1 - 1 / 250) * (done // hold * hold) / total, 1 / 250)
    np.testing.assert_allclose([call[4] for call in backend.calls], expected, rtol=1e-12)


def test_every_node_starts_num_walks_walks_in_chunks_of_bounded_size(monkeypatch):
    for num_walks in (1, 6):
        backend = recorded(monkeypatch, ring(100), dimensions=4, walk_length=9,
                           num_walks=num_walks, chunk_walks=32)  # fmt: skip
        walks = [call[3] for call in backend.calls]
        assert max(w.shape[0] for w in walks) == 32 and {w.shape[1] for w in walks} == {9}
        per_node = torch.bincount(torch.cat([w[:, 0] for w in walks]), minlength=100)
        assert bool((per_node == num_walks).all())


def test_every_chunk_of_walks_is_written_into_one_buffer(monkeypatch):
    """A run holds one chunk of walks, as its memory bound counts: every chunk, the last
    and shorter one too, is written into the same buffer (the walks of every chunk are
    kept alive here, so that fresh allocations could not reuse an address)."""
    held = []
    chunks = run_module.Corpus.chunks

    def watched(corpus):
        for chunk in chunks(corpus):
            held.append(chunk.walks)
            yield chunk

    monkeypatch.setattr(run_module.Corpus, "chunks", watched)
    backend = recorded(monkeypatch, ring(), dimensions=4, walk_length=6, num_walks=1,
                       chunk_walks=12)  # fmt: skip
    assert [walks.shape[0] for walks in held] == [12, 12, 6] and len(backend.calls) == 3
    assert len({walks.untyped_storage().data_ptr() for walks in held}) == 1
    # what each chunk trained (cloned by the recorder) differs: the buffer was rewritten
    assert not torch.equal(backend.calls[0][3], backend.calls[1][3])


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"passes": 0}, ValueError, "passes"),
        ({"passes": 1.5}, ValueError, "passes"),
        ({"walk_length": 1}, ValueError, "walk_length"),
        ({"lr": 0}, ValueError, "lr must be a positive number, got 0"),
        ({"lr": float("nan")}, ValueError, "lr must be a positive number"),
        ({"sample": -1}, ValueError, "sample must be a number >= 0, got -1"),
        ({"p": "1"}, ValueError, "p must be a positive number"),
        ({"weighted": 1}, ValueError, "weighted must be True or False"),
        ({"sharing": "batch"}, TypeError, r"unknown skip-gram option\(s\) \['sharing'\]"),
        ({"backend": "gpu"}, ValueError, r"backend must be one of \['auto', 'compiled', 'torch'\]"),
        ({"workers": 0}, ValueError, "workers"),
    ],
)
def test_bad_options_are_refused_before_any_walk(monkeypatch, changes, error, message):
    monkeypatch.setattr(run_module, "Corpus", None)  # reached only after the checks
    with pytest.raises(error, match=message):
        train_node_embeddings(ring(), dimensions=4, **changes)


def test_options_and_changes_by_name_are_one_thing(monkeypatch):
    options = SkipGramOptions(dimensions=4, walk_length=5, num_walks=1, seed=3)
    a = train_node_embeddings(ring(), options, workers=1)
    b = train_node_embeddings(ring(), dimensions=4, walk_length=5, num_walks=1, seed=3, workers=1)
    c = train_node_embeddings(ring(), options, seed=4, workers=1)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_auto_warns_once_when_the_kernels_are_missing_and_trains_with_torch(monkeypatch):
    monkeypatch.setattr(_compiled, "_module", None)
    monkeypatch.setattr(_compiled, "_warned", False)
    monkeypatch.delenv(_compiled.DISABLE_VARIABLE, raising=False)
    with pytest.warns(_compiled.KernelsMissingWarning, match="did not load.*Rebuild them"):
        train_node_embeddings(ring(), dimensions=4, walk_length=5, num_walks=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        train_node_embeddings(ring(), dimensions=4, walk_length=5, num_walks=1)
    with pytest.raises(ValueError, match="backend='compiled' needs"):
        train_node_embeddings(ring(), dimensions=4, backend="compiled")


def test_rows_past_the_norm_bound_are_never_returned(monkeypatch):
    def create(choice, corpus, options, **kwargs):
        backend = Recorder(corpus.num_nodes, options.dimensions)
        backend.rows[7, 0] = 1e9  # finite, but blown up
        return backend

    monkeypatch.setattr(run_module, "create_backend", create)
    with pytest.raises(TrainingDiverged, match="row 7 has norm 1e\\+09.*lower lr"):
        train_node_embeddings(ring(), dimensions=4, walk_length=5, num_walks=1)


@pytest.mark.parametrize("backend", [COMPILED_BACKEND, "torch"])
def test_both_backends_separate_planted_communities(backend):
    data = stochastic_block_model(600, 4, avg_degree=10.0, intra_fraction=0.9, seed=5)
    graph = Graph.from_edges(data.src, data.dst, num_nodes=data.num_nodes)
    table = train_node_embeddings(graph, backend=backend, dimensions=16, walk_length=20,
                                  num_walks=10, window=5, seed=0, workers=1)  # fmt: skip
    scores = node_classification_f1(table, data.labels, [0.5], repeats=2, seed=0)
    assert scores[0].micro_f1 > 0.9  # chance: 0.25
