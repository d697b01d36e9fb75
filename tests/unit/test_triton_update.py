"""The fused Triton update (``graphemb.optim.triton_update``) against independent oracles.

Oracles: (a) the formulas of ``graphemb.optim.functional`` applied after a plain torch
coalesce (``triton_steps.functional_update``); (b) torch's own optimizers (SGD and Adagrad
on ``nn.Embedding(sparse=True)``, dense Adam when every row is hit) and the float64
re-derivations of ``oracles.py`` (row-wise Adagrad, lazy Adam), over several steps with
duplicate ids. The kernel runs in Triton's interpreter on CPU tensors, and compiled on CUDA
ones (``triton_steps``); its interface (checks, availability, compiled form):
test_triton_update_interface.py.
"""

from __future__ import annotations

import pytest
import torch
from oracles import DenseLazyReference
from triton_steps import (
    CUDA,
    DEVICES,
    DIM,
    DTYPES,
    F32,
    F64,
    FORMULAS,
    HYPER,
    NUM,
    assert_matches,
    functional_update,
    kernel_step,
    random_state,
    random_steps,
    tolerance,
    zero_state,
)

from graphemb.optim import triton_update


# ---------------------------------------------------------------------------- (a) functional
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("formula", FORMULAS)
def test_matches_functional_with_duplicates(formula, dtype, device):
    steps = random_steps(2, 16, NUM, DIM, device, seed=1)
    ours_w, _, weight, _ = assert_matches(formula, dtype, device, steps, divisor=3)
    assert not torch.equal(ours_w, weight), "the step must change the table"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("formula", FORMULAS)
def test_row_in_several_chunks(formula, device):
    """block_size 4 < DIM 10: three chunks, the last one partial (masked)."""
    steps = random_steps(2, 12, NUM, DIM, device, seed=2)
    assert_matches(formula, torch.float32, device, steps, divisor=2, block_size=4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("formula", FORMULAS)
def test_many_duplicates_of_one_row(formula, device):
    gen = torch.Generator().manual_seed(3)
    ids = torch.cat([torch.full((40,), 5), torch.tensor([0, 11, 5])])
    ids = ids[torch.randperm(ids.numel(), generator=gen)].to(device)
    grads = torch.randn(ids.numel(), DIM, generator=gen).to(device)
    assert_matches(formula, torch.float32, device, [(ids, grads)])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("formula", FORMULAS)
def test_one_row(formula, device):
    ids = torch.tensor([NUM - 1], device=device)
    grads = torch.randn(1, DIM, generator=torch.Generator().manual_seed(4)).to(device)
    assert_matches(formula, torch.bfloat16, device, [(ids, grads)])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("formula", FORMULAS)
def test_empty_index_changes_nothing(formula, device):
    gen = torch.Generator().manual_seed(5)
    weight = torch.randn(NUM, DIM, generator=gen).to(device)
    state = random_state(formula, NUM, DIM, device, gen)
    before_w, before_s = weight.clone(), {k: v.clone() for k, v in state.items()}
    empty = torch.empty(0, dtype=torch.int64, device=device)
    triton_update.fused_update(
        formula, weight, state, empty, empty, torch.empty(0, DIM, device=device), 1, HYPER
    )
    assert torch.equal(weight, before_w)
    assert all(torch.equal(state[k], before_s[k]) for k in state)


@pytest.mark.parametrize("device", DEVICES)
def test_adam_large_steps_and_zero_lr(device):
    """Bias corrections of rows with thousands of past steps; lr 0 moves moments only."""
    gen = torch.Generator().manual_seed(6)
    ids = torch.randint(0, NUM, (10,), generator=gen).to(device)
    grads = torch.randn(10, DIM, generator=gen).to(device)
    for lr in (0.05, 0.0):
        weight = torch.randn(NUM, DIM, generator=gen).to(device)
        state = random_state("adam", NUM, DIM, device, gen, max_step=5000)
        ref_w, ref_s = weight.clone(), {k: v.clone() for k, v in state.items()}
        hyper = {"lr": lr, "eps": 1e-8, "beta1": 0.9, "beta2": 0.999}
        kernel_step("adam", weight, state, ids, grads, 1, hyper)
        functional_update("adam", ref_w, ref_s, ids, grads, 1, hyper)
        torch.testing.assert_close(weight, ref_w, **F32)
        torch.testing.assert_close(state["exp_avg_sq"], ref_s["exp_avg_sq"], **F32)
        assert torch.equal(state["step"], ref_s["step"])
        if lr == 0.0:
            assert torch.equal(weight, ref_w)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # interpreter
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_tables_round_like_torch(dtype, device):
    """float32 results are stored rounded to nearest even, bit for bit as torch's ``.to``:
    random bit patterns (all exponents, subnormals), ties, carries into the exponent,
    overflow to infinity."""
    gen = torch.Generator().manual_seed(13)
    bits = torch.randint(-(2**31), 2**31 - 1, (2000,), generator=gen, dtype=torch.int64)
    values = bits.to(torch.int32).view(torch.float32)
    special = torch.tensor(
        [
            1 + 2**-8,
            1 + 3 * 2**-8,
            -(1 + 2**-8),
            1 + 2**-11,
            1 + 3 * 2**-11,
            2 - 2**-9,
            65519.0,
            65520.0,
            3.3961e38,
            1e-40,
            -1e-39,
            0.0,
        ]
    )
    values = torch.cat([values[values.isfinite()], special])
    weight = torch.zeros(1, values.numel(), dtype=dtype, device=device)
    index = torch.zeros(1, dtype=torch.int64, device=device)
    # w = 0 - 1 * (-x) = x exactly in float32: the store's rounding is all that is left
    triton_update.fused_update(
        "sgd", weight, {}, index, index, -values[None].to(device), 1, {"lr": 1.0}
    )
    expected = values.to(dtype)
    assert torch.equal(weight[0].cpu().view(torch.int16), expected.view(torch.int16))


# ---------------------------------------------------------------------------- (b) torch
def torch_reference(formula, table, steps, divisor, hyper):
    """torch's optimizer on ``nn.Embedding``; half tables are rounded after every step (float32
    math, one rounding per step, as the kernel)."""
    emb = torch.nn.Embedding(NUM, DIM, sparse=formula != "adam", device=table.device)
    if formula == "sgd":
        opt = torch.optim.SGD(emb.parameters(), lr=hyper["lr"])
    elif formula == "adagrad":
        opt = torch.optim.Adagrad(emb.parameters(), lr=hyper["lr"], eps=hyper["eps"])
    else:
        opt = torch.optim.Adam(
            emb.parameters(),
            lr=hyper["lr"],
            betas=(hyper["beta1"], hyper["beta2"]),
            eps=hyper["eps"],
        )
    for ids, grads in steps:
        with torch.no_grad():
            emb.weight.copy_(table.float())
        opt.zero_grad()
        ((emb(ids) * grads).sum() / divisor).backward()
        opt.step()
        table = emb.weight.detach().to(table.dtype)
    state = opt.state[emb.weight]
    return table, {k: v for k, v in state.items() if k != "step"}


@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("formula", ["sgd", "adagrad", "adam"])
def test_matches_torch_optimizers(formula, dtype, device):
    """SGD and Adagrad with sparse gradients; Adam dense, every row hit at every step."""
    steps = random_steps(3, 10, NUM, DIM, device, seed=7, cover_all=formula == "adam")
    table = torch.randn(NUM, DIM, generator=torch.Generator().manual_seed(8))
    table = table.to(device=device, dtype=dtype)
    ours, state = table.clone(), zero_state(formula, NUM, DIM, device)
    for ids, grads in steps:
        kernel_step(formula, ours, state, ids, grads, 2, HYPER)
    ref, ref_state = torch_reference(formula, table, steps, 2, HYPER)
    torch.testing.assert_close(ours.float(), ref.float(), **tolerance(dtype))
    for key, value in ref_state.items():
        torch.testing.assert_close(state[key], value, **F32)
    if formula == "adam":
        assert torch.equal(state["step"].cpu(), torch.full((NUM,), len(steps)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("formula", ["rowwise_adagrad", "adam"])
def test_matches_float64_references(formula, device):
    """Row-wise Adagrad and lazy Adam (rows left out of steps) against oracles.py."""
    steps = random_steps(4, 6, NUM, DIM, device, seed=9)
    table = torch.randn(NUM, DIM, generator=torch.Generator().manual_seed(10))
    ours, state = table.to(device), zero_state(formula, NUM, DIM, device)
    betas = (HYPER["beta1"], HYPER["beta2"])
    ref = DenseLazyReference(table, formula, HYPER["lr"], eps=HYPER["eps"], betas=betas)
    for ids, grads in steps:
        kernel_step(formula, ours, state, ids, grads, 1, HYPER)
        dense = torch.zeros(NUM, DIM, dtype=torch.float64).index_add_(
            0, ids.cpu(), grads.cpu().double()
        )
        ref.apply(ids.cpu(), dense)
    torch.testing.assert_close(ours.cpu().double(), ref.weight, **F64)
    if formula == "adam":
        steps_taken = state["step"].cpu()
        assert steps_taken.min() < len(steps), "some rows must be left out of some steps"
        assert torch.equal(steps_taken, ref.step)
        torch.testing.assert_close(state["exp_avg"].cpu().double(), ref.exp_avg, **F64)
        torch.testing.assert_close(state["exp_avg_sq"].cpu().double(), ref.exp_avg_sq, **F64)
    else:
        torch.testing.assert_close(state["sum"].cpu().double(), ref.row_sum, **F64)


# ---------------------------------------------------------------------------- CUDA at scale
@pytest.mark.parametrize("device", [CUDA])
@pytest.mark.parametrize("dim", [1, 33, 128, 1500])
@pytest.mark.parametrize("formula", FORMULAS)
def test_cuda_large_batch(formula, dim, device):
    """A realistic step: 200k ids over 50k rows (about 4 per row; 16k over 4k for the widest
    rows), widths that are not multiples of the block, one chunk and two (1500 > 1024)."""
    gen = torch.Generator().manual_seed(12)
    num, batch = (50_000, 200_000) if dim <= 128 else (4_000, 16_000)
    ids = torch.randint(0, num, (batch,), generator=gen).to(device)
    grads = torch.randn(batch, dim, generator=gen).to(device)
    for dtype in DTYPES:
        weight = torch.randn(num, dim, generator=gen).to(device=device, dtype=dtype)
        state = random_state(formula, num, dim, device, gen)
        ref_w, ref_s = weight.clone(), {k: v.clone() for k, v in state.items()}
        kernel_step(formula, weight, state, ids, grads, 2, HYPER)
        functional_update(formula, ref_w, ref_s, ids, grads, 2, HYPER)
        torch.testing.assert_close(weight.float(), ref_w.float(), **tolerance(dtype))
        for key in state:
            torch.testing.assert_close(state[key], ref_s[key], **F32)


@pytest.mark.parametrize("device", [CUDA])
@pytest.mark.parametrize("formula", ["adam", "rowwise_adagrad"])
def test_cuda_repeated_runs_are_bit_identical(formula, device):
    """The formulas whose per-row scalar state (step, row sum) every thread of a program
    reads and one writes: a missing barrier there made some warps read the new value (seen
    on an H100: Adam rows off by one step in some 32-column groups, differing run to run)."""
    gen = torch.Generator().manual_seed(3)
    num, batch, dim = 4_000, 16_000, 1500
    ids = torch.randint(0, num, (batch,), generator=gen).to(device)
    grads = torch.randn(batch, dim, generator=gen).to(device)
    weight = torch.randn(num, dim, generator=gen).to(device)
    state = random_state(formula, num, dim, device, gen)
    results = []
    for _ in range(5):
        w, s = weight.clone(), {k: v.clone() for k, v in state.items()}
        kernel_step(formula, w, s, ids, grads, 2, HYPER)
        results.append((w, s))
    for w, s in results[1:]:
        assert torch.equal(w, results[0][0])
        assert all(torch.equal(s[key], results[0][1][key]) for key in state)
