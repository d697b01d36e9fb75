"""train_node_embeddings' torch trainer (graphemb.skipgram.trainer): argument checks, the
learning rate's linear decay over all walks, walks drawn in chunks, embeddings that separate
planted communities, and the deepwalk command."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphemb.datasets import stochastic_block_model
from graphemb.evaluation import node_classification_f1
from graphemb.graph import Graph
from graphemb.skipgram import (
    SkipGram,
    train_node_embeddings,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: every test on one torch thread


@pytest.mark.parametrize("matmul_dtype", ["bf16", "int64", 3])
def test_bad_matmul_dtype_is_refused(matmul_dtype):
    ring = Graph.from_edges(torch.arange(4), (torch.arange(4) + 1) % 4)
    with pytest.raises(ValueError, match=f"matmul_dtype must be .* got {matmul_dtype!r}"):
        train_node_embeddings(ring, dimensions=4, matmul_dtype=matmul_dtype)


def test_trainer_refuses_sharing_pair_and_names_the_compiled_trainer():
    # Per-pair negatives in one synchronous summed step are not word2vec's sequential
    # updates (they collapsed every row on a small dense graph): word2vec's exact
    # algorithm is the compiled trainer, and the torch trainer no longer offers "pair".
    graph = Graph.from_edges(torch.arange(6), (torch.arange(6) + 1) % 6)
    with pytest.raises(ValueError, match=r"sharing='pair'.*trainer='compiled'"):
        train_node_embeddings(graph, dimensions=4, sharing="pair", trainer="torch")


def test_learning_rate_decays_linearly_over_all_walks(monkeypatch):
    graph = Graph.from_edges(torch.arange(50), (torch.arange(50) + 1) % 50)
    rates = []

    def record(self, walks, negatives, *, lr, **options):
        rates.append((lr, walks.shape[0]))

    monkeypatch.setattr(SkipGram, "sgd_step", record)
    train_node_embeddings(
        graph,
        dimensions=4,
        walk_length=5,
        num_walks=4,
        window=2,
        batch_walks=10,
        lr=0.025,
        sample=0,
        trainer="torch",
    )
    total = 4 * 50
    done = np.cumsum([0] + [count for _, count in rates[:-1]])
    expected = 0.025 * np.maximum(1 - (1 - 1 / 250) * done / total, 1 / 250)
    np.testing.assert_allclose([lr for lr, _ in rates], expected, rtol=1e-12)
    assert sum(count for _, count in rates) == total


def test_walks_are_drawn_in_chunks_whose_size_does_not_grow_with_num_walks(monkeypatch):
    from graphemb.sampling import walks as walks_module

    graph = Graph.from_edges(torch.arange(100), (torch.arange(100) + 7) % 100)
    original = walks_module.RandomWalker.__call__
    for num_walks in (1, 6):
        largest, starts = [0], []

        def spy(self, start, walk_length, *, generator=None, largest=largest, starts=starts):
            out = original(self, start, walk_length, generator=generator)
            largest[0] = max(largest[0], out.numel() * out.element_size())
            starts.append(start.clone())
            return out

        monkeypatch.setattr(walks_module.RandomWalker, "__call__", spy)
        train_node_embeddings(
            graph,
            dimensions=4,
            walk_length=9,
            num_walks=num_walks,
            window=2,
            chunk_walks=32,
            batch_walks=16,
            sample=0,
        )
        assert largest[0] == 32 * 9 * 8  # one chunk of int64 walks, whatever num_walks
        per_node = torch.bincount(torch.cat(starts), minlength=100)
        assert bool((per_node == num_walks).all())  # every node starts num_walks walks


def test_trained_embeddings_separate_planted_communities():
    data = stochastic_block_model(600, 4, avg_degree=10.0, intra_fraction=0.9, seed=5)
    graph = Graph.from_edges(data.src, data.dst, num_nodes=data.num_nodes)
    table = train_node_embeddings(
        graph, dimensions=16, walk_length=20, num_walks=20, window=5, seed=0
    )
    scores = node_classification_f1(table, data.labels, [0.5], repeats=2, seed=0)
    assert scores[0].micro_f1 > 0.9  # chance: 0.25


def test_deepwalk_command_writes_a_word2vec_file(tmp_path):
    import argparse

    from graphemb.cli import embed

    (tmp_path / "g.txt").write_text("# ring\nann bob\nbob cy\ncy dan\ndan ann\n")
    parser = argparse.ArgumentParser()
    embed.add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "deepwalk",
            "--input",
            str(tmp_path / "g.txt"),
            "--output",
            str(tmp_path / "g.emb"),
            "--dimensions",
            "6",
            "--num-walks",
            "2",
            "--walk-length",
            "5",
            "--quiet",
        ]
    )
    assert args.run(args) == 0
    lines = (tmp_path / "g.emb").read_text().splitlines()
    assert lines[0] == "4 6"
    names = sorted(line.split()[0] for line in lines[1:])
    assert names == ["ann", "bob", "cy", "dan"]
    assert all(len(line.split()) == 7 for line in lines[1:])
    rows = np.array([[float(v) for v in line.split()[1:]] for line in lines[1:]])
    assert np.isfinite(rows).all() and np.abs(rows).sum() > 0
    with pytest.raises(SystemExit):
        parser.parse_args(["node2vec", "--input", "x", "--output", "y", "--p", "0"])
