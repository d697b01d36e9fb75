"""The compiled skip-gram trainer on the kernels' threads (torch's OpenMP threads where torch
loaded them): every worker's share of the walks is trained, whatever team OpenMP gives."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest
import torch
from skipgram_reference import reference

from graphemb.skipgram import NegativeSampler
from graphemb.skipgram.backends import compiled_kernel

GAMMA = 0x9E3779B97F4A7C15  # worker i's stream starts at mix(seed ^ (i * GAMMA))
MASK = 2**64 - 1

# One 2-worker call of the trainer (window 3, 4 negatives, lr 0.5, walks 5.. of 20, seed
# 11) on the tables saved in argv[1], the trained tables saved to argv[2].
_TRAIN_TWO_WORKERS = """
import sys, torch
from graphemb._native.library import library
from graphemb._native.skipgram import SkipGramTrainer
from graphemb.skipgram import FINAL_RATE, NegativeSampler
torch.set_num_threads(2)
assert library().uses_openmp
walks, syn0, syn1, weights = torch.load(sys.argv[1])
alias = NegativeSampler(weights).alias_table
trainer = SkipGramTrainer(syn0, syn1, weights, alias, 3, 4, 0.5, FINAL_RATE, 20, 1)
assert trainer(walks, 5, 2, 11)[0] == 0
torch.save((syn0, syn1), sys.argv[2])
"""


@pytest.mark.skipif(compiled_kernel() is None, reason="the compiled kernels are disabled")
@pytest.mark.skipif(
    not hasattr(ctypes.CDLL(None), "GOMP_parallel"),
    reason="torch brought no OpenMP runtime here",
)
def test_a_team_of_one_trains_both_workers_shares(tmp_path):
    """With OMP_THREAD_LIMIT=1 a 2-worker call gets a team of one thread, which trains worker
    0's half of the walks (its stream, the rate from walk 5), then worker 1's (its stream,
    the rate from walk 5 + 4): the float64 reference run on the two halves in turn. A call
    that trained only the first share, or both on one stream, fails."""
    gen = torch.Generator().manual_seed(3)
    walks = torch.randint(60, (8, 9), generator=gen)
    weights = torch.tensor([3.0, 1, 4, 1, 5, 9, 2], dtype=torch.float64).repeat(9)[:60]
    syn0 = (torch.rand(60, 16, generator=gen) - 0.5) / 16
    syn1 = torch.rand(60, 16, generator=gen) * 0.1
    alias = NegativeSampler(weights).alias_table
    first = reference(walks[:4], syn0, syn1, weights, alias, 3, 4, 0.5, 5, 20, 11)
    expected = reference(walks[4:], *first, weights, alias, 3, 4, 0.5, 9, 20, 11 ^ GAMMA & MASK)

    torch.save((walks, syn0, syn1, weights), tmp_path / "tables.pt")
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _TRAIN_TWO_WORKERS, str(tmp_path / "tables.pt"),
         str(tmp_path / "trained.pt")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trained = torch.load(tmp_path / "trained.pt")
    for got, want in zip(trained, expected, strict=True):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)
    assert (expected[0] - first[0]).abs().max() > 0.01  # the second share moved the rows
