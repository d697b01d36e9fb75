"""graphemb.nn.dropout: torch's dropout distribution from 16 random bits per element.

Oracles: the exact keep probability (binomial bounds), the uniform distribution of the
16 patterns of four elements that share a random word (chi-square), and the gradient
implied by the forward pass's own mask."""

from __future__ import annotations

import pytest
import torch
from helpers import DEVICES
from scipy import stats

from graphemb.nn.dropout import Dropout, dropout, keep_mask


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.123456])
def test_keep_rate_is_one_minus_p(p, device):
    gen = torch.Generator(device=device).manual_seed(1)
    n = 2_000_000
    kept = int(keep_mask((n,), p, device, gen).sum())
    q = 1 - round(p * 65536) / 65536
    assert abs(q - (1 - p)) <= 1 / 65536
    assert abs(kept - n * q) < 5 * (n * q * (1 - q)) ** 0.5, (kept, n * q)


@pytest.mark.parametrize("device", DEVICES)
def test_elements_of_one_random_word_are_independent(device):
    """Four consecutive elements read one 64-bit word: at p = 0.5 their 16 keep patterns
    are equally likely (the sign bit of the word included)."""
    gen = torch.Generator(device=device).manual_seed(2)
    mask = keep_mask((400_000, 4), 0.5, device, gen).cpu().long()
    patterns = (mask * torch.tensor([1, 2, 4, 8])).sum(1)
    counts = torch.bincount(patterns, minlength=16).numpy()
    assert stats.chisquare(counts).pvalue > 1e-4, counts


@pytest.mark.parametrize("device", DEVICES)
def test_output_and_gradient_share_the_mask(device):
    torch.manual_seed(3)
    x = torch.ones(300, 7, device=device, requires_grad=True)
    weights = torch.randn(300, 7, device=device)
    out = dropout(x, 0.25)
    (out * weights).sum().backward()
    scale = 1 / (1 - round(0.25 * 65536) / 65536)
    kept = out != 0
    assert torch.equal(out[kept], torch.full_like(out[kept], scale))
    torch.testing.assert_close(x.grad, torch.where(kept, weights * scale, 0.0))
    assert 0.7 < kept.float().mean().item() < 0.8


def test_mean_is_preserved_and_eval_is_identity():
    torch.manual_seed(4)
    x = torch.randn(1000, 1000)
    layer = Dropout(0.4)
    out = layer(x)
    assert abs((out - x).mean().item()) < 5 * (x.var().item() * 0.4 / 0.6 / x.numel()) ** 0.5
    assert layer.eval()(x) is x
    assert dropout(x, 0.0) is x


def test_seeded_runs_repeat_and_torch_seed_drives_it():
    torch.manual_seed(5)
    first = Dropout(0.5)(torch.ones(64))
    torch.manual_seed(5)
    assert torch.equal(Dropout(0.5)(torch.ones(64)), first)


@pytest.mark.parametrize("p", [-0.1, 1.0, True, "0.5"])
def test_bad_p_is_refused(p):
    with pytest.raises(ValueError, match="p must be a number in"):
        Dropout(p)


def test_p_just_below_one_keeps_a_finite_scale():
    out = dropout(torch.ones(10), 1 - 1e-9)
    assert torch.isfinite(out).all()
