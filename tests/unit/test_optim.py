"""Single-process sparse optimizers against independent oracles.

Oracles: torch's own optimizers on ``nn.Embedding`` (SGD, Adagrad with sparse gradients;
dense Adam when every row is hit every step) and float64 re-derivations of the published
formulas (``oracles.DenseLazyReference``) for lazy Adam and row-wise Adagrad.

Tolerances: float32 against torch float32, rtol 1e-5 / atol 1e-6 after 30 steps (the two
differ only in the order of floating-point operations); float32 against float64,
rtol 1e-4 / atol 1e-5.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from oracles import DenseLazyReference

from graphemb import NodeEmbedding
from graphemb.optim import SparseAdagrad, SparseAdam, SparseRowWiseAdagrad, SparseSGD

NUM, DIM, STEPS = 50, 8, 30
F32 = {"rtol": 1e-5, "atol": 1e-6}
F64 = {"rtol": 1e-4, "atol": 1e-5}


def batches(steps=STEPS, batch=40, seed=0, cover_all=False):
    """Ids with many duplicates (40 draws out of 50 rows) and a regression target."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(0, NUM, (batch,), generator=gen)
        if cover_all:
            ids = torch.cat([torch.randperm(NUM, generator=gen), ids])
        yield ids, torch.randn(ids.numel(), DIM, generator=gen)


def loss_of(rows, target):
    return ((rows - target) ** 2).sum() / target.shape[0]


def initial_table(seed=1):
    return torch.randn(NUM, DIM, generator=torch.Generator().manual_seed(seed))


def train_graphemb(make_opt, device, dtype=torch.float32, **batch_kwargs):
    emb = NodeEmbedding(
        NUM, DIM, "table", device=device, dtype=dtype, init_func=lambda t: t.copy_(initial_table())
    )
    opt = make_opt([emb])
    for ids, target in batches(**batch_kwargs):
        ids, target = ids.to(device), target.to(device)
        rows = emb(ids.view(2, -1))  # a 2-D id tensor: output (2, B/2, DIM)
        loss_of(rows.reshape(-1, DIM).float(), target).backward()
        opt.step()
    return emb, opt


def train_torch(make_opt, device, sparse, **batch_kwargs):
    ref = torch.nn.Embedding(NUM, DIM, sparse=sparse).to(device)
    with torch.no_grad():
        ref.weight.copy_(initial_table())
    opt = make_opt(ref.parameters())
    for ids, target in batches(**batch_kwargs):
        opt.zero_grad()
        loss_of(ref(ids.to(device)), target.to(device)).backward()
        opt.step()
    return ref, opt


def train_reference(rule, lr, **kwargs):
    batch_kwargs = {k: kwargs.pop(k) for k in ("cover_all",) if k in kwargs}
    ref = DenseLazyReference(initial_table(), rule, lr, **kwargs)
    for ids, target in batches(**batch_kwargs):
        w = ref.weight.clone().requires_grad_()
        loss_of(w[ids], target.double()).backward()
        ref.apply(ids, w.grad)
    return ref


def test_sgd_equals_torch_sgd(device):
    emb, _ = train_graphemb(lambda p: SparseSGD(p, lr=0.3), device)
    ref, _ = train_torch(lambda p: torch.optim.SGD(p, lr=0.3), device, sparse=True)
    torch.testing.assert_close(emb.weight, ref.weight.detach(), **F32)


def test_adagrad_equals_torch_adagrad(device):
    emb, opt = train_graphemb(lambda p: SparseAdagrad(p, lr=0.2, eps=1e-10), device)
    ref, ref_opt = train_torch(
        lambda p: torch.optim.Adagrad(p, lr=0.2, eps=1e-10), device, sparse=True
    )
    torch.testing.assert_close(emb.weight, ref.weight.detach(), **F32)
    torch.testing.assert_close(opt.state[emb]["sum"], ref_opt.state[ref.weight]["sum"], **F32)


def test_adam_equals_torch_adam_when_every_row_is_hit(device):
    emb, opt = train_graphemb(lambda p: SparseAdam(p, lr=0.05), device, cover_all=True)
    ref, ref_opt = train_torch(
        lambda p: torch.optim.Adam(p, lr=0.05), device, sparse=False, cover_all=True
    )
    torch.testing.assert_close(emb.weight, ref.weight.detach(), **F32)
    ref_state = ref_opt.state[ref.weight]
    torch.testing.assert_close(opt.state[emb]["exp_avg"], ref_state["exp_avg"], **F32)
    torch.testing.assert_close(opt.state[emb]["exp_avg_sq"], ref_state["exp_avg_sq"], **F32)
    assert torch.equal(opt.state[emb]["step"].cpu(), torch.full((NUM,), STEPS))


def test_adam_is_lazy_per_row(device):
    emb, opt = train_graphemb(lambda p: SparseAdam(p, lr=0.05, betas=(0.8, 0.99), eps=1e-6), device)
    ref = train_reference("adam", 0.05, betas=(0.8, 0.99), eps=1e-6)
    steps = opt.state[emb]["step"].cpu()
    assert steps.min() < STEPS and steps.max() > 0, "batches must leave rows out of steps"
    assert torch.equal(steps, ref.step)
    torch.testing.assert_close(emb.weight.cpu().double(), ref.weight, **F64)
    torch.testing.assert_close(opt.state[emb]["exp_avg"].cpu().double(), ref.exp_avg, **F64)
    torch.testing.assert_close(opt.state[emb]["exp_avg_sq"].cpu().double(), ref.exp_avg_sq, **F64)


def test_rowwise_adagrad_equals_float64_reference(device):
    emb, opt = train_graphemb(lambda p: SparseRowWiseAdagrad(p, lr=0.3, eps=1e-8), device)
    ref = train_reference("rowwise_adagrad", 0.3, eps=1e-8)
    torch.testing.assert_close(emb.weight.cpu().double(), ref.weight, **F64)
    torch.testing.assert_close(opt.state[emb]["sum"].cpu().double(), ref.row_sum, **F64)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_table_uses_float32_math(dtype):
    """Reference: float32 math on the rounded table, rounded back after every step."""
    emb, opt = train_graphemb(lambda p: SparseAdam(p, lr=0.05), "cpu", dtype=dtype)
    assert emb.weight.dtype == dtype and opt.state[emb]["exp_avg"].dtype == torch.float32
    ref = DenseLazyReference(initial_table().to(dtype), "adam", 0.05, eps=1e-8)
    for ids, target in batches():
        w = ref.weight.to(dtype).float().requires_grad_()  # what the lookups returned
        loss_of(w.to(dtype)[ids].float(), target).backward()
        ref.weight = ref.weight.to(dtype).double()
        ref.apply(ids, w.grad)
    torch.testing.assert_close(emb.weight, ref.weight.to(dtype), rtol=0, atol=0.02)
    torch.testing.assert_close(
        opt.state[emb]["exp_avg"].double(), ref.exp_avg, rtol=0.05, atol=1e-3
    )


@pytest.mark.parametrize(
    "make_scheduler, expected",
    [
        (
            lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5),
            [1.0, 0.5, 0.25],
        ),
        (
            lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.1**epoch),
            [1.0, 0.1, 0.01],
        ),
    ],
)
def test_lr_schedulers_change_the_step(make_scheduler, expected):
    emb = NodeEmbedding(4, 2, "sched", init_func=lambda t: t.fill_(1.0))
    opt = SparseSGD([emb], lr=1.0)
    scheduler = make_scheduler(opt)
    moved = []
    for _ in range(3):
        before = emb.weight[0, 0].item()
        emb(torch.tensor([0])).sum().backward()  # gradient 1: the row moves by lr
        opt.step()
        scheduler.step()
        moved.append(before - emb.weight[0, 0].item())
    torch.testing.assert_close(torch.tensor(moved), torch.tensor(expected))


def test_param_groups_have_their_own_learning_rates():
    a = NodeEmbedding(3, 2, "a", init_func=lambda t: t.fill_(1.0))
    b = NodeEmbedding(3, 2, "b", init_func=lambda t: t.fill_(1.0))
    opt = SparseSGD([{"params": [a]}, {"params": [b], "lr": 0.25}], lr=1.0)
    (a(torch.tensor([0])).sum() + b(torch.tensor([0])).sum()).backward()
    opt.step()
    assert a.weight[0, 0].item() == 0.0 and b.weight[0, 0].item() == 0.75


def test_unused_embedding_and_empty_batch_are_fine():
    used = NodeEmbedding(5, 2, "used", init_func=lambda t: t.fill_(1.0))
    unused = NodeEmbedding(5, 2, "unused", init_func=lambda t: t.fill_(1.0))
    opt = SparseAdam([used, unused], lr=0.1)
    rows = used(torch.tensor([1]))
    empty = used(torch.tensor([], dtype=torch.int64))
    (rows.sum() + empty.sum()).backward()
    opt.step()
    assert torch.equal(unused.weight, torch.ones(5, 2))
    assert torch.equal(opt.state[unused]["step"], torch.zeros(5, dtype=torch.int64))
    assert torch.equal((used.weight != 1).any(1), torch.tensor([False, True, False, False, False]))


def test_step_consumes_gradients_and_zero_grad_discards_them():
    emb = NodeEmbedding(3, 1, "consume", init_func=lambda t: t.fill_(1.0))
    opt = SparseSGD([emb], lr=1.0)
    emb(torch.tensor([0])).sum().backward()
    opt.step()
    opt.step()  # nothing new recorded: no change
    assert emb.weight[0].item() == 0.0
    emb(torch.tensor([1])).sum().backward()
    opt.zero_grad()
    opt.step()
    assert emb.weight[1].item() == 1.0
    # zero_grad between forward and backward keeps the lookup (torch's usual loop order)
    rows = emb(torch.tensor([2]))
    opt.zero_grad()
    rows.sum().backward()
    opt.step()
    assert emb.weight[2].item() == 0.0


def test_several_lookups_and_backwards_accumulate():
    emb = NodeEmbedding(3, 1, "acc", init_func=lambda t: t.fill_(0.0))
    opt = SparseSGD([emb], lr=1.0)
    first = emb(torch.tensor([0, 1]))
    second = emb(torch.tensor([[1], [1]]))
    (first.sum() + 2 * second.sum()).backward(retain_graph=True)
    first.sum().backward()  # a second backward through the first lookup adds up
    opt.step()
    assert emb.weight.flatten().tolist() == [-2.0, -6.0, 0.0]


@pytest.mark.parametrize(
    "make",
    [
        lambda p: SparseAdam(p, lr=0.05),
        lambda p: SparseAdagrad(p, lr=0.1),
        lambda p: SparseRowWiseAdagrad(p, lr=0.1),
        lambda p: SparseSGD(p, lr=0.1),
    ],
)
def test_state_dict_round_trip_continues_exactly(make):
    """Train 5 steps, snapshot, train 5 more -> A; restore the snapshot in fresh objects,
    train the same 5 -> B; A and B are bitwise equal."""
    data = list(batches(steps=10))

    def train(emb, opt, part):
        for ids, target in part:
            loss_of(emb(ids), target).backward()
            opt.step()

    emb = NodeEmbedding(NUM, DIM, "snap", init_func=lambda t: t.copy_(initial_table()))
    opt = make([emb])
    train(emb, opt, data[:5])
    saved_weight, saved = emb.all_get_embedding(), opt.state_dict()
    train(emb, opt, data[5:])

    emb2 = NodeEmbedding(NUM, DIM, "snap")
    opt2 = make([emb2])
    emb2.all_set_embedding(saved_weight)
    opt2.load_state_dict(saved)
    train(emb2, opt2, data[5:])
    assert torch.equal(emb.weight, emb2.weight)
    for key in opt.state[emb]:
        assert torch.equal(opt.state[emb][key], opt2.state[emb2][key]), key
    assert opt.param_groups[0]["lr"] == opt2.param_groups[0]["lr"]


def test_state_dict_is_a_copy_with_names():
    emb = NodeEmbedding(4, 2, "named")
    opt = SparseAdagrad([emb], lr=0.1)
    sd = opt.state_dict()
    assert sd["param_groups"][0]["param_names"] == ["named"]
    assert sd["param_groups"][0]["lr"] == 0.1
    sd["state"][0]["sum"].fill_(5.0)
    assert opt.state[emb]["sum"].sum().item() == 0.0


def _mangled(sd, how):
    import copy

    sd = copy.deepcopy(sd)
    if how == "shape":
        sd["state"][0]["exp_avg"] = torch.zeros(NUM + 1, DIM)
    elif how == "dtype":
        sd["state"][0]["step"] = sd["state"][0]["step"].float()
    elif how == "missing state key":
        del sd["state"][0]["exp_avg_sq"]
    elif how == "extra state key":
        sd["state"][0]["momentum"] = torch.zeros(NUM, DIM)
    elif how == "name":
        sd["param_groups"][0]["param_names"] = ["other"]
    elif how == "groups":
        sd["param_groups"].append(dict(sd["param_groups"][0]))
    elif how == "hyper-parameter":
        sd["param_groups"][0]["lr"] = -1.0
    elif how == "missing hyper-parameter":
        del sd["param_groups"][0]["betas"]
    elif how == "state index":
        sd["state"] = {1: sd["state"][0]}
    return sd


@pytest.mark.parametrize(
    "how",
    [
        "shape",
        "dtype",
        "missing state key",
        "extra state key",
        "name",
        "groups",
        "hyper-parameter",
        "missing hyper-parameter",
        "state index",
    ],
)
def test_mismatched_state_dict_raises_and_changes_nothing(how):
    emb = NodeEmbedding(NUM, DIM, "victim", init_func=lambda t: t.copy_(initial_table()))
    opt = SparseAdam([emb], lr=0.05)
    for ids, target in batches(steps=3):
        loss_of(emb(ids), target).backward()
        opt.step()
    good = opt.state_dict()
    other = NodeEmbedding(NUM, DIM, "victim")
    other_opt = SparseAdam([other], lr=0.01)
    before = {k: v.clone() for k, v in other_opt.state[other].items()}
    groups_before = [dict(g) for g in other_opt.param_groups]
    with pytest.raises(ValueError):
        other_opt.load_state_dict(_mangled(good, how))
    for key, value in before.items():
        assert torch.equal(other_opt.state[other][key], value), key
    assert other_opt.param_groups == groups_before


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: SparseAdam(p, lr=-0.1), "-0.1"),
        (lambda p: SparseAdam(p, eps=-1e-8), "-1e-08"),
        (lambda p: SparseAdam(p, betas=(1.0, 0.999)), "1.0"),
        (lambda p: SparseAdam(p, betas=(0.9, -0.5)), "-0.5"),
        (lambda p: SparseAdam(p, betas=(0.9,)), "(0.9,)"),
        (lambda p: SparseAdam(p, lr=float("nan")), "nan"),
        (lambda p: SparseAdagrad(p, lr=-1.0), "-1.0"),
        (lambda p: SparseAdagrad(p, lr=0.1, eps=-1.0), "-1.0"),
        (lambda p: SparseRowWiseAdagrad(p, lr="fast"), "fast"),
        (lambda p: SparseSGD(p, lr=-3), "-3"),
        (lambda p: SparseSGD([{"params": p, "lr": -2.0}], lr=0.1), "-2.0"),
    ],
)
def test_bad_hyper_parameters_name_the_value(make, message):
    emb = NodeEmbedding(3, 2, "hp")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make([emb])


def test_bad_params():
    emb = NodeEmbedding(3, 2, "p")
    with pytest.raises(ValueError, match="empty"):
        SparseAdam([])
    with pytest.raises(TypeError, match=r"params\[1\] is a Parameter"):
        SparseAdam([emb, torch.nn.Parameter(torch.zeros(2))])
    with pytest.raises(TypeError, match="single NodeEmbedding"):
        SparseAdam(emb)
    with pytest.raises(ValueError, match="twice"):
        SparseAdam([emb, emb])


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
    """Route every step through a fused backend other than the C++ kernels."""
    from graphemb.optim import backends

    fake = FakeFusedKernel()
    monkeypatch.setattr(
        backends, "select_backend", lambda *_: backends.FusedBackend("fake", fake.fused_update)
    )
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
