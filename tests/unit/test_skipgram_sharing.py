"""The compiled skip-gram kernel's ``sharing="position"`` (one draw of noise nodes per
position, for every context of its window) against its own float64 reference, and its
difference from word2vec's per-pair draws (``sharing="pair"``, the default)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats
from skipgram_reference import reference

from graphemb._native.skipgram import SHARING, SkipGramTrainer
from graphemb.graph import Graph
from graphemb.sampling.walks import RandomWalker
from graphemb.skipgram import FINAL_RATE, NegativeSampler
from graphemb.skipgram.backends import compiled_kernel

pytestmark = pytest.mark.skipif(
    compiled_kernel() is None,
    reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)",
)


def train(walks, syn0, syn1, counts, noise, *, sharing, threads=1, vector_width=0, **kw):
    """The kernel with ``sharing``, in place: window 3, 4 negatives, lr 0.5, walks 5.. of
    20, seed 11, no subsampling unless ``kw`` says otherwise; returns the products
    computed."""
    o = dict(window=3, negatives=4, lr=0.5, walks_before=5, total_walks=20, seed=11, threshold=0)
    o.update(kw)
    trainer = SkipGramTrainer(
        syn0, syn1, counts, noise, o["window"], o["negatives"], o["lr"], FINAL_RATE,
        o["total_walks"], 1, vector_width=vector_width, subsample_threshold=o["threshold"],
        sharing=sharing,
    )  # fmt: skip
    nonfinite, products = trainer(walks.contiguous(), o["walks_before"], threads, o["seed"])
    assert nonfinite == 0
    return products


def tables(num_nodes, dim, seed):
    gen = torch.Generator().manual_seed(seed)
    walks = torch.randint(num_nodes, (6, 9), generator=gen)
    walks[1, 6:] = -1  # a short walk
    walks[4, 1:] = -1  # a walk of one node: no context, no draw of noise nodes
    syn0 = (torch.rand(num_nodes, dim, generator=gen) - 0.5) / dim
    syn1 = torch.rand(num_nodes, dim, generator=gen) * 0.1
    return walks, syn0, syn1


@pytest.mark.parametrize("vector_width", [0, 4])
@pytest.mark.parametrize("dim", [8, 32, 13])
@pytest.mark.parametrize("num_nodes", [7, 60])  # a node drawn twice in most lists; in few
@pytest.mark.parametrize("sample", [0.0, 0.2])
def test_position_sharing_matches_its_float64_reference(sample, num_nodes, dim, vector_width):
    walks, syn0, syn1 = tables(num_nodes, dim, seed=3)
    weights = torch.tensor([3.0, 1, 4, 1, 5, 9, 2], dtype=torch.float64).repeat(9)[:num_nodes]
    alias = NegativeSampler(weights).alias_table
    threshold = sample * float(weights.sum())
    expected = reference(walks, syn0, syn1, weights, alias, 3, 4, 0.5, 5, 20, 11,
                         sharing="position", threshold=threshold)  # fmt: skip
    per_pair = reference(walks, syn0, syn1, weights, alias, 3, 4, 0.5, 5, 20, 11,
                         threshold=threshold)  # fmt: skip
    train(walks, syn0, syn1, weights, alias, sharing="position", vector_width=vector_width,
          threshold=threshold)  # fmt: skip
    torch.testing.assert_close(syn0.double(), expected[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(syn1.double(), expected[1], rtol=1e-4, atol=1e-5)
    assert (expected[1] - per_pair[1]).abs().max() > 1e-2  # the two draw different nodes


def test_position_sharing_reads_each_noise_node_once_per_window():
    """One-hot input rows, zero output rows and a tiny rate: every (context c, target t)
    update adds (label - 1/2) * alpha to syn1[t, c]. Walks 0 1 2 with window 1: position 1
    has the two contexts 0 and 2. Shared, a noise node of position 1 is scored against
    both, so syn1[t, 0] and syn1[t, 2] carry the same counts; per pair they differ."""
    copies, negatives, lr = 2000, 3, 1e-8
    walks = torch.tensor([[0, 1, 2]]).repeat(copies, 1)
    degrees = torch.tensor([0.0, 0.0, 0.0, 1, 2, 3, 4, 5])  # walk nodes are never noise
    alias = NegativeSampler(degrees).alias_table
    keep = torch.ones(8, dtype=torch.float64)
    counts = {}
    for sharing in SHARING:
        syn0, syn1 = torch.eye(8), torch.zeros(8, 8)
        products = train(
            walks, syn0, syn1, keep, alias, sharing=sharing, window=1, negatives=negatives,
            lr=lr, walks_before=0, total_walks=10**12,
        )  # fmt: skip
        assert products == copies * 4 * (1 + negatives)  # 4 pairs a walk, either way
        counts[sharing] = (-syn1[3:].double() / (0.5 * lr)).numpy().round()
    # Position 1 (node 1) scores its noise nodes against contexts 0 and 2; positions 0 and
    # 2 against context 1 only. Shared, columns 0 and 2 count the same draws (up to
    # rounding: at this rate the scores stay at 1/2 to 1e-4); per pair, independent draws
    # (binomial spreads of tens of counts).
    shared, pair = counts["position"], counts["pair"]
    assert np.abs(shared[:, 0] - shared[:, 2]).max() <= 1
    assert np.abs(pair[:, 0] - pair[:, 2]).max() > 10
    # Either way the noise nodes follow degree ** 0.75, K for every pair.
    weights = (degrees[3:].double() ** 0.75).numpy()
    for drawn in (shared.sum(1), pair.sum(1)):
        np.testing.assert_allclose(drawn.sum(), copies * 4 * negatives, rtol=1e-2)
        np.testing.assert_allclose(drawn / drawn.sum(), weights / weights.sum(), atol=0.02)
    expected = weights / weights.sum() * pair.sum()
    assert stats.chisquare(pair.sum(1), expected).pvalue > 1e-3  # independent draws


def test_unknown_sharing_is_refused():
    syn0, syn1 = torch.ones(2, 4), torch.zeros(2, 4)
    alias = NegativeSampler(torch.ones(2)).alias_table
    keep = torch.ones(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="sharing must be one of .'pair', 'position'., got 'walk'"):
        SkipGramTrainer(syn0, syn1, keep, alias, 2, 3, 0.025, 0.5, 1, 1, sharing="walk")
    assert (syn0 == 1).all() and (syn1 == 0).all()


def test_two_threads_sharing_per_position_separate_two_communities():
    gen = torch.Generator().manual_seed(0)
    block = torch.arange(120) // 60
    same = block[:, None] == block[None, :]
    adjacency = torch.triu(torch.rand(120, 120, generator=gen) < torch.where(same, 0.15, 0.01), 1)
    src, dst = adjacency.nonzero().t()
    graph = Graph.from_edges(src, dst, 120, undirected=True)
    walks = RandomWalker(graph)(torch.arange(120).repeat(40), 19, generator=gen)
    counts = graph.in_degrees().double()
    syn0 = (torch.rand(120, 16, generator=gen) - 0.5) / 16
    syn1 = torch.zeros(120, 16)
    train(
        walks, syn0, syn1, counts, NegativeSampler(counts).alias_table, sharing="position",
        threads=2, window=5, negatives=5, lr=0.025, walks_before=0, total_walks=walks.shape[0],
        threshold=1e-3 * float(counts.sum()),
    )  # fmt: skip
    unit = torch.nn.functional.normalize(syn0 - syn0.mean(dim=0), dim=1)
    similarity = (unit @ unit.t()).numpy()
    upper = np.triu_indices(120, 1)
    inside = same.numpy()[upper]
    ranks = stats.rankdata(similarity[upper])
    auc = (ranks[inside].sum() - inside.sum() * (inside.sum() + 1) / 2) / (
        inside.sum() * (~inside).sum()
    )
    assert auc > 0.9


def test_the_trainer_and_the_command_line_hand_the_sharing_to_the_kernel(
    skipgram_kernel_calls, tmp_path
):
    from graphemb.cli import main
    from graphemb.skipgram import CompiledOptions, train_node_embeddings

    calls = skipgram_kernel_calls
    gen = torch.Generator().manual_seed(0)
    ends = torch.randint(0, 100, (2, 500), generator=gen)
    graph = Graph.from_edges(ends[0], ends[1], 100, undirected=True)
    options = dict(dimensions=8, walk_length=10, num_walks=2, window=3, workers=1, seed=3)
    shared = train_node_embeddings(
        graph, backend="compiled", compiled_options=CompiledOptions(sharing="position"), **options
    )
    assert calls and {c["sharing"] for c in calls} == {"position"}
    calls.clear()
    assert not torch.equal(shared, train_node_embeddings(graph, backend="compiled", **options))
    assert {c["sharing"] for c in calls} == {"pair"}  # word2vec's draws unless asked otherwise
    with pytest.raises(ValueError, match="sharing must be 'pair' or 'position', got 'walk'"):
        train_node_embeddings(graph, compiled_options=CompiledOptions(sharing="walk"), **options)

    edges = tmp_path / "edges.txt"
    edges.write_text("".join(f"{u} {v}\n" for u, v in ends.t().tolist()))
    calls.clear()
    argv = ["deepwalk", "--input", str(edges), "--output", str(tmp_path / "rows.npy"),
            "--walk-length", "5", "--num-walks", "2", "--dimensions", "8", "--quiet"]  # fmt: skip
    assert main([*argv, "--shared-negatives"]) == 0
    assert calls and {c["sharing"] for c in calls} == {"position"}
