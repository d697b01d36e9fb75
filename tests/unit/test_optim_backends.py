"""The sparse optimizers' machinery: the one update hook every backend goes through (a fake
fused kernel written from the formulas in float64 checks what each step hands it), the
backend chosen once, the formula registry and its match with the compiled module, and the
gradient hand-off from NodeEmbedding."""

from __future__ import annotations

import contextlib

import pytest
import torch
from optim_cases import (
    DIM,
    F32,
    NUM,
    batches,
    initial_table,
    loss_of,
    train_graphemb,
    train_torch,
)

from graphemb import NodeEmbedding
from graphemb.optim import SparseAdagrad, SparseAdam, SparseRowWiseAdagrad, SparseSGD


# ---------------------------------------------------------------------- one update hook
class FakeFusedKernel:
    """Stands in for a fused kernel (the interface of graphemb.optim.kernels.fused_update and
    triton_update.fused_update), written from the formulas in float64: checks what the step
    hands over, then updates."""

    def __init__(self):
        self.calls = []

    def fused_update(self, formula, weight, state, index, order, grads, divisor, hyper):
        self.calls.append(formula)
        assert torch.equal(index, torch.sort(index).values), "index must be sorted"
        assert torch.equal(torch.sort(order).values, torch.arange(order.numel())), "order"
        rows, inverse = torch.unique_consecutive(index, return_inverse=True)
        g = torch.zeros(rows.numel(), grads.shape[1], dtype=torch.float64)
        g.index_add_(0, inverse, grads[order].double())
        g /= divisor
        w = weight[rows].double()
        lr = hyper["lr"]
        if formula == "sgd":
            w -= lr * g
        elif formula == "adagrad":
            s = state["sum"][rows].double() + g * g
            w -= lr * g / (s.sqrt() + hyper["eps"])
            state["sum"][rows] = s.float()
        elif formula == "adam":
            b1, b2, eps = hyper["beta1"], hyper["beta2"], hyper["eps"]
            t = state["step"][rows] + 1
            m = b1 * state["exp_avg"][rows].double() + (1 - b1) * g
            v = b2 * state["exp_avg_sq"][rows].double() + (1 - b2) * g * g
            tt = t.double()[:, None]
            w -= lr * (m / (1 - b1**tt)) / ((v / (1 - b2**tt)).sqrt() + eps)
            state["step"][rows], state["exp_avg"][rows], state["exp_avg_sq"][rows] = (
                t,
                m.float(),
                v.float(),
            )
        else:
            raise AssertionError(formula)
        weight[rows] = w.to(weight.dtype)


@pytest.fixture
def fake_fused(monkeypatch):
    """Route every step through a fused backend other than the C++ kernels, sorting with
    ``torch.sort`` into the optimizer's reused buffers as the GPU backend does."""
    from graphemb.optim import backends

    fake = FakeFusedKernel()

    def select(weight, state, workspace, formula):
        return backends.FusedBackend("fake", fake.fused_update, workspace=workspace)

    monkeypatch.setattr(backends, "select_backend", select)
    return fake


@pytest.mark.parametrize(
    "make_ours, make_torch, sparse, cover_all",
    [
        (lambda p: SparseSGD(p, lr=0.3), lambda p: torch.optim.SGD(p, lr=0.3), True, False),
        (
            lambda p: SparseAdagrad(p, lr=0.2),
            lambda p: torch.optim.Adagrad(p, lr=0.2, eps=1e-10),
            True,
            False,
        ),
        (
            lambda p: SparseAdam(p, lr=0.05, betas=(0.8, 0.99)),
            lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.99)),
            False,
            True,
        ),
    ],
    ids=["sgd", "adagrad", "adam"],
)
def test_fused_backend_gets_sorted_rows_order_divisor_and_hyper_parameters(
    fake_fused, make_ours, make_torch, sparse, cover_all
):
    emb, _ = train_graphemb(make_ours, "cpu", steps=5, cover_all=cover_all)
    ref, _ = train_torch(make_torch, "cpu", sparse=sparse, steps=5, cover_all=cover_all)
    assert len(fake_fused.calls) == 5, "the step did not go through the fused backend"
    torch.testing.assert_close(emb.weight, ref.weight.detach(), **F32)


def test_optimizers_state_their_formula_once():
    """No optimizer keeps its own update hooks: the base class picks the backend."""
    from graphemb.optim.functional import FORMULAS

    for cls in (SparseSGD, SparseAdagrad, SparseRowWiseAdagrad, SparseAdam):
        assert cls.formula in FORMULAS
        for hook in ("_update_rows", "_fused_update", "_update", "_torch_update"):
            assert hook not in vars(cls), f"{cls.__name__} overrides {hook}"


def test_step_counter_survives_load_state_dict_and_checkpoints(tmp_path):
    """One owner of optimizer state: load_state_dict and graphemb.load restore the same
    things -- groups, per-row state and the optimizer's step counter."""
    import graphemb

    emb, opt = train_graphemb(lambda p: SparseAdam(p, lr=0.05), "cpu", steps=4)
    opt.param_groups[0]["lr"] = 0.02
    saved = opt.state_dict()
    graphemb.save(tmp_path / "c", emb, opt)
    for restore in ("state_dict", "checkpoint"):
        fresh = NodeEmbedding(NUM, DIM, "table")
        fresh_opt = SparseAdam([fresh], lr=0.05)
        if restore == "state_dict":
            fresh_opt.load_state_dict(saved)
        else:
            graphemb.load(tmp_path / "c", fresh, fresh_opt)
        assert fresh_opt.steps_taken == 4, restore
        assert fresh_opt.param_groups[0]["lr"] == 0.02, restore
        assert torch.equal(fresh_opt.state[fresh]["step"], opt.state[emb]["step"]), restore
    older = {k: v for k, v in saved.items() if k != "steps_taken"}  # a dict of older versions
    fresh_opt.load_state_dict(older)
    assert fresh_opt.steps_taken == 0


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_steps_use_triton_when_it_is_available(monkeypatch):
    from graphemb.optim import triton_update

    if not triton_update.available(torch.zeros(2, 2, device="cuda")):
        pytest.skip("graphemb.optim.triton_update cannot run here")
    calls = []
    original = triton_update.fused_update

    def counted(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(triton_update, "fused_update", counted)
    emb, opt = train_graphemb(lambda p: SparseAdagrad(p, lr=0.2), "cuda", steps=5)
    ref, ref_opt = train_torch(
        lambda p: torch.optim.Adagrad(p, lr=0.2, eps=1e-10), "cuda", sparse=True, steps=5
    )
    assert opt.update_backend(emb) == "triton"
    assert calls == ["adagrad"] * 5
    torch.testing.assert_close(emb.weight, ref.weight.detach(), **F32)


# ---------------------------------------------------------------------- backend, registry
def test_backend_is_chosen_once_when_the_optimizer_takes_the_embedding(monkeypatch):
    """GRAPHEMB_DISABLE_KERNELS counts when the optimizer is created, not at each step."""
    from graphemb.optim import kernels

    monkeypatch.setenv(kernels.DISABLE_VARIABLE, "1")
    emb = NodeEmbedding(NUM, DIM, "chosen", init_func=lambda t: t.copy_(initial_table()))
    opt = SparseAdagrad([emb], lr=0.2)
    assert opt.update_backend(emb) == "torch"
    monkeypatch.delenv(kernels.DISABLE_VARIABLE)
    for ids, target in batches(steps=3):
        loss_of(emb(ids), target).backward()
        opt.step()
    assert opt.update_backend(emb) == "torch"
    other = NodeEmbedding(NUM, DIM, "chosen-later")
    expected = "cpu-kernels" if kernels.available() else "torch"
    assert SparseAdagrad([other], lr=0.2).update_backend(other) == expected
    # the steps above went through pure torch: they equal torch's Adagrad
    ref, _ = train_torch(lambda p: torch.optim.Adagrad(p, lr=0.2, eps=1e-10), "cpu", True, steps=3)
    torch.testing.assert_close(emb.weight, ref.weight.detach(), **F32)


def test_registry_names_each_state_kind_once():
    from graphemb.optim.functional import FORMULAS

    for name, formula in FORMULAS.items():
        assert formula.name == name
        assert len(set(formula.state_keys)) == len(formula.state)
        assert set(formula.hyper) <= {"lr", "eps", "beta1", "beta2"}, formula.name


def _fake_kernels(api_version, table):
    import types

    module = types.ModuleType("graphemb_kernels")
    module.__file__ = "/elsewhere/graphemb_kernels.so"
    module.API_VERSION = api_version
    module.formulas = lambda: table
    return module


def test_compiled_module_is_matched_formula_by_formula(monkeypatch):
    """Formulas are matched by name, each on its own: one the module lacks, or states with
    other tables, is left to another backend with a reason that names it; the others keep
    their kernels under the module's own numbers. A module of another interface version is
    left aside whole."""
    from graphemb.optim import kernels
    from graphemb.optim.functional import FORMULAS

    good = [kernels._registry_entry(f) for f in FORMULAS.values()]
    by_name = {entry[0]: entry for entry in good}
    other_adagrad = ("adagrad", [("sum", "row")], ["lr", "eps"])  # built from other sources
    table = [by_name["adam"], other_adagrad, by_name["sgd"]]  # no row-wise Adagrad, reordered
    current = kernels._API_VERSION
    monkeypatch.setattr(kernels, "load_module", lambda: (_fake_kernels(current, table), ""))
    loaded, reason, ids, missing = kernels._load()
    assert loaded is not None and reason == ""
    assert ids == {"adam": 0, "sgd": 2}
    assert "has no formula 'rowwise_adagrad'" in missing["rowwise_adagrad"]
    assert "compiles" in missing["adagrad"] and "/elsewhere" in missing["adagrad"]
    monkeypatch.setattr(kernels, "load_module", lambda: (_fake_kernels(1, good), ""))
    loaded, reason, ids, _ = kernels._load()
    assert loaded is None and "API version 1" in reason and "/elsewhere" in reason
    assert ids == {}


def test_a_new_formula_is_one_function_one_entry_one_class(monkeypatch):
    """A toy optimizer (sign SGD) added by one registry entry and one class: it trains, with
    a one-line notice, on the pure-torch backend wherever the fused kernels lack it, and the
    other optimizers keep theirs. Oracle: the update written out by hand."""
    from graphemb.optim import SparseOptimizer, SparseSGD, kernels
    from graphemb.optim.backends import KernelFallbackWarning
    from graphemb.optim.functional import FORMULAS, Formula

    def sign_sgd_rows_(weight, grad, *, lr):
        weight.sub_(lr * torch.sign(grad))

    monkeypatch.setitem(FORMULAS, "sign_sgd", Formula("sign_sgd", sign_sgd_rows_, (), ("lr",)))

    class SignSGD(SparseOptimizer):
        formula = "sign_sgd"

        def __init__(self, params, lr):
            super().__init__(params, {"lr": lr})

    emb = NodeEmbedding(NUM, DIM, "sign-sgd", init_func=lambda t: t.copy_(initial_table()))
    expected = initial_table().clone()
    context = pytest.warns(KernelFallbackWarning, match="'sign_sgd'")
    with context if kernels.available() else contextlib.nullcontext():
        opt = SignSGD([emb], lr=0.1)
    assert opt.update_backend(emb) == "torch"
    for ids, target in batches(steps=3):
        rows = emb(ids)
        rows.retain_grad()
        loss_of(rows, target).backward()
        grad = torch.zeros_like(expected).index_add_(0, ids.flatten(), rows.grad.flatten(0, -2))
        touched = torch.zeros(NUM, dtype=torch.bool)
        touched[ids.flatten()] = True
        expected[touched] -= 0.1 * torch.sign(grad[touched])
        opt.step()
    torch.testing.assert_close(emb.weight, expected, **F32)
    other = NodeEmbedding(NUM, DIM, "sgd-beside")
    assert SparseSGD([other], lr=0.1).update_backend(other) == (
        "cpu-kernels" if kernels.available() else "torch"
    )


# ---------------------------------------------------------------------- gradient hand-off
def test_take_gradients_returns_the_recorded_rows_once():
    emb = NodeEmbedding(6, 2, "hand-off")
    (emb(torch.tensor([4, 1])) * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    (2 * emb(torch.tensor([[4]]))).sum().backward()
    ids, grads, pushed = emb.take_gradients()
    assert not pushed
    assert ids.tolist() == [4, 1, 4]
    assert grads.tolist() == [[1.0, 2.0], [3.0, 4.0], [2.0, 2.0]]
    ids, grads, _ = emb.take_gradients()
    assert ids.numel() == 0 and grads.shape == (0, 2)
    emb(torch.tensor([0])).sum().backward()
    emb.clear_gradients()
    assert emb.take_gradients().ids.numel() == 0


def test_optimizers_use_no_private_member_of_node_embedding():
    """The hand-off between NodeEmbedding and the optimizers is public: no module of
    graphemb.optim reaches into a private attribute of another object."""
    import ast
    import pathlib

    import graphemb.optim

    folder = pathlib.Path(graphemb.optim.__file__).parent
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in ("embedding", "emb", "e")
            ):
                raise AssertionError(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}")
