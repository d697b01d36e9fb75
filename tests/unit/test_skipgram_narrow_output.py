"""Output tables narrower than float32 (``CompiledOptions.output_dtype``: float24, bfloat16):
the compiled kernel's stochastic rounding against a float64 reference of word2vec's
algorithm (exact on average; trajectories that follow the reference's), the packed float24
layout read back independently, and the errors of a bad table or type."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skipgram_reference import reference

from graphemb._native.skipgram import SkipGramTrainer, float24_width
from graphemb.graph import Graph
from graphemb.skipgram import (
    FINAL_RATE,
    CompiledOptions,
    NegativeSampler,
    keep_probabilities,
    train_node_embeddings,
)
from graphemb.skipgram.backends import compiled_kernel

needs_kernel = pytest.mark.skipif(
    compiled_kernel() is None, reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)"
)


def encode(rows: torch.Tensor, dtype: str) -> torch.Tensor:
    """float32 rows (N, D) whose values a ``dtype`` table holds exactly, as that table: for
    float24, blocks of 8 values, their 8 high halves (little-endian) then their third
    bytes, 24 bytes a block."""
    if dtype == "bfloat16":
        return rows.bfloat16()
    bits = rows.numpy().view(np.uint32)
    n, d = bits.shape
    assert not (bits & 0xFF).any(), "not a float24 value"
    blocks = -(-d // 8)
    padded = np.zeros((n, blocks * 8), dtype=np.uint32)
    padded[:, :d] = bits
    padded = padded.reshape(n, blocks, 8)
    high = (padded >> 16).astype("<u2").view(np.uint8)  # (n, blocks, 16)
    third = ((padded >> 8) & 0xFF).astype(np.uint8)  # (n, blocks, 8)
    return torch.from_numpy(np.concatenate([high, third], axis=2).reshape(n, blocks * 24))


def decode(table: torch.Tensor, dim: int) -> torch.Tensor:
    """The float64 values of a bfloat16 or packed float24 table (N, D)."""
    if table.dtype == torch.bfloat16:
        return table.double()
    n = table.shape[0]
    blocks = table.numpy().reshape(n, -1, 24)
    high = blocks[:, :, :16].copy().view("<u2").astype(np.uint32)
    third = blocks[:, :, 16:].astype(np.uint32)
    bits = ((high << 16) | (third << 8)).reshape(n, -1)[:, :dim]
    return torch.from_numpy(bits.copy().view(np.float32).astype(np.float64))


def train(walks, syn0, syn1, keep, alias, *, window, negatives, lr, seed, vector_width):
    """The kernel in place, one thread, the rate over exactly these walks."""
    trainer = SkipGramTrainer(
        syn0, syn1, keep, alias, window, negatives, lr, FINAL_RATE, walks.shape[0], 1,
        vector_width=vector_width,
    )  # fmt: skip
    nonfinite, _ = trainer(walks, 0, 1, seed)
    assert nonfinite == 0


def test_the_float24_layout_round_trips():
    values = torch.tensor([[1.0, -2.5, 3.0e-3, 7.0, 0.0, -1.0e5, 0.125, 9.0, 11.0, -0.5]])
    # (numpy's uint32: torch before 2.3 has no uint32 tensors)
    values = torch.from_numpy((values.numpy().view(np.uint32) & ~np.uint32(0xFF)).view(np.float32))
    table = encode(values, "float24")
    assert table.shape == (1, float24_width(10)) == (1, 48)
    assert torch.equal(decode(table, 10), values.double())


@needs_kernel
@pytest.mark.parametrize("dtype, lr", [("bfloat16", 1e-4), ("float24", 1e-6)])
@pytest.mark.parametrize("vector_width", [0, 4])
def test_updates_far_below_a_step_add_up_as_in_float64(dtype, lr, vector_width):
    """Two nodes alternate along the walks; every output value is near 1 and each update
    moves it by about 1/100 to 1/300 of a step of the table's type, in one direction over
    the run: round-to-nearest would keep every row at 1, rounding toward zero would drift a
    step per write. Stochastically rounded, the rows move as the float64 reference's do,
    up to noise of about 6 % of the movement per seed."""
    dim, walks = 16, (torch.arange(50) % 2).repeat(60, 1)
    weights = torch.ones(2)
    alias, keep = NegativeSampler(weights).alias_table, keep_probabilities(weights, 0.0)
    syn0 = torch.tensor([1.0, -1.0]).repeat(dim // 2).repeat(2, 1)  # scores start at 0
    ones = torch.ones(2, dim)
    # window 1, no noise nodes, no subsampling: the draws do not matter, every seed trains
    # the same pairs, and only the rounding differs between seeds.
    want0, want1 = reference(walks, syn0, ones, keep, alias, 1, 0, lr, 0, 60, 5)
    moved = want1 - 1.0
    step = 2.0**-7 if dtype == "bfloat16" else 2.0**-15
    assert (moved.abs() > 5 * step).all()  # several steps in all
    ratios = []
    for seed in range(6):
        rows0, rows1 = syn0.clone(), encode(ones, dtype)
        train(walks, rows0, rows1, keep, alias, window=1, negatives=0, lr=lr, seed=seed,
              vector_width=vector_width)  # fmt: skip
        ratios.append(float(((decode(rows1, dim) - 1.0) * moved.sign()).sum() / moved.abs().sum()))
        torch.testing.assert_close(rows0.double(), want0, rtol=0, atol=0.01)
    assert all(abs(r - 1) < 0.3 for r in ratios), ratios
    assert abs(sum(ratios) / len(ratios) - 1) < 0.1, ratios


@needs_kernel
@pytest.mark.parametrize("dtype, tolerance", [("bfloat16", 0.2), ("float24", 0.01)])
@pytest.mark.parametrize("vector_width", [0, 4])
@pytest.mark.parametrize("dim", [8, 13, 32])  # one vector, a tail of scalars, several
@pytest.mark.parametrize("num_nodes", [7, 60])  # targets drawn twice (in order), distinct
def test_narrow_rows_move_as_the_float64_reference(num_nodes, dim, vector_width, dtype, tolerance):
    """From training's start (output rows zero), every path of the kernel (targets side by
    side or in order, whole vectors and a tail of scalars) moves the rows as the float64
    reference does, up to the rounding's noise: relative to the output rows' movement about
    3 to 11 % in bfloat16, 0.1 % in float24 (0.01 % in float32)."""
    gen = torch.Generator().manual_seed(0)
    walks = torch.randint(num_nodes, (60, 20), generator=gen)
    weights = torch.tensor([3.0, 1, 4, 1, 5, 9, 2]).repeat(9)[:num_nodes]
    alias, keep = NegativeSampler(weights).alias_table, keep_probabilities(weights, 0.0)
    syn0 = (torch.rand(num_nodes, dim, generator=gen) - 0.5) * 0.2
    zeros = torch.zeros(num_nodes, dim)
    want0, want1 = reference(walks, syn0, zeros, keep, alias, 2, 3, 0.1, 0, 60, 5)
    rows0, rows1 = syn0.clone(), encode(zeros, dtype)
    train(walks, rows0, rows1, keep, alias, window=2, negatives=3, lr=0.1, seed=5,
          vector_width=vector_width)  # fmt: skip
    error1 = float((decode(rows1, dim) - want1).norm() / want1.norm())
    error0 = float((rows0.double() - want0).norm() / (want0 - syn0.double()).norm())
    assert error1 < tolerance and error0 < tolerance / 2, (error1, error0)


def test_the_output_table_is_float32_unless_asked():
    assert CompiledOptions().output_dtype == "float32"
    assert CompiledOptions().for_table(10**7, 128).output_dtype == "float32"
    with pytest.raises(ValueError, match="output_dtype must be one of .*'float16'"):
        CompiledOptions(output_dtype="float16").checked()


@needs_kernel
@pytest.mark.parametrize(
    "syn1, message",
    [(torch.zeros(4, 8, dtype=torch.float16), "syn1 must be float32 or bfloat16 or uint8"),
     (torch.zeros(4, 8, dtype=torch.uint8), r"syn1 of uint8 must have shape \[4, 24\]"),
     (torch.zeros(4, 9, dtype=torch.bfloat16), r"syn1 of bfloat16 must have shape \[4, 8\]")],
)  # fmt: skip
def test_the_kernel_refuses_an_output_table_it_cannot_read(syn1, message):
    walks, keep = torch.zeros(1, 3, dtype=torch.int64), torch.ones(4, dtype=torch.float64)
    alias, syn0 = NegativeSampler(torch.ones(4)).alias_table, torch.zeros(4, 8)
    with pytest.raises((TypeError, ValueError), match=message):
        train(walks, syn0, syn1, keep, alias, window=1, negatives=1, lr=0.1, seed=0,
              vector_width=0)  # fmt: skip
    assert not syn0.any() and not syn1.any()


@needs_kernel
@pytest.mark.parametrize(
    "dtype, table", [("float32", (torch.float32, 8)), ("float24", (torch.uint8, 24)),
                     ("bfloat16", (torch.bfloat16, 8))],
)  # fmt: skip
def test_the_trainer_and_the_command_line_hand_the_kernel_the_table_asked_for(
    skipgram_kernel_calls, tmp_path, dtype, table
):
    from graphemb.cli import main

    ring = Graph.from_edges(torch.arange(100), (torch.arange(100) + 1) % 100, undirected=True)
    options = dict(dimensions=8, walk_length=5, num_walks=2, window=2, workers=1)
    rows = train_node_embeddings(
        ring, backend="compiled", compiled_options=CompiledOptions(output_dtype=dtype), **options
    )
    assert rows.dtype == torch.float32 and rows.shape == (100, 8) and rows.isfinite().all()
    asked = {(call["syn1"].dtype, call["syn1"].shape[1]) for call in skipgram_kernel_calls}
    assert asked == {table}

    skipgram_kernel_calls.clear()
    edges = tmp_path / "ring.txt"
    edges.write_text("".join(f"{u} {(u + 1) % 100}\n" for u in range(100)))
    argv = ["deepwalk", "--input", str(edges), "--output", str(tmp_path / "rows.npy"),
            "--walk-length", "5", "--num-walks", "2", "--dimensions", "8", "--quiet"]  # fmt: skip
    assert main([*argv, "--output-table", dtype]) == 0
    asked = {(call["syn1"].dtype, call["syn1"].shape[1]) for call in skipgram_kernel_calls}
    assert asked == {table}
    refused = [*argv[:4], str(tmp_path / "refused.npy"), *argv[5:], "--output-table", "float16"]
    assert main(refused) == 2
    assert not (tmp_path / "refused.npy").exists()
