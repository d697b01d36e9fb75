"""NodeEmbedding in one process: lookups, gradients, properties, whole-table access, and
every bad input (clear error, nothing changed)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

from graphemb import NodeEmbedding, Partition
from graphemb.optim import SparseAdam, SparseSGD


def arange_table(n=10, d=3, **kwargs):
    values = torch.arange(n * d, dtype=torch.float32).view(n, d)
    return NodeEmbedding(n, d, "t", init_func=lambda t: t.copy_(values), **kwargs), values


@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3), (2, 0, 4), (1, 2, 3)])
def test_lookup_shape_and_rows_match_nn_embedding(shape, device):
    emb, values = arange_table(device=device)
    ids = torch.randint(0, 10, shape, device=device)
    rows = emb(ids)
    assert rows.shape == (*shape, 3)
    # oracle: torch's own embedding lookup on the same table
    expected = torch.nn.functional.embedding(ids, values.to(device))
    assert torch.equal(rows, expected)
    assert rows.device == ids.device


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_any_integer_id_dtype(dtype):
    emb, values = arange_table()
    assert torch.equal(emb(torch.tensor([9, 0], dtype=dtype)), values[[9, 0]])


def test_result_device_follows_argument():
    emb, values = arange_table()
    rows = emb(torch.tensor([1]), device="cpu")
    assert rows.device.type == "cpu"
    if torch.cuda.is_available():
        assert emb(torch.tensor([1]), device="cuda").device.type == "cuda"


def test_no_grad_records_nothing():
    emb, _ = arange_table()
    with torch.no_grad():
        for _ in range(100):
            rows = emb(torch.tensor([1, 2]))
    assert not rows.requires_grad
    assert emb._gradients == []


def test_lookup_without_backward_keeps_nothing_alive():
    emb, _ = arange_table()
    rows = emb(torch.tensor([1, 2]))
    assert rows.requires_grad
    probe = weakref.ref(rows)
    del rows
    assert probe() is None and emb._gradients == []


def test_default_init_is_zeros_and_init_func_may_return_a_new_tensor():
    assert torch.equal(NodeEmbedding(4, 2, "z").weight, torch.zeros(4, 2))
    emb = NodeEmbedding(4, 2, "new", init_func=lambda t: torch.ones(4, 2) * 3)
    assert torch.equal(emb.weight, torch.full((4, 2), 3.0))


def test_properties(device):
    emb = NodeEmbedding(7, 5, "props", device=device, dtype=torch.float16)
    assert (emb.name, emb.num_embeddings, emb.embedding_dim) == ("props", 7, 5)
    assert emb.device.type == device.type and emb.dtype == torch.float16
    assert (emb.rank, emb.world_size, emb.storage_kind) == (0, 1, "local")
    assert emb.partition == Partition.remainder(7, 1)
    assert emb.weight.shape == (7, 5) and emb.weight.device.type == device.type
    assert "props" in repr(emb)


def test_all_get_returns_a_cpu_copy_and_all_set_copies_in(device):
    emb, values = arange_table(device=device)
    table = emb.all_get_embedding()
    assert table.device.type == "cpu" and torch.equal(table, values)
    table.zero_()
    assert torch.equal(emb.weight.cpu(), values), "all_get_embedding must not return a view"
    new = torch.randn(10, 3, dtype=torch.float64)
    emb.all_set_embedding(new)
    assert torch.equal(emb.weight.cpu(), new.float())
    new.zero_()
    assert emb.weight.abs().sum() > 0, "all_set_embedding must copy"


def test_attached_to_a_module_it_is_invisible_to_parameters_and_dense_optimizers():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = NodeEmbedding(6, 4, "model-emb", init_func=lambda t: t.fill_(1.0))
            self.linear = torch.nn.Linear(4, 1)

        def forward(self, ids):
            return self.linear(self.emb(ids)).sum()

    model = Model()
    assert [name for name, _ in model.named_parameters()] == ["linear.weight", "linear.bias"]
    assert set(model.state_dict()) == {"linear.weight", "linear.bias"}
    dense = torch.optim.Adam(model.parameters(), lr=0.1)
    sparse = SparseSGD([model.emb], lr=0.0)  # lr 0: the table may only change through it
    model(torch.tensor([0, 1])).backward()
    dense.step()
    sparse.step()
    model.double()  # Module.to / .double never touch the table either
    assert model.emb.weight.dtype == torch.float32
    assert torch.equal(model.emb.weight, torch.ones(6, 4))


def test_recreating_a_name_works_and_frees_the_old_table():
    probes = []
    for _ in range(5):  # like re-running a notebook cell
        emb = NodeEmbedding(1000, 64, "cell", init_func=lambda t: t.normal_())
        opt = SparseAdam([emb], lr=0.1)
        emb(torch.tensor([1, 2])).sum().backward()
        opt.step()
        probes.append(weakref.ref(emb.weight))
    del emb, opt
    gc.collect()
    assert all(p() is None for p in probes), "an old table is still referenced"


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "ids, error, message",
    [
        (torch.tensor([1.0, 2.0]), TypeError, "float32"),
        (torch.tensor([True, False]), TypeError, "bool"),
        ([1, 2], TypeError, "list"),
        (torch.tensor([0, 10]), IndexError, "node id 10 out of range"),
        (torch.tensor([[3], [-1]]), IndexError, "node id -1 out of range"),
    ],
)
def test_bad_ids_raise_and_record_nothing(ids, error, message):
    emb, values = arange_table()
    opt = SparseSGD([emb], lr=1.0)
    with pytest.raises(error, match=message):
        emb(ids)
    opt.step()
    assert torch.equal(emb.weight, values) and emb._gradients == []


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"num_embeddings": 0}, ValueError, "num_embeddings.*0"),
        ({"num_embeddings": 2.5}, ValueError, "num_embeddings.*2.5"),
        ({"embedding_dim": -1}, ValueError, "embedding_dim.*-1"),
        ({"name": ""}, ValueError, "name"),
        ({"name": 3}, ValueError, "name.*3"),
        ({"dtype": torch.int64}, ValueError, "torch.int64"),
        ({"init_func": "zeros"}, TypeError, "init_func"),
        (
            {"init_func": lambda t: torch.zeros(3, 3)},
            ValueError,
            r"init_func returned shape \(3, 3\)",
        ),
        ({"init_func": lambda t: 1.0}, TypeError, "float"),
        ({"partition": Partition.remainder(10, 2)}, ValueError, "2 parts"),
        ({"partition": Partition.remainder(11, 1)}, ValueError, "11 rows"),
        ({"timeout": -5}, ValueError, "-5"),
    ],
)
def test_bad_construction_arguments(kwargs, error, message):
    args = {"num_embeddings": 10, "embedding_dim": 4, "name": "bad", **kwargs}
    with pytest.raises(error, match=message):
        NodeEmbedding(**args)


@pytest.mark.parametrize(
    "values, error, message",
    [
        (torch.zeros(10, 4), ValueError, r"\(10, 4\), expected \(10, 3\)"),
        (torch.zeros(9, 3), ValueError, r"\(9, 3\)"),
        (torch.zeros(10, 3, dtype=torch.int64), TypeError, "int64"),
        ([[0.0] * 3] * 10, TypeError, "list"),
    ],
)
def test_bad_all_set_embedding_changes_nothing(values, error, message):
    emb, table = arange_table()
    with pytest.raises(error, match=message):
        emb.all_set_embedding(values)
    assert torch.equal(emb.weight, table)


# ---------------------------------------------------------------------- id checks without sync
@pytest.fixture
def deferred_checks(monkeypatch):
    """Run the device-side range check of CUDA lookups (no host sync) on CPU tensors: the
    same torch ops, so its error path is tested without a GPU."""
    from graphemb._checks import LookupIds

    monkeypatch.setattr(LookupIds, "_deferred", lambda self, flat: True)


def test_deferred_bad_id_reads_in_bounds_and_the_step_raises_changing_nothing(deferred_checks):
    emb, values = arange_table()
    opt = SparseSGD([emb], lr=1.0)
    rows = emb(torch.tensor([[3, 12], [4, 0]]))  # no error yet: the check waits for step()
    # reads stay in bounds: bad ids read a clamped row (oracle: torch's embedding, clamped)
    expected = torch.nn.functional.embedding(torch.tensor([[3, 9], [4, 0]]), values)
    assert torch.equal(rows, expected)
    rows.sum().backward()
    opt.zero_grad()  # discarding the gradients does not discard the error
    emb(torch.tensor([1])).sum().backward()
    with pytest.raises(IndexError, match=r"node id 12 out of range \[0, 10\)"):
        opt.step()
    assert torch.equal(emb.weight, values), "a step with a bad id changed rows"
    assert emb._gradients == [], "gradients of the bad batch are still recorded"
    emb.check_ids()  # reported once
    emb(torch.tensor([2])).sum().backward()
    opt.step()  # training goes on: SGD with gradient 1 and lr 1 moves row 2 by -1
    expected = values.clone()
    expected[2] -= 1
    assert torch.equal(emb.weight, expected)


def test_deferred_check_names_the_first_bad_id_and_covers_no_grad_lookups(deferred_checks):
    emb, values = arange_table()
    with torch.no_grad():
        emb(torch.tensor([5]))
        rows = emb(torch.tensor([-2, 7]))
        emb(torch.tensor([15]))
    assert torch.equal(rows, values[[0, 7]])  # a negative id reads row 0, in bounds
    with pytest.raises(IndexError, match="node id -2 out of range"):
        emb.check_ids()
    emb.check_ids()  # nothing pending any more
    with torch.no_grad():
        emb(torch.tensor([10]))
    with pytest.raises(IndexError, match="node id 10"):
        emb.all_get_embedding()


def test_good_ids_leave_nothing_pending(deferred_checks):
    emb, values = arange_table()
    opt = SparseSGD([emb], lr=0.5)
    emb(torch.tensor([0, 9, 9])).sum().backward()
    emb.check_ids()
    opt.step()
    expected = values.clone()
    expected[0] -= 0.5
    expected[9] -= 1.0  # duplicate ids: gradients add up
    assert torch.equal(emb.weight, expected)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_lookup_and_backward_never_synchronise():
    """``torch.cuda.set_sync_debug_mode("error")`` raises on any host-device sync: a lookup
    with its range check, and backward, run without one -- also with a bad id, which the
    next step reports."""
    emb = NodeEmbedding(1000, 16, "no-sync", device="cuda", init_func=lambda t: t.normal_())
    opt = SparseAdam([emb], lr=0.1)
    ids = torch.randint(0, 1000, (8, 8), device="cuda")
    bad_ids = torch.tensor([5, 1000], device="cuda")  # a copy from the host syncs: before
    emb(ids).sum().backward()  # warm-up: lazy CUDA initialisation may synchronise
    opt.step()
    before = emb.weight.clone()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        rows = emb(ids)
        rows.pow(2).sum().backward()
        bad = emb(bad_ids)
        bad.sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert rows.shape == (8, 8, 16) and rows.is_cuda
    assert torch.equal(bad[0], before[5]) and torch.equal(bad[1], before[999])  # clamped
    with pytest.raises(IndexError, match=r"node id 1000 out of range \[0, 1000\)"):
        opt.step()
    assert torch.equal(emb.weight, before)


@pytest.mark.parametrize(
    "make_size",
    [
        lambda n: n,
        lambda n: np.int64(n),
        lambda n: np.int32(n),
        lambda n: torch.tensor(n),
    ],
)
def test_integer_like_sizes(make_size):
    emb = NodeEmbedding(
        make_size(7),
        make_size(3),
        "sizes",
        partition=Partition.remainder(make_size(7), make_size(1)),
    )
    assert (emb.num_embeddings, emb.embedding_dim) == (7, 3)
    assert type(emb.num_embeddings) is int and type(emb.embedding_dim) is int
    assert emb.weight.shape == (7, 3)
    assert "num_embeddings=7" in repr(emb)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_embeddings": np.float64(7.0)}, "num_embeddings.*7.0"),
        ({"num_embeddings": torch.tensor([7])}, r"num_embeddings.*shape \(1,\)"),
        ({"num_embeddings": torch.tensor(7.0)}, "num_embeddings.*torch.float32"),
        ({"num_embeddings": True}, "num_embeddings.*True"),
        ({"num_embeddings": np.bool_(True)}, "num_embeddings.*True"),
        ({"embedding_dim": np.int64(0)}, "embedding_dim.*>= 1, got 0"),
        ({"num_embeddings": "7"}, "num_embeddings.*'7'"),
    ],
)
def test_sizes_that_are_not_integers_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        NodeEmbedding(**{"num_embeddings": 7, "embedding_dim": 3, "name": "bad-size", **kwargs})
