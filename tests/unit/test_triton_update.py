"""The fused Triton update (``graphemb.optim.triton_update``) against independent oracles.

Oracles: (a) the formulas of ``graphemb.optim.functional`` applied after a plain torch
coalesce (``unique`` + ``index_add_``), rows gathered to float32 and scattered back with the
table's rounding; (b) torch's own optimizers (SGD and Adagrad on ``nn.Embedding(sparse=True)``,
dense Adam when every row is hit) and the float64 re-derivations of ``oracles.py`` (row-wise
Adagrad, lazy Adam), over several steps with duplicate ids.

Where the kernel runs: on CPU tensors in Triton's interpreter, which is chosen per process
when Triton is imported (``TRITON_INTERPRET=1``). conftest.py (before any test module imports
torch_geometric, which imports Triton) and this module set the variable when they can (no GPU,
Triton not yet imported, variable unset). Where they cannot -- a GPU machine, whose CUDA
tests need the compiled kernel, or Triton imported earlier --
``test_interpreter_tests_in_child_process`` runs the interpreter tests in a child process
with the variable set. CUDA tests run the compiled kernel against the same oracles.

Tolerances: float32 against torch float32, rtol 1e-5 / atol 1e-6; half tables: one unit in
the last place of the table's dtype (both sides compute in float32 and round once); float32
against the float64 references, rtol 1e-4 / atol 1e-5 (as test_optim.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

# Before anything imports Triton: its interpreter mode is fixed per process at import.
if (
    "triton" not in sys.modules
    and "TRITON_INTERPRET" not in os.environ
    and not torch.cuda.is_available()
):
    os.environ["TRITON_INTERPRET"] = "1"

from oracles import DenseLazyReference  # noqa: E402

from graphemb.optim import functional as F  # noqa: E402
from graphemb.optim import triton_update  # noqa: E402

FORMULAS = list(F.FORMULAS)  # the registry the kernel reads

VERSION = triton_update.triton_version()
INTERPRETED = triton_update.interpreted()
CHILD_VARIABLE = "GRAPHEMB_TRITON_CHILD"  # set in the child process of the interpreter tests

if VERSION is None:
    NO_TRITON = (
        "Triton is not installed"
        if triton_update._load().get("too_old") is None
        else f"Triton {triton_update._load()['too_old']} is older than 3.0: its interpreter "
        "cannot run the kernel (triton 2.2.0, the dgl stack's, fails with AttributeError: "
        "'Builder' object has no attribute 'get_int32_ty'), so graphemb neither uses nor "
        "tests it; the modern stack (triton 3.6.0) runs these tests"
    )
else:
    NO_TRITON = ""

INTERPRETER = pytest.param(
    "cpu",
    id="interpreter",
    marks=[
        pytest.mark.skipif(bool(NO_TRITON), reason=NO_TRITON or "-"),
        pytest.mark.skipif(
            not NO_TRITON and not INTERPRETED,
            reason="Triton was imported without TRITON_INTERPRET=1 in this process (a GPU "
            "machine, or an earlier import): test_interpreter_tests_in_child_process runs "
            "these in a child process",
        ),
    ],
)
CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
        pytest.mark.skipif(bool(NO_TRITON), reason=NO_TRITON or "-"),
        pytest.mark.skipif(
            INTERPRETED,
            reason="TRITON_INTERPRET=1 in this process: the compiled kernel is tested in a "
            "process without it (e.g. `make test-gpu`)",
        ),
    ],
)
DEVICES = [INTERPRETER, CUDA]

NUM, DIM = 12, 10  # DIM: not a multiple of the default block (16), nor of 4
F32 = {"rtol": 1e-5, "atol": 1e-6}
F64 = {"rtol": 1e-4, "atol": 1e-5}
HALF = {  # one unit in the last place of the table's dtype
    torch.float16: {"rtol": 2.0**-10, "atol": 1e-6},
    torch.bfloat16: {"rtol": 2.0**-7, "atol": 1e-6},
}
HYPER = {"lr": 0.1, "eps": 1e-6, "beta1": 0.8, "beta2": 0.99}  # the registry's names
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def tolerance(dtype: torch.dtype) -> dict:
    return HALF.get(dtype, F32)


# ---------------------------------------------------------------------------- oracles
def functional_update(formula, weight, state, ids, grads, divisor, hyper):
    """Oracle (a): torch coalesce -> gathered float32 rows -> functional formula -> scatter."""
    if ids.numel() == 0:
        return
    unique, inverse = torch.unique(ids, sorted=True, return_inverse=True)
    g = torch.zeros(unique.numel(), grads.shape[1], device=grads.device)
    g.index_add_(0, inverse, grads).div_(divisor)
    rows = weight[unique].float()
    state_rows = {key: table[unique] for key, table in state.items()}
    lr, eps = hyper["lr"], hyper.get("eps", 0.0)
    if formula == "sgd":
        F.sgd_rows_(rows, g, lr=lr)
    elif formula == "adagrad":
        F.adagrad_rows_(rows, g, state_rows["sum"], lr=lr, eps=eps)
    elif formula == "rowwise_adagrad":
        F.rowwise_adagrad_rows_(rows, g, state_rows["sum"], lr=lr, eps=eps)
    else:
        beta1, beta2 = hyper["beta1"], hyper["beta2"]
        F.adam_rows_(
            rows,
            g,
            state_rows["exp_avg"],
            state_rows["exp_avg_sq"],
            state_rows["step"],
            lr=lr,
            beta1=beta1,
            beta2=beta2,
            eps=eps,
        )
    weight[unique] = rows.to(weight.dtype)
    for key, table in state.items():
        table[unique] = state_rows[key]


def random_state(formula, num, dim, device, gen, max_step=50):
    """Optimizer state as after some training: positive sums, moments, per-row steps."""

    def rand(*shape):
        return torch.rand(*shape, generator=gen).to(device)

    return {
        "sgd": lambda: {},
        "adagrad": lambda: {"sum": rand(num, dim)},
        "rowwise_adagrad": lambda: {"sum": rand(num)},
        "adam": lambda: {
            "exp_avg": rand(num, dim) - 0.5,
            "exp_avg_sq": rand(num, dim) * 0.1,
            "step": torch.randint(0, max_step, (num,), generator=gen).to(device),
        },
    }[formula]()


def zero_state(formula, num, dim, device):
    return {
        key: torch.zeros_like(table)
        for key, table in random_state(formula, num, dim, device, torch.Generator()).items()
    }


def random_steps(steps, batch, num, dim, device, seed, cover_all=False):
    """``steps`` batches of ids with duplicates and one gradient row per id."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        ids = torch.randint(0, num, (batch,), generator=gen)
        if cover_all:
            ids = torch.cat([torch.randperm(num, generator=gen), ids])
        out.append((ids.to(device), torch.randn(ids.numel(), dim, generator=gen).to(device)))
    return out


def kernel_step(formula, weight, state, ids, grads, divisor, hyper, **kwargs):
    """How the optimizer calls the kernel: a stable sort gives index and order."""
    index, order = torch.sort(ids, stable=True)
    triton_update.fused_update(
        formula, weight, state, index, order, grads, divisor, hyper, **kwargs
    )


def assert_matches(formula, dtype, device, steps, divisor=1, hyper=HYPER, seed=0, **kwargs):
    """Kernel and oracle (a) from the same table and state over ``steps``."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(NUM, DIM, generator=gen).to(device=device, dtype=dtype)
    state = random_state(formula, NUM, DIM, device, gen)
    ours_w, ours_s = weight.clone(), {k: v.clone() for k, v in state.items()}
    ref_w, ref_s = weight.clone(), {k: v.clone() for k, v in state.items()}
    for ids, grads in steps:
        kernel_step(formula, ours_w, ours_s, ids, grads, divisor, hyper, **kwargs)
        functional_update(formula, ref_w, ref_s, ids, grads, divisor, hyper)
    torch.testing.assert_close(ours_w.float(), ref_w.float(), **tolerance(dtype))
    for key in state:
        if key == "step":
            assert torch.equal(ours_s[key], ref_s[key])
        else:
            torch.testing.assert_close(ours_s[key], ref_s[key], **F32)
    hit = torch.zeros(NUM, dtype=torch.bool, device=device)
    for ids, _ in steps:
        hit[ids] = True
    assert torch.equal(ours_w[~hit], weight[~hit]), "rows not in index changed"
    for key, table in state.items():
        assert torch.equal(ours_s[key][~hit], table[~hit]), f"state {key} of other rows changed"
    return ours_w, ours_s, weight, state


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


# ---------------------------------------------------------------------------- bad input
def valid_call(formula="adam", device="cpu"):
    gen = torch.Generator().manual_seed(11)
    ids = torch.tensor([3, 1, 3])
    index, order = torch.sort(ids, stable=True)
    return {
        "formula": formula,
        "weight": torch.randn(NUM, DIM, generator=gen),
        "state": random_state(formula, NUM, DIM, "cpu", gen),
        "index": index,
        "order": order,
        "grads": torch.randn(3, DIM, generator=gen),
        "divisor": 1,
        "hyper": dict(HYPER),
    }


def bad_calls():
    """(description, change to a valid call, expected error, words in the message)."""

    def with_state(key, value):
        return lambda call: call["state"].__setitem__(key, value)

    return [
        ("unknown formula", lambda c: c.update(formula="lamb"), ValueError, "lamb"),
        ("float64 table", lambda c: c.update(weight=c["weight"].double()), TypeError, "float64"),
        ("1-D table", lambda c: c.update(weight=c["weight"][0]), ValueError, "weight"),
        ("int32 index", lambda c: c.update(index=c["index"].int()), TypeError, "index"),
        ("order too short", lambda c: c.update(order=c["order"][:2]), ValueError, "order"),
        ("float64 grads", lambda c: c.update(grads=c["grads"].double()), TypeError, "grads"),
        ("grads too wide", lambda c: c.update(grads=torch.zeros(3, DIM + 1)), ValueError, "grads"),
        ("missing state", lambda c: c["state"].pop("exp_avg"), ValueError, "exp_avg"),
        (
            "state of Adagrad",
            lambda c: c.update(state={"sum": torch.zeros(NUM, DIM)}),
            ValueError,
            "sum",
        ),
        ("step as float", with_state("step", torch.zeros(NUM)), TypeError, "step"),
        ("short exp_avg", with_state("exp_avg", torch.zeros(NUM - 1, DIM)), ValueError, "exp_avg"),
        ("negative lr", lambda c: c["hyper"].update(lr=-1.0), ValueError, "lr"),
        ("beta2 of 1", lambda c: c["hyper"].update(beta2=1.0), ValueError, "beta2"),
        ("negative beta1", lambda c: c["hyper"].update(beta1=-0.1), ValueError, "beta1"),
        ("no beta1", lambda c: c["hyper"].pop("beta1"), ValueError, "beta1"),
        (
            "torch's betas only",
            lambda c: c.update(hyper={"lr": 0.1, "eps": 0.0, "betas": (0.9, 0.99)}),
            ValueError,
            "beta1",
        ),  # fmt: skip
        ("lr as a string", lambda c: c["hyper"].update(lr="0.1"), TypeError, "lr"),
        ("zero divisor", lambda c: c.update(divisor=0), ValueError, "divisor"),
        (
            "row out of range",
            lambda c: c.update(index=torch.tensor([1, 3, NUM])),
            IndexError,
            str(NUM),
        ),
        ("negative order", lambda c: c.update(order=torch.tensor([1, -1, 2])), IndexError, "-1"),
        ("unsorted index", lambda c: c.update(index=torch.tensor([3, 1, 3])), ValueError, "sorted"),
    ]


@pytest.mark.parametrize("case", bad_calls(), ids=lambda case: case[0])
def test_bad_input_raises_and_changes_nothing(case):
    """Checked before Triton is needed: on every stack."""
    _, change, error, words = case
    call = valid_call()
    change(call)
    weight = call["weight"]
    weight_before = weight.clone() if isinstance(weight, torch.Tensor) else None
    state_before = {k: v.clone() for k, v in call["state"].items()}
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        triton_update.fused_update(**call)
    if weight_before is not None:
        assert torch.equal(call["weight"], weight_before)
    assert all(torch.equal(call["state"][k], v) for k, v in state_before.items())


@pytest.mark.parametrize("block_size", [3, 0, True, 2 * triton_update.MAX_BLOCK])
def test_bad_block_size(block_size):
    with pytest.raises(ValueError, match="block_size"):
        triton_update.fused_update(**valid_call(), block_size=block_size)


@pytest.mark.skipif(VERSION is not None, reason="a usable Triton is installed")
def test_without_usable_triton_raises_and_changes_nothing():
    call = valid_call()
    before = call["weight"].clone()
    with pytest.raises(RuntimeError, match="Triton >= 3.0"):
        triton_update.fused_update(**call)
    assert torch.equal(call["weight"], before)
    assert not triton_update.available(torch.zeros(NUM, DIM), interpret=True)


# ---------------------------------------------------------------------------- available
def test_available_on_cpu_only_when_asked():
    table = torch.zeros(NUM, DIM)
    assert not triton_update.available(table)  # CPU steps never go to the interpreter
    assert triton_update.available(table, interpret=True) == (INTERPRETED and VERSION is not None)
    assert not triton_update.available(table.double(), interpret=True)
    assert not triton_update.available(torch.zeros(DIM, NUM).t(), interpret=True)
    assert not triton_update.available(torch.zeros(NUM), interpret=True)


def test_disable_variable_turns_it_off(monkeypatch):
    monkeypatch.setenv("GRAPHEMB_DISABLE_KERNELS", "1")
    assert not triton_update.available(torch.zeros(NUM, DIM), interpret=True)


@pytest.mark.parametrize("device", [CUDA])
def test_available_on_cuda(device):
    table = torch.zeros(NUM, DIM, device=device)
    assert triton_update.available(table)
    assert triton_update.available(table.half())
    assert not triton_update.available(table.double())


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


# ---------------------------------------------------------------------------- compiled form
COMPILE_SCRIPT = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from graphemb.optim import triton_update

loaded = triton_update._load()
assert not loaded["interpreted"]
names = ["weight_ptr", "state_a_ptr", "state_b_ptr", "step_ptr", "index_ptr", "order_ptr",
         "grads_ptr", "num_positions", "dim", "divisor", "lr", "eps", "beta2",
         "one_minus_beta1", "one_minus_beta2", "inv_lr", "eps_over_lr"]
types = ["*fp32", "*fp32", "*fp32", "*i64", "*i64", "*i64", "*fp32", "i32", "i32"] + ["fp32"] * 8
report = []
for table, formula, block, update, arch, ones in json.loads(sys.argv[1]):
    signature = dict(zip(names, ["*" + table] + types[1:]))
    flags = triton_update.branch_flags(formula)
    signature.update({name: "constexpr" for name in flags})
    signature.update(BLOCK_D="constexpr", UPDATE_WEIGHT="constexpr")
    constants = {**flags, "BLOCK_D": block, "UPDATE_WEIGHT": update}
    if ones:  # Triton specialises integer arguments equal to 1 into constants
        signature.update(num_positions="constexpr", dim="constexpr")
        constants.update(num_positions=1, dim=1)
    compiled = triton.compile(ASTSource(loaded["kernel"], signature, constants),
                              target=GPUTarget("cuda", arch, 32))
    report.append({"cubin": len(compiled.asm["cubin"]), "ptx": compiled.asm["ptx"]})
print(json.dumps(report))
"""


@pytest.mark.skipif(bool(NO_TRITON), reason=NO_TRITON or "-")
def test_kernel_compiles_for_gpus():
    """The compiled form, without a GPU: Triton compiles the kernel to machine code (cubin)
    for sm_75/80/90 in a process without TRITON_INTERPRET, with IEEE-rounded square roots
    and divisions (the interpreter alone accepts code the compiler rejects, and rounds as
    numpy does). Running the compiled kernel needs a GPU: the CUDA tests."""
    variants = [["bf16", formula, 16, True, 90, False] for formula in FORMULAS]
    variants += [["fp16", "adam", 1024, True, 80, False], ["fp32", "adam", 128, False, 75, False]]
    variants += [["fp32", "rowwise_adagrad", 16, True, 90, True]]  # one row of width 1
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    result = subprocess.run(
        [sys.executable, "-c", COMPILE_SCRIPT, json.dumps(variants)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(report) == len(variants) and all(r["cubin"] > 0 for r in report)
    for (table, formula, _, update, _, _), compiled in zip(variants, report, strict=True):
        ptx = compiled["ptx"]
        if formula != "sgd" and update:
            assert "sqrt.rn.f32" in ptx and "div.rn.f32" in ptx, (formula, table)
        if formula == "adam" and update:
            assert "mul.f64" in ptx  # bias corrections in float64
        assert "sqrt.approx" not in ptx and "div.approx" not in ptx and "div.full" not in ptx


# ---------------------------------------------------------------------------- child process
@pytest.mark.skipif(bool(NO_TRITON), reason=NO_TRITON or "-")
@pytest.mark.skipif(
    INTERPRETED, reason="the interpreter tests ran in this process (TRITON_INTERPRET=1)"
)
def test_interpreter_tests_in_child_process():
    """Runs this file's interpreter tests where TRITON_INTERPRET=1 is set before Triton is
    imported: a child process (this one compiles Triton kernels, or imported Triton early)."""
    assert os.environ.get(CHILD_VARIABLE) != "1", "the child process must be interpreted"
    env = {**os.environ, "TRITON_INTERPRET": "1", CHILD_VARIABLE: "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not cuda",
            "-k",
            "not child_process and not without_usable_triton and not compiles",
            os.path.abspath(__file__),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary, summary


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
