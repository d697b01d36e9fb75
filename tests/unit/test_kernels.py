"""The compiled kernels (``graphemb_kernels``, built from ``csrc/``) called directly, through
their one entry point ``fused_update(kernel_id, weight, state, index, order, grads, divisor,
hyper)`` with the state tables and hyper-parameters in the registry's order.

Valid calls are compared with a float64 reference written here in torch ops; bad calls --
a row outside the table, an unsorted index, a wrong dtype, device, shape or layout -- must
raise a clear error naming the bad value and leave every table exactly as it was.
"""

from __future__ import annotations

import pytest
import torch

from graphemb.optim import kernels
from graphemb.optim.functional import FORMULAS

if kernels.unavailable_reason():
    pytest.skip(kernels.unavailable_reason(), allow_module_level=True)
graphemb_kernels = kernels.module()

N, D, LR, EPS, BETAS = 10, 4, 0.1, 1e-8, (0.9, 0.999)
KERNELS = ("sgd", "adagrad", "rowwise_adagrad", "adam")
HYPER = {"lr": LR, "eps": EPS, "beta1": BETAS[0], "beta2": BETAS[1]}


def make_tables(
    kernel: str, seed: int = 0, rows: int = N, dim: int = D, dtype: torch.dtype = torch.float32
) -> dict[str, torch.Tensor]:
    """The weight and the kernel's state tables, with nonzero state."""
    gen = torch.Generator().manual_seed(seed)
    tables = {"weight": torch.randn(rows, dim, generator=gen, dtype=dtype)}
    if kernel == "adagrad":
        tables["sum"] = torch.rand(rows, dim, generator=gen, dtype=dtype)
    elif kernel == "rowwise_adagrad":
        tables["sum"] = torch.rand(rows, generator=gen, dtype=dtype)
    elif kernel == "adam":
        tables["exp_avg"] = 0.1 * torch.randn(rows, dim, generator=gen, dtype=dtype)
        tables["exp_avg_sq"] = torch.rand(rows, dim, generator=gen, dtype=dtype)
        tables["step"] = torch.randint(0, 5, (rows,), generator=gen)
    return tables


def module_id(kernel: str) -> int:
    """The module's own number of a formula: its position in the module's table."""
    return [name for name, _, _ in graphemb_kernels.formulas()].index(kernel)


def call(kernel: str, tables: dict, index, order, grads, divisor: float = 1.0) -> None:
    """The module's entry point, called as graphemb.optim.kernels.fused_update calls it
    (``grads`` one tensor or a list of parts)."""
    formula = FORMULAS[kernel]
    graphemb_kernels.fused_update(
        module_id(kernel),
        tables["weight"],
        [tables[key] for key in formula.state_keys],
        index,
        order,
        [grads] if isinstance(grads, torch.Tensor) else grads,
        divisor,
        [HYPER[name] for name in formula.hyper],
    )


def reference(kernel: str, tables: dict, ids, grads, divisor: float) -> dict:
    """float64 update of the rows of ``ids`` (any order, duplicates summed)."""
    t = {k: v.double().clone() if v.is_floating_point() else v.clone() for k, v in tables.items()}
    rows = torch.unique(ids)
    g = torch.zeros(t["weight"].shape, dtype=torch.float64)
    g = g.index_add_(0, ids, grads.double())[rows] / divisor
    w = t["weight"]
    if kernel == "sgd":
        w[rows] -= LR * g
    elif kernel == "adagrad":
        t["sum"][rows] += g * g
        w[rows] -= LR * g / (t["sum"][rows].sqrt() + EPS)
    elif kernel == "rowwise_adagrad":
        t["sum"][rows] += (g * g).mean(1)
        w[rows] -= LR * g / (t["sum"][rows].sqrt() + EPS)[:, None]
    else:
        t["step"][rows] += 1
        step = t["step"][rows].double()[:, None]
        m = t["exp_avg"][rows] * BETAS[0] + (1 - BETAS[0]) * g
        v = t["exp_avg_sq"][rows] * BETAS[1] + (1 - BETAS[1]) * g * g
        t["exp_avg"][rows], t["exp_avg_sq"][rows] = m, v
        bc1, bc2 = 1 - BETAS[0] ** step, 1 - BETAS[1] ** step
        w[rows] -= LR / bc1 * m / (v.sqrt() / bc2.sqrt() + EPS)
    return t


def sorted_args(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.sort(ids, stable=True)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("divisor", [1.0, 3.0])
def test_kernel_matches_float64_reference(kernel, divisor):
    tables = make_tables(kernel)
    ids = torch.tensor([7, 2, 7, 0, 9, 2, 7])  # duplicates, first and last row
    grads = torch.randn(ids.numel(), D, generator=torch.Generator().manual_seed(1))
    expected = reference(kernel, tables, ids, grads, divisor)
    call(kernel, tables, *sorted_args(ids), grads, divisor)
    for key, value in tables.items():
        if value.is_floating_point():
            torch.testing.assert_close(value.double(), expected[key], rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(value, expected[key]), key


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [37, 64])
def test_wide_rows_of_many_blocks_match_float64_reference(kernel, dtype, dim):
    """Rows as wide as the vector loops' bodies and tails (16 float32 lanes of AVX-512,
    37 = 2 x 16 + 5), several blocks of positions for the threads, duplicates: the row
    arithmetic of every vector width the CPU runs against the float64 reference."""
    rows, count = 3000, 5000
    gen = torch.Generator().manual_seed(dim)
    tables = make_tables(kernel, rows=rows, dim=dim, dtype=dtype)
    ids = torch.randint(0, rows, (count,), generator=gen)
    grads = torch.randn(count, dim, generator=gen, dtype=dtype)
    expected = reference(kernel, tables, ids, grads, 2.0)
    call(kernel, tables, *sorted_args(ids), grads, 2.0)
    tolerance = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {}
    for key, value in tables.items():
        if value.is_floating_point():
            torch.testing.assert_close(value.double(), expected[key], **tolerance)
        else:
            assert torch.equal(value, expected[key]), key


@pytest.mark.parametrize(
    "spoil, message",
    [
        ({"order": 30_000, "index": 190_000}, r"order\[30000\] = -1 is out of range"),
        ({"order": 150_000, "index": 60_000},
         r"index must be sorted ascending, got index\[59999\] = 59999 > index\[60000\] = 0"),
        ({"order": 70_000, "index": 70_000}, r"order\[70000\] = -1 is out of range"),
    ],
)  # fmt: skip
def test_first_bad_position_of_a_large_step_is_named(spoil, message):
    """The positions are checked on the library's threads, in shares (two here, split at
    100,000): whichever share finds its bad position first, the error names the first bad
    position of the step, and nothing changes."""
    count = 200_000
    tables = make_tables("sgd", rows=count, dim=2)
    index, order = torch.arange(count), torch.arange(count)
    order[spoil["order"]] = -1
    index[spoil["index"]] = 0
    before = tables["weight"].clone()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # more than one share, on any machine
    try:
        with pytest.raises((IndexError, ValueError), match=message):
            call("sgd", tables, index, order, torch.ones(count, 2))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(tables["weight"], before)


@pytest.mark.parametrize("kernel", KERNELS)
def test_grads_in_parts_are_read_as_their_concatenation(kernel):
    """Gradient rows in several tensors (an empty one among them), ``order`` indexing their
    concatenation out of sequence: the same update as the float64 reference on the rows
    gathered into one tensor."""
    tables = make_tables(kernel)
    ids = torch.tensor([7, 2, 7, 0, 9, 2, 7, 4])
    gen = torch.Generator().manual_seed(2)
    parts = [torch.randn(3, D, generator=gen), torch.empty(0, D), torch.randn(6, D, generator=gen)]
    positions = torch.tensor([8, 0, 3, 5, 1, 7, 4, 6])  # row of the concatenation behind ids
    grads = torch.cat(parts)[positions]
    expected = reference(kernel, tables, ids, grads, 2.0)
    index, order = sorted_args(ids)
    call(kernel, tables, index, positions[order], parts, 2.0)
    for key, value in tables.items():
        if value.is_floating_point():
            torch.testing.assert_close(value.double(), expected[key], rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(value, expected[key]), key


PART_PROBLEMS = [  # (what, parts, error, message)
    ("no parts", [], ValueError, r"grads must hold at least one tensor, got an empty list"),
    ("parts of two dtypes", [torch.ones(2, D), torch.ones(2, D, dtype=torch.float64)],
     TypeError, r"grads\[1\] must be float32 \(the dtype of grads\[0\]\), got float64"),
    ("a part of another width", [torch.ones(2, D), torch.ones(2, D + 1)],
     ValueError, rf"grads\[1\] must have the weight's {D} columns, got shape \[2, {D + 1}\]"),
    ("a strided part", [torch.ones(2, D), torch.ones(2, 2 * D)[:, ::2]],
     ValueError, r"grads\[1\] must be contiguous"),
    ("order past the parts", [torch.ones(2, D), torch.ones(1, D)],
     IndexError, r"order\[3\] = 3 is out of range for grads of 3 rows"),
]  # fmt: skip


@pytest.mark.parametrize(
    "what, parts, error, message", PART_PROBLEMS, ids=[c[0] for c in PART_PROBLEMS]
)
def test_bad_parts_raise_and_change_nothing(what, parts, error, message):
    tables = make_tables("adam")
    before = {k: v.clone() for k, v in tables.items()}
    index, order = torch.tensor([1, 2, 2, 5]), torch.tensor([0, 1, 2, 3])
    with pytest.raises(error, match=rf"graphemb_kernels\.adam: {message}"):
        call("adam", tables, index, order, parts)
    for key, value in tables.items():
        assert torch.equal(value, before[key]), f"{what}: {key} changed"


@pytest.mark.parametrize("kernel", KERNELS)
def test_empty_index_changes_nothing(kernel):
    tables = make_tables(kernel)
    before = {k: v.clone() for k, v in tables.items()}
    empty = torch.empty(0, dtype=torch.long)
    call(kernel, tables, empty, empty, torch.empty(0, D))
    for key in tables:
        assert torch.equal(tables[key], before[key]), key


def _valid():
    ids = torch.tensor([1, 2, 2, 5])
    index, order = sorted_args(ids)
    return index, order, torch.ones(ids.numel(), D)


# (what is wrong, how to make it wrong, error type, message pattern); every case starts from
# a valid call whose first rows would be updated before the bad one by an unchecked kernel.
BAD_INPUTS = [
    ("row past the end", lambda a: a.update(index=torch.tensor([1, 2, 2, N])),
     IndexError, rf"index\[3\] = {N} is out of range for a table of {N} rows"),
    ("far row", lambda a: a.update(index=torch.tensor([1, 2, 2, 10**12])),
     IndexError, r"index\[3\] = 1000000000000 is out of range"),
    ("negative row", lambda a: a.update(index=torch.tensor([-1, 2, 2, 5])),
     IndexError, r"index\[0\] = -1 is out of range"),
    ("unsorted rows", lambda a: a.update(index=torch.tensor([1, 5, 2, 2])),
     ValueError, r"index must be sorted ascending, got index\[1\] = 5 > index\[2\] = 2"),
    ("order past grads", lambda a: a.update(order=torch.tensor([0, 1, 2, 4])),
     IndexError, r"order\[3\] = 4 is out of range for grads of 4 rows"),
    ("negative order", lambda a: a.update(order=torch.tensor([0, -3, 2, 1])),
     IndexError, r"order\[1\] = -3 is out of range"),
    ("int32 index", lambda a: a.update(index=a["index"].int()),
     TypeError, r"index must be int64 .*got int32"),
    ("float order", lambda a: a.update(order=a["order"].float()),
     TypeError, r"order must be int64 .*got float32"),
    ("float16 grads", lambda a: a.update(grads=a["grads"].half()),
     TypeError, r"grads must be float32 or float64 .*got float16"),
    ("int weight", lambda a: a["tables"].update(weight=torch.zeros(N, D, dtype=torch.long)),
     TypeError, r"weight must be float32, float64, float16 or bfloat16, got int64"),
    ("transposed weight", lambda a: a["tables"].update(weight=torch.zeros(D, N).t()),
     ValueError, r"weight must be contiguous, got sizes \[10, 4\] with strides \[1, 10\]"),
    ("strided grads", lambda a: a.update(grads=torch.ones(4, 2 * D)[:, ::2]),
     ValueError, r"grads must be contiguous"),
    ("strided index", lambda a: a.update(index=torch.tensor([1, 0, 2, 0, 2, 0, 5, 0])[::2]),
     ValueError, r"index must be contiguous"),
    ("grads of another width", lambda a: a.update(grads=torch.ones(4, D + 1)),
     ValueError, rf"grads must have the weight's {D} columns, got shape \[4, {D + 1}\]"),
    ("1-D grads", lambda a: a.update(grads=torch.ones(4)),
     ValueError, r"grads must have 2 dimension\(s\), got shape \[4\]"),
    ("2-D index", lambda a: a.update(index=a["index"][:, None]),
     ValueError, r"index must have 1 dimension\(s\), got shape \[4, 1\]"),
    ("order shorter than index", lambda a: a.update(order=a["order"][:3]),
     ValueError, r"index and order must have the same length, got 4 and 3"),
    ("zero divisor", lambda a: a.update(divisor=0.0),
     ValueError, r"divisor must be a positive finite number, got 0"),
    ("nan divisor", lambda a: a.update(divisor=float("nan")),
     ValueError, r"divisor must be a positive finite number, got nan"),
    ("grads not on the CPU", lambda a: a.update(grads=a["grads"].to("meta")),
     ValueError, r"grads must be a CPU tensor, got one on meta"),
    ("index not on the CPU", lambda a: a.update(index=a["index"].to("meta")),
     ValueError, r"index must be a CPU tensor, got one on meta"),
]  # fmt: skip


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("what, spoil, error, message", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_raises_and_changes_nothing(kernel, what, spoil, error, message):
    tables = make_tables(kernel)
    index, order, grads = _valid()
    args = {"tables": tables, "index": index, "order": order, "grads": grads, "divisor": 1.0}
    spoil(args)
    before = {k: v.clone() for k, v in args["tables"].items()}
    with pytest.raises(error, match=rf"graphemb_kernels\.{kernel}: {message}"):
        call(kernel, args["tables"], args["index"], args["order"], args["grads"], args["divisor"])
    for key, value in args["tables"].items():
        assert torch.equal(value, before[key]), f"{what}: {key} changed"


STATE_CASES = {  # kernel -> (state key, a table of the wrong shape, of the wrong dtype)
    "adagrad": ("sum", torch.zeros(N, D + 1), torch.zeros(N, D, dtype=torch.float64)),
    "rowwise_adagrad": ("sum", torch.zeros(N + 1), torch.zeros(N, dtype=torch.float16)),
    "adam": ("exp_avg_sq", torch.zeros(N - 1, D), torch.zeros(N, D, dtype=torch.bfloat16)),
}


@pytest.mark.parametrize("kernel", sorted(STATE_CASES))
@pytest.mark.parametrize("problem", ["shape", "dtype", "strided", "meta"])
def test_bad_state_raises_and_changes_nothing(kernel, problem):
    key, wrong_shape, wrong_dtype = STATE_CASES[kernel]
    tables = make_tables(kernel)
    good = tables[key]
    tables[key], error, message = {
        "shape": (wrong_shape, ValueError, rf"{key} must have shape .* to match the weight"),
        "dtype": (wrong_dtype, TypeError, rf"{key} must be float32 \(the dtype of grads\)"),
        "strided": (torch.stack([good, good], -1)[..., 0], ValueError, f"{key} must be contig"),
        "meta": (good.to("meta"), ValueError, rf"{key} must be a CPU tensor, got one on meta"),
    }[problem]
    before = {k: v.clone() for k, v in tables.items()}
    with pytest.raises(error, match=rf"graphemb_kernels\.{kernel}: {message}"):
        call(kernel, tables, *_valid())
    for name, value in tables.items():
        if value.device.type == "cpu":  # a meta tensor holds no values
            assert torch.equal(value, before[name]), name


def test_adam_step_counts_must_be_int64():
    tables = make_tables("adam")
    tables["step"] = tables["step"].double()
    before = {k: v.clone() for k, v in tables.items()}
    with pytest.raises(TypeError, match=r"adam: step must be int64 \(step counts\), got float64"):
        call("adam", tables, *_valid())
    for name, value in tables.items():
        assert torch.equal(value, before[name]), name


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kernel", KERNELS)
def test_cuda_tensors_are_refused(kernel):
    tables = make_tables(kernel)
    tables["weight"] = tables["weight"].cuda()
    before = {k: v.clone() for k, v in tables.items()}
    with pytest.raises(
        ValueError, match=rf"{kernel}: weight must be a CPU tensor, got one on cuda"
    ):
        call(kernel, tables, *_valid())
    for name, value in tables.items():
        assert torch.equal(value, before[name]), name


@pytest.mark.parametrize("kernel", KERNELS)
def test_each_call_is_a_profiler_span(kernel):
    tables = make_tables(kernel)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        call(kernel, tables, *_valid())
    names = [e.name for e in prof.events()]
    assert names.count(f"graphemb_kernels::{kernel}_") == 1, names


def test_module_states_the_registry():
    """The compiled formula table states each registry formula as the registry does."""
    table = {name: (state, hyper) for name, state, hyper in graphemb_kernels.formulas()}
    assert table == {f.name: (list(f.state), list(f.hyper)) for f in FORMULAS.values()}
    assert all(kernels.unavailable_reason(name) == "" for name in FORMULAS)


@pytest.mark.parametrize("kernel", KERNELS)
def test_wrong_number_of_tables_or_hyper_parameters_changes_nothing(kernel):
    formula = FORMULAS[kernel]
    tables = make_tables(kernel)
    before = {k: v.clone() for k, v in tables.items()}
    index, order, grads = _valid()
    grads = [grads]  # the module takes the gradient rows as a list of parts
    state = [tables[key] for key in formula.state_keys]
    hyper = [HYPER[name] for name in formula.hyper]
    id_ = module_id(kernel)
    one_more = [*state, tables["weight"]]
    with pytest.raises(ValueError, match=rf"{kernel}: takes {len(state)} state table\(s\), got"):
        graphemb_kernels.fused_update(
            id_, tables["weight"], one_more, index, order, grads, 1.0, hyper
        )
    fewer = hyper[:-1]
    with pytest.raises(ValueError, match=rf"{kernel}: takes {len(hyper)} hyper-parameter"):
        graphemb_kernels.fused_update(id_, tables["weight"], state, index, order, grads, 1.0, fewer)
    with pytest.raises(ValueError, match=r"fused_update: formula must be in \[0, 4\), got 4"):
        graphemb_kernels.fused_update(4, tables["weight"], state, index, order, grads, 1.0, hyper)
    for key, value in tables.items():
        assert torch.equal(value, before[key]), key


@pytest.mark.parametrize("divisor", [1.0, 2.0])
def test_bfloat16_table_long_runs_and_many_rows(divisor):
    """Several blocks of rows for the threads (more rows than one block), runs of many
    duplicates, a bfloat16 table: float64 reference rounded once."""
    gen = torch.Generator().manual_seed(5)
    num, dim = 5000, 7
    ids = torch.cat([torch.randint(0, num, (6000,), generator=gen), torch.full((50,), 3)])
    grads = torch.randn(ids.numel(), dim, generator=gen)
    weight = torch.randn(num, dim, generator=gen).bfloat16()
    state = {
        "exp_avg": torch.randn(num, dim, generator=gen) * 0.1,
        "exp_avg_sq": torch.rand(num, dim, generator=gen),
        "step": torch.randint(0, 100, (num,), generator=gen),
    }
    before_w, before_s = weight.clone(), {k: v.clone() for k, v in state.items()}
    kernels.fused_update("adam", weight, state, *sorted_args(ids), grads, divisor, HYPER)
    rows = torch.unique(ids)
    g = torch.zeros(num, dim, dtype=torch.float64).index_add_(0, ids, grads.double())[rows]
    g /= divisor
    t = before_s["step"][rows] + 1
    m = before_s["exp_avg"][rows].double() * BETAS[0] + (1 - BETAS[0]) * g
    v = before_s["exp_avg_sq"][rows].double() * BETAS[1] + (1 - BETAS[1]) * g * g
    tt = t.double()[:, None]
    w = before_w[rows].double() - LR / (1 - BETAS[0] ** tt) * m / (
        v.sqrt() / (1 - BETAS[1] ** tt).sqrt() + EPS
    )
    assert torch.equal(state["step"][rows], t)
    torch.testing.assert_close(state["exp_avg"][rows].double(), m, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(state["exp_avg_sq"][rows].double(), v, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weight[rows], w.bfloat16(), rtol=2.0**-7, atol=1e-6)
    untouched = torch.ones(num, dtype=torch.bool)
    untouched[rows] = False
    assert torch.equal(weight[untouched], before_w[untouched])
    assert torch.equal(state["step"][untouched], before_s["step"][untouched])
