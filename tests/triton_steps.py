"""The fused Triton update's test setup (``graphemb.optim.triton_update``), shared by
``tests/unit/test_triton_update*.py``: where the kernel runs (Triton's interpreter on CPU
tensors, or CUDA), the tolerances, and oracle (a): the formulas of
``graphemb.optim.functional`` applied after a plain torch coalesce (``unique`` +
``index_add_``), rows gathered to float32 and scattered back with the table's rounding.

Triton's interpreter is chosen per process when Triton is imported (``TRITON_INTERPRET=1``).
conftest.py (before any test module imports torch_geometric, which imports Triton) and this
module set the variable when they can (no GPU, Triton not yet imported, variable unset).
Where they cannot -- a GPU machine, whose CUDA tests need the compiled kernel, or Triton
imported earlier -- ``test_interpreter_tests_in_child_process`` runs the interpreter tests
in a child process with the variable set.

Tolerances: float32 against torch float32, rtol 1e-5 / atol 1e-6; half tables: one unit in
the last place of the table's dtype (both sides compute in float32 and round once); float32
against the float64 references, rtol 1e-4 / atol 1e-5 (as test_optim.py).
"""

from __future__ import annotations

import os
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


# ---------------------------------------------------------------------------- oracle (a)
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
