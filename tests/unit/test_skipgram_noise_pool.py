"""The compiled skip-gram kernel's pool of noise nodes (``noise_pool`` slots of fresh draws,
each serving ``noise_reuse`` noise nodes, ``csrc/skipgram/noise.h``): against its float64
reference, the distribution of the noise nodes it gives, and the option that asks for it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skipgram_reference import reference

from graphemb._native.skipgram import SkipGramTrainer
from graphemb.graph import Graph
from graphemb.skipgram import FINAL_RATE, CompiledOptions, NegativeSampler
from graphemb.skipgram.backends import compiled_kernel
from graphemb.skipgram.options import NOISE_POOL_BYTES

pytestmark = pytest.mark.skipif(
    compiled_kernel() is None,
    reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)",
)


def train(walks, syn0, syn1, counts, noise, *, sharing, pool, reuse, **kw):
    """The kernel on one thread, in place: window 3, 4 negatives, lr 0.5, walks 5.. of 20,
    seed 11, no subsampling unless ``kw`` says otherwise; returns the products computed."""
    o = dict(window=3, negatives=4, lr=0.5, walks_before=5, total_walks=20, seed=11, threshold=0)
    o.update(kw)
    trainer = SkipGramTrainer(
        syn0, syn1, counts, noise, o["window"], o["negatives"], o["lr"], FINAL_RATE,
        o["total_walks"], 1, subsample_threshold=o["threshold"], sharing=sharing,
        noise_pool=pool, noise_reuse=reuse,
    )  # fmt: skip
    nonfinite, products = trainer(walks.contiguous(), o["walks_before"], 1, o["seed"])
    assert nonfinite == 0
    return products


@pytest.mark.parametrize("sharing", ["pair", "position"])
@pytest.mark.parametrize("pool, reuse", [(8, 3), (5, 1), (64, 7)])
def test_a_noise_pool_matches_its_float64_reference(sharing, pool, reuse):
    gen = torch.Generator().manual_seed(3)
    num_nodes, dim = 60, 16
    walks = torch.randint(num_nodes, (6, 9), generator=gen)
    walks[1, 6:] = -1  # a short walk
    syn0 = (torch.rand(num_nodes, dim, generator=gen) - 0.5) / dim
    syn1 = torch.rand(num_nodes, dim, generator=gen) * 0.1
    weights = torch.tensor([3.0, 1, 4, 1, 5, 9, 2], dtype=torch.float64).repeat(9)[:num_nodes]
    alias = NegativeSampler(weights).alias_table
    threshold = 0.2 * float(weights.sum())
    args = (walks, syn0, syn1, weights, alias, 3, 4, 0.5, 5, 20, 11)
    expected = reference(*args, sharing=sharing, pool=pool, reuse=reuse, threshold=threshold)
    fresh = reference(*args, sharing=sharing, threshold=threshold)
    train(walks, syn0, syn1, weights, alias, sharing=sharing, pool=pool, reuse=reuse,
          threshold=threshold)  # fmt: skip
    torch.testing.assert_close(syn0.double(), expected[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(syn1.double(), expected[1], rtol=1e-4, atol=1e-5)
    assert (expected[1] - fresh[1]).abs().max() > 1e-2  # the pool gives other noise nodes


def test_pooled_noise_nodes_follow_the_noise_distribution():
    """One-hot input rows, zero output rows and a tiny rate: every (context, noise node t)
    update adds -alpha / 2 to a cell of syn1[t] (as in test_skipgram_sharing.py), so the
    output rows count the noise nodes. Taken from a pool of 16 draws, each serving 5, they
    still follow degree ** 0.75, which this sample tells apart from degree ** 1."""
    copies, negatives, lr = 10_000, 3, 1e-8
    walks = torch.tensor([[0, 1, 2]]).repeat(copies, 1)
    degrees = torch.tensor([0.0, 0.0, 0.0, 1.0, 16.0])  # walk nodes are never noise
    alias = NegativeSampler(degrees).alias_table
    keep = torch.ones(5, dtype=torch.float64)
    syn0, syn1 = torch.eye(5), torch.zeros(5, 5)
    products = train(
        walks, syn0, syn1, keep, alias, sharing="pair", pool=16, reuse=5, window=1,
        negatives=negatives, lr=lr, walks_before=0, total_walks=10**12,
    )  # fmt: skip
    assert products == copies * 4 * (1 + negatives)  # 4 pairs a walk
    drawn = (-syn1[3:].double() / (0.5 * lr)).sum(1).numpy()
    np.testing.assert_allclose(drawn.sum(), copies * 4 * negatives, rtol=1e-2)
    share = drawn[1] / drawn.sum()
    assert abs(share - 16**0.75 / (1 + 16**0.75)) < 0.02  # 0.889
    assert abs(share - 16 / 17) > 0.03  # 0.941: degree ** 1 would show


def test_bad_pool_settings_are_refused_and_change_nothing():
    walks = torch.zeros(1, 3, dtype=torch.long)
    syn0, syn1 = torch.ones(2, 4), torch.zeros(2, 4)
    alias = NegativeSampler(torch.ones(2)).alias_table
    keep = torch.ones(2, dtype=torch.float64)
    for pool, reuse in ((-1, 1), (0, 2), (4, 0)):
        with pytest.raises(ValueError, match=f"noise_pool >= 0 .* got {pool} and {reuse}"):
            train(walks, syn0, syn1, keep, alias, sharing="pair", pool=pool, reuse=reuse)
    assert (syn0 == 1).all() and (syn1 == 0).all()
    with pytest.raises(ValueError, match="noise_reuse must be an integer >= 1, got 0"):
        CompiledOptions(noise_reuse=0).checked()


def test_the_pool_holds_its_bytes_of_rows_and_only_with_reuse():
    assert CompiledOptions(noise_reuse=1).noise_pool(128) == 0  # word2vec: every one fresh
    assert CompiledOptions(noise_reuse=5).noise_pool(128) == NOISE_POOL_BYTES // 512
    assert CompiledOptions(noise_reuse=5).noise_pool(4096) == 64  # never fewer slots
    with pytest.raises(ValueError, match="noise_reuse is None"):
        CompiledOptions().noise_pool(128)  # the default is set per table first


@pytest.mark.parametrize(
    "nodes, dimensions, reuse",
    [(100, 8, 1), (65_536, 128, 1), (65_537, 128, 10), (131_072, 64, 1), (8_193, 1024, 10),
     (10**6, 128, 10)],
)  # fmt: skip
def test_the_default_reuse_is_fresh_draws_up_to_a_32_mib_output_table(nodes, dimensions, reuse):
    # 32 MiB = 2**25 bytes of float32 rows: 65,536 rows of 128 floats.
    assert CompiledOptions().for_table(nodes, dimensions).noise_reuse == reuse
    assert CompiledOptions(noise_reuse=3).for_table(nodes, dimensions).noise_reuse == 3
    assert CompiledOptions(noise_reuse=1).for_table(nodes, dimensions).noise_reuse == 1


def test_the_trainer_and_the_command_line_hand_the_pool_to_the_kernel(
    skipgram_kernel_calls, tmp_path
):
    from graphemb.cli import main
    from graphemb.skipgram import train_node_embeddings

    ring = Graph.from_edges(torch.arange(100), (torch.arange(100) + 1) % 100, undirected=True)
    options = dict(dimensions=8, walk_length=10, num_walks=2, window=3, workers=1, seed=3)
    pooled = train_node_embeddings(
        ring, backend="compiled", compiled_options=CompiledOptions(noise_reuse=4), **options
    )
    asked = {(c["noise_pool"], c["noise_reuse"]) for c in skipgram_kernel_calls}
    assert asked == {(NOISE_POOL_BYTES // 32, 4)}
    skipgram_kernel_calls.clear()
    assert not torch.equal(pooled, train_node_embeddings(ring, backend="compiled", **options))
    asked = {(c["noise_pool"], c["noise_reuse"]) for c in skipgram_kernel_calls}
    assert asked == {(0, 1)}  # fresh draws for a small table unless asked otherwise

    # An output table past 32 MiB (8,193 rows of 1,024 floats) takes the pool by default.
    skipgram_kernel_calls.clear()
    wide = Graph.from_edges(torch.arange(8193), (torch.arange(8193) + 1) % 8193, undirected=True)
    train_node_embeddings(wide, backend="compiled", **{**options, "dimensions": 1024})
    asked = {(c["noise_pool"], c["noise_reuse"]) for c in skipgram_kernel_calls}
    assert asked == {(64, 10)}

    edges = tmp_path / "ring.txt"
    edges.write_text("".join(f"{u} {(u + 1) % 100}\n" for u in range(100)))
    skipgram_kernel_calls.clear()
    argv = ["deepwalk", "--input", str(edges), "--output", str(tmp_path / "rows.npy"),
            "--walk-length", "5", "--num-walks", "2", "--dimensions", "8", "--quiet"]  # fmt: skip
    assert main([*argv, "--noise-reuse", "3"]) == 0
    asked = {(c["noise_pool"], c["noise_reuse"]) for c in skipgram_kernel_calls}
    assert asked == {(NOISE_POOL_BYTES // 32, 3)}
