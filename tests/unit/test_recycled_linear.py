"""``graphemb.nn.recycled_linear.linear``: ``F.linear``'s floats forward and backward (the
oracle is ``F.linear`` under autograd), its large outputs in memory that is written again
only once nothing holds it, and ``F.linear`` itself wherever that path does not apply."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from graphemb.nn.recycled_linear import linear

# (N, K, M): below and above the 4 MiB from which results are recycled (float32)
SHAPES = [(7, 5, 3), (1, 4, 9), (0, 6, 2), (9_000, 128, 128)]


def _inputs(n: int, k: int, m: int, dtype: torch.dtype, seed: int, bias: bool):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, k, generator=generator, dtype=dtype).requires_grad_()
    weight = torch.randn(m, k, generator=generator, dtype=dtype).requires_grad_()
    b = torch.randn(m, generator=generator, dtype=dtype).requires_grad_() if bias else None
    return x, weight, b


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_the_floats_of_f_linear_forward_and_backward(dtype, bias):
    for seed, (n, k, m) in enumerate(SHAPES):
        ours = _inputs(n, k, m, dtype, seed, bias)
        theirs = [None if t is None else t.detach().clone().requires_grad_() for t in ours]
        out, expected = linear(*ours), F.linear(*theirs)
        assert out.shape == (n, m) and out.dtype == dtype
        assert torch.equal(out, expected)
        grad = torch.randn(n, m, generator=torch.Generator().manual_seed(50 + seed), dtype=dtype)
        out.backward(grad)
        expected.backward(grad)
        for mine, reference in zip(ours, theirs, strict=True):
            if mine is not None:
                torch.testing.assert_close(mine.grad, reference.grad, rtol=1e-6, atol=1e-5)


def test_only_the_inputs_that_need_it_get_a_gradient():
    x, weight, bias = _inputs(9_000, 128, 128, torch.float32, 3, True)
    x.requires_grad_(False)
    linear(x, weight, bias).sum().backward()
    assert x.grad is None
    torch.testing.assert_close(weight.grad, x.sum(0).expand(128, -1), rtol=1e-5, atol=1e-3)
    assert torch.equal(bias.grad, torch.full((128,), 9_000.0))


def test_a_held_output_is_never_written_over_and_a_dropped_one_is_reused():
    """A result still held keeps its values through the next calls; once dropped, its
    memory serves the next call of that size (no fresh pages)."""
    x, weight, bias = _inputs(9_000, 128, 128, torch.float32, 4, True)
    with torch.no_grad():
        held = linear(x, weight, bias)
        kept = held.clone()
        other = linear(x * 2, weight, bias)
        assert other.data_ptr() != held.data_ptr()
        assert torch.equal(held, kept)
        address = other.data_ptr()
        del other
        again = linear(x, weight, bias)
        assert again.data_ptr() == address
        assert torch.equal(again, kept)


def test_a_second_derivative_is_refused():
    x, weight, bias = _inputs(9_000, 128, 128, torch.float32, 5, True)
    (grad_x,) = torch.autograd.grad(linear(x, weight, bias).square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        grad_x.sum().backward()


def test_autocast_gets_f_linear_itself():
    x, weight, bias = _inputs(16, 8, 4, torch.float32, 6, True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = linear(x, weight, bias), F.linear(x, weight, bias)
    assert out.dtype == expected.dtype == torch.bfloat16
    assert torch.equal(out, expected)


def test_other_inputs_get_f_linear_itself():
    """A 3-D input is F.linear's; mismatched dtypes raise F.linear's own error."""
    generator = torch.Generator().manual_seed(7)
    x, weight = torch.randn(2, 3, 4, generator=generator), torch.randn(5, 4, generator=generator)
    assert torch.equal(linear(x, weight), F.linear(x, weight))
    with pytest.raises(RuntimeError):
        linear(x[0].double(), weight)
