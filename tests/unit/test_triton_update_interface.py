"""The interface of the fused Triton update (``graphemb.optim.triton_update``): bad
arguments are refused before anything changes, where it is available, the compiled form
(the kernel compiles for GPUs without one), and the interpreter tests of
test_triton_update*.py in a child process where this one cannot interpret.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from triton_steps import (
    CHILD_VARIABLE,
    CUDA,
    DIM,
    FORMULAS,
    HYPER,
    INTERPRETED,
    NO_TRITON,
    NUM,
    VERSION,
    random_state,
)

from graphemb._compiled import disabled
from graphemb.optim import triton_update


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
    expected = INTERPRETED and VERSION is not None and not disabled()  # (the fallback run)
    assert triton_update.available(table, interpret=True) == expected
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
    """Runs the interpreter tests of test_triton_update*.py where TRITON_INTERPRET=1 is set
    before Triton is imported: a child process (this one compiles Triton kernels, or
    imported Triton early)."""
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
            *map(str, sorted(Path(__file__).parent.glob("test_triton_update*.py"))),
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
