"""Single-process sparse optimizers against independent oracles.

Oracles: torch's own optimizers on ``nn.Embedding`` (SGD, Adagrad with sparse gradients;
dense Adam when every row is hit every step) and float64 re-derivations of the published
formulas (``oracles.DenseLazyReference``) for lazy Adam and row-wise Adagrad.

Tolerances: float32 against torch float32, rtol 1e-5 / atol 1e-6 after 30 steps (the two
differ only in the order of floating-point operations); float32 against float64,
rtol 1e-4 / atol 1e-5.
"""

from __future__ import annotations

import pytest
import torch
from optim_cases import (
    DIM,
    F32,
    F64,
    NUM,
    STEPS,
    batches,
    initial_table,
    loss_of,
    train_graphemb,
    train_reference,
    train_torch,
)
from oracles import DenseLazyReference

from graphemb import NodeEmbedding
from graphemb.optim import SparseAdagrad, SparseAdam, SparseRowWiseAdagrad, SparseSGD


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
