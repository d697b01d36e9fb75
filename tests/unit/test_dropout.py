"""graphemb.nn.dropout: torch's dropout distribution, with the mask recomputed from a hash.

Oracles: the exact keep probability (binomial bounds), the uniform distribution of the
joint keep patterns of neighbouring elements and of two calls (chi-square), float64
arithmetic for the kept values, the forward pass's own mask for the gradient, and
``torch.nn.functional.dropout`` itself for the path without the kernels."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import DEVICES
from scipy import stats

from graphemb._compiled import DISABLE_VARIABLE, compiled_module
from graphemb.nn import GraphSAGE
from graphemb.nn.dropout import Dropout, dropout, hashed_dropout_applies

HAS_KERNEL = hasattr(compiled_module(), "dropout_masked_scale")


@pytest.fixture(params=["hashed", "torch"])
def path(request, monkeypatch):
    """Runs a test on the compiled hashed-mask path and on torch's dropout."""
    if request.param == "hashed" and not HAS_KERNEL:
        pytest.skip("the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)")
    if request.param == "torch":
        monkeypatch.setenv(DISABLE_VARIABLE, "1")
    else:  # the path the test names, whatever the environment says
        monkeypatch.delenv(DISABLE_VARIABLE, raising=False)
    return request.param


def _keep_probability(p: float, path: str) -> float:
    return 1 - round(p * 2**16) / 2**16 if path == "hashed" else 1 - p


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.123456])
def test_keep_rate_is_one_minus_p(p, path):
    gen = torch.Generator().manual_seed(1)
    n = 2_000_000
    if path == "torch":
        torch.manual_seed(1)  # torch's dropout reads the default generator
    out = dropout(torch.ones(n), p, generator=gen)
    q = _keep_probability(p, path)
    kept = int((out != 0).sum())
    assert abs(q - (1 - p)) <= 2**-17
    assert abs(kept - n * q) < 5 * (n * q * (1 - q)) ** 0.5, (kept, n * q)


@pytest.mark.parametrize("stride", [1, 2, 7, 8, 16, 1 << 15])
def test_neighbouring_elements_are_independent(stride, path):
    """At p = 0.5 the 16 keep patterns of elements i, i + s, i + 2s, i + 3s are equally
    likely (s = 8: the two halves of one hash word; s = 16: the same lane of the next
    block's words; s = 2**15 straddles the kernel's tasks)."""
    torch.manual_seed(2)
    n = 4 * 300_000
    mask = (dropout(torch.ones(n), 0.5) != 0).long()
    rows = mask[: (n // (4 * stride)) * 4 * stride].view(-1, 4, stride).transpose(1, 2)
    patterns = (rows.reshape(-1, 4) * torch.tensor([1, 2, 4, 8])).sum(1)
    counts = torch.bincount(patterns, minlength=16).numpy()
    assert stats.chisquare(counts).pvalue > 1e-4, counts


@pytest.mark.parametrize("p", [0.1, 0.3, 0.77])
def test_elements_eight_apart_are_independent_at_any_p(p, path):
    """Elements 16b + k and 16b + 8 + k share a hash word (its low and high halves on the
    hashed path): their joint keep pattern is that of two independent draws."""
    torch.manual_seed(4)
    mask = (dropout(torch.ones(2_000_000), p) != 0).long().view(-1, 2, 8)
    counts = torch.bincount((2 * mask[:, 0] + mask[:, 1]).flatten(), minlength=4)
    table = counts.numpy().reshape(2, 2)
    assert stats.chi2_contingency(table).pvalue > 1e-4, table


def test_two_calls_draw_independent_masks(path):
    torch.manual_seed(3)
    x = torch.ones(1_000_000)
    first, second = (dropout(x, 0.3) != 0).long(), (dropout(x, 0.3) != 0).long()
    counts = torch.bincount(2 * first + second, minlength=4).numpy().reshape(2, 2)
    assert stats.chi2_contingency(counts).pvalue > 1e-4, counts


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kept_values_are_scaled_exactly(dtype, path):
    torch.manual_seed(4)
    x = torch.randn(500, 33, dtype=dtype)
    p = 0.37
    out = dropout(x, p)
    kept = out != 0
    scale = 1 / _keep_probability(p, path)
    # the float64 product, to within the rounding of the scale and of the product
    expected = (x.double() * scale).to(dtype)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out[kept], expected[kept], rtol=2 * eps, atol=0)
    assert 0.55 < kept.double().mean().item() < 0.71


@pytest.mark.parametrize("device", DEVICES)
def test_output_and_gradient_share_the_mask(device, path):
    torch.manual_seed(5)
    base = torch.rand(300, 7, device=device) + 0.5  # nonzero: a zero output means dropped
    x = base.t().requires_grad_()  # not contiguous
    weights = torch.randn(7, 300, device=device)
    out = dropout(x, 0.25)
    (out * weights).sum().backward()
    kept = out != 0
    scale = 1 / _keep_probability(0.25, path)
    assert out.shape == x.shape
    torch.testing.assert_close(out, torch.where(kept, x.detach() * scale, 0.0))
    torch.testing.assert_close(x.grad, torch.where(kept, weights * scale, 0.0))
    assert 0.7 < kept.float().mean().item() < 0.8


def test_hashed_path_repeats_with_a_seed_whatever_the_threads(monkeypatch):
    if not HAS_KERNEL:
        pytest.skip("the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)")
    monkeypatch.delenv(DISABLE_VARIABLE, raising=False)
    x = torch.randn(3, 200_000)
    threads = torch.get_num_threads()
    try:
        outs = []
        for count in (1, 2):
            torch.set_num_threads(count)
            outs.append(dropout(x, 0.5, generator=torch.Generator().manual_seed(6)))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(outs[0], outs[1])
    torch.manual_seed(7)
    first = Dropout(0.5)(x)
    torch.manual_seed(7)
    assert torch.equal(Dropout(0.5)(x), first)


def test_without_kernels_it_is_torchs_dropout(monkeypatch):
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    x = torch.randn(100, 10)
    assert not hashed_dropout_applies(x)
    torch.manual_seed(8)
    ours = dropout(x, 0.4)
    torch.manual_seed(8)
    assert torch.equal(ours, F.dropout(x, 0.4))


def test_paths_taken(monkeypatch):
    monkeypatch.delenv(DISABLE_VARIABLE, raising=False)
    assert not hashed_dropout_applies(torch.ones(3, dtype=torch.bfloat16))
    assert hashed_dropout_applies(torch.ones(3)) == HAS_KERNEL
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    assert not hashed_dropout_applies(torch.ones(3))
    sage = GraphSAGE(None, num_features=4, hidden_size=8, num_classes=2, dropout=0.3)
    assert isinstance(sage.dropout, Dropout) and isinstance(sage.input_dropout, Dropout)


def test_mean_is_preserved_and_eval_is_identity(path):
    torch.manual_seed(9)
    x = torch.randn(1000, 1000)
    layer = Dropout(0.4)
    out = layer(x)
    assert abs((out - x).mean().item()) < 5 * (x.var().item() * 0.4 / 0.6 / x.numel()) ** 0.5
    assert layer.eval()(x) is x
    assert dropout(x, 0.0) is x


@pytest.mark.parametrize("p", [-0.1, 1.0, True, "0.5"])
def test_bad_p_is_refused(p):
    with pytest.raises(ValueError, match="p must be a number in"):
        Dropout(p)


def test_p_just_below_one_keeps_a_finite_scale(path):
    out = dropout(torch.ones(10), 1 - 1e-9)
    assert torch.isfinite(out).all()
