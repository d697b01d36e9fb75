"""The compiled aggregation kernels of GNN layers (``csrc/nn/aggregate.cpp``), called
directly: the CSR product and its transposed product (the backward, computed without
building the transpose) against a float64 dense oracle, on every thread count, on hub
columns, empty rows and columns no entry reaches; bad input named, nothing returned."""

from __future__ import annotations

import pytest
import torch

from graphemb._compiled import compiled_module, disabled

pytestmark = pytest.mark.skipif(
    compiled_module() is None or disabled(), reason="the compiled kernels are disabled here"
)


def _csr(rows: int, columns: int, entries: int, seed: int, hub: bool = False):
    """A random (rows, columns) CSR pattern: crow, col (entries in each row in any order,
    repeats allowed), and its dense float64 matrix of entry counts."""
    generator = torch.Generator().manual_seed(seed)
    row_of = torch.randint(0, rows, (entries,), generator=generator).sort().values
    col = torch.randint(0, columns, (entries,), generator=generator)
    if hub:  # half the entries in column 1: one thread's share is mostly one output row
        col[: entries // 2] = 1
    crow = torch.zeros(rows + 1, dtype=torch.int64)
    crow[1:] = torch.bincount(row_of, minlength=rows).cumsum(0)
    dense = torch.zeros(rows, columns, dtype=torch.float64)
    dense.index_put_((row_of, col), torch.ones(entries, dtype=torch.float64), accumulate=True)
    return crow, col, dense


SHAPES = [  # rows, columns, entries, hub
    (40, 300, 500, False),  # most output rows reached once or never
    (300, 12, 2_000, False),  # every output row reached many times
    (50, 5_000, 20_000, True),  # more columns than histogram bins, and a hub
    (7, 7, 0, False),  # no entries: all zeros (plus the addend)
    (1, 3, 4, False),
]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("mean", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_transposed_product_matches_the_dense_transpose(threads, mean, dtype):
    kernels = compiled_module()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for seed, (rows, columns, entries, hub) in enumerate(SHAPES):
            crow, col, dense = _csr(rows, columns, entries, seed, hub)
            generator = torch.Generator().manual_seed(100 + seed)
            # small integers: float32 sums of them are exact, so any order gives the oracle
            grad = torch.randint(-8, 9, (rows, 9), generator=generator).to(dtype)
            addend = torch.randint(-8, 9, (min(rows, columns), 9), generator=generator).to(dtype)
            matrix = dense / dense.sum(1, keepdim=True).clamp(min=1) if mean else dense
            expected = matrix.T @ grad.double()
            expected[: addend.shape[0]] += addend.double()
            out = kernels.csr_aggregate_transposed(crow, col, grad, mean, columns, addend)
            assert out.dtype == dtype and out.shape == (columns, 9)
            exact = {"rtol": 0, "atol": 0}  # sums of small integers: exact in any order
            if mean:  # 1 / count rounded, then sums of up to ~200 terms in float32
                exact = {"rtol": 1e-4, "atol": 1e-3} if dtype == torch.float32 else {}
            torch.testing.assert_close(out.double(), expected, **exact)
            without = kernels.csr_aggregate_transposed(crow, col, grad, mean, columns)
            torch.testing.assert_close(without.double(), matrix.T @ grad.double(), **exact)
            # the forward kernel on the same pattern, against the same oracle
            h = torch.randint(-8, 9, (columns, 9), generator=generator).to(dtype)
            forward = kernels.csr_aggregate(crow, col, None, h, mean)
            torch.testing.assert_close(forward.double(), matrix @ h.double(), **exact)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("mean", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_own_rows_beside_the_aggregate_and_their_paired_gradient(mean, dtype, relu):
    """with_self: each row is [aggregate | dense's row of that index]; its paired backward
    reads a (rows, 2F) gradient: the transpose product of the first half plus the second
    half on the first rows. relu: of relu(dense), and the gradient kept where dense > 0.
    Oracle: float64 dense products; the unpaired kernels with the halves apart give the
    same floats."""
    kernels = compiled_module()
    for seed, (rows, columns, entries, hub) in enumerate(SHAPES):
        columns = max(columns, rows)  # the rows are the first of dense's
        crow, col, dense = _csr(rows, columns, entries, seed, hub)
        generator = torch.Generator().manual_seed(200 + seed)
        h = torch.randint(-8, 9, (columns, 5), generator=generator).to(dtype)
        matrix = dense / dense.sum(1, keepdim=True).clamp(min=1) if mean else dense
        exact = {"rtol": 0, "atol": 0}  # sums of small integers: exact in any order
        if mean:
            exact = {"rtol": 1e-4, "atol": 1e-3} if dtype == torch.float32 else {}
        read = h.clamp(min=0) if relu else h
        pair = kernels.csr_aggregate(crow, col, None, h, mean, None, True, relu)
        assert pair.shape == (rows, 10) and pair.dtype == dtype
        torch.testing.assert_close(pair[:, :5].double(), matrix @ read.double(), **exact)
        assert torch.equal(pair[:, 5:], read[:rows])
        assert torch.equal(pair[:, :5], kernels.csr_aggregate(crow, col, None, read, mean))

        grad = torch.randint(-8, 9, (rows, 10), generator=generator).to(dtype)
        expected = matrix.T @ grad[:, :5].double()
        expected[:rows] += grad[:, 5:].double()
        if relu:
            expected *= h.double() > 0
        relu_input = h if relu else None
        out = kernels.csr_aggregate_transposed(
            crow, col, grad, mean, columns, paired=True, relu_input=relu_input
        )
        assert out.shape == (columns, 5)
        torch.testing.assert_close(out.double(), expected, **exact)
        apart = kernels.csr_aggregate_transposed(
            crow, col, grad[:, :5].contiguous(), mean, columns, grad[:, 5:].contiguous(),
            relu_input=relu_input,
        )  # fmt: skip
        assert torch.equal(out, apart)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rows_read_through_ids_give_the_floats_of_their_copy(dtype):
    """``dense_ids``: the product of ``dense[dense_ids]`` read in place (a model's first
    layer reading the embedding table). Oracle: float64 dense products of the copied rows;
    with the dropout's mask, the ReLU and the own rows, exactly the floats of the kernel on
    the copy (the mask's positions are the copy's, whatever rows the ids name)."""
    kernels = compiled_module()
    for seed, (rows, columns, entries, hub) in enumerate(SHAPES):
        columns = max(columns, rows)
        crow, col, dense = _csr(rows, columns, entries, seed, hub)
        generator = torch.Generator().manual_seed(300 + seed)
        table = torch.randint(-8, 9, (3 * columns + 5, 6), generator=generator).to(dtype)
        ids = torch.randint(0, table.shape[0], (columns,), generator=generator)  # repeats too
        copy = table[ids]
        plain = kernels.csr_aggregate(crow, col, None, table, False, dense_ids=ids)
        torch.testing.assert_close(plain.double(), dense @ copy.double(), rtol=0, atol=0)
        for mean, mask, relu in [(True, None, False), (True, (2**15, 2.0, seed), True),
                                 (False, (2**14, 4 / 3, -seed), False)]:  # fmt: skip
            expected = kernels.csr_aggregate(crow, col, None, copy, mean, mask, True, relu)
            got = kernels.csr_aggregate(crow, col, None, table, mean, mask, True, relu, ids)
            assert torch.equal(got, expected)


@pytest.mark.parametrize("with_self", [False, True])
def test_product_written_into_out_is_the_new_results_floats(with_self):
    """``out=``: every element of a given tensor overwritten (it starts as NaN) with the
    floats of the result the kernel allocates itself, and that tensor returned."""
    kernels = compiled_module()
    for seed, (rows, columns, entries, hub) in enumerate(SHAPES):
        columns = max(columns, rows)
        crow, col, _ = _csr(rows, columns, entries, seed, hub)
        h = torch.randn(columns, 6, generator=torch.Generator().manual_seed(400 + seed))
        mask = (2**15, 2.0, seed)
        expected = kernels.csr_aggregate(crow, col, None, h, True, mask, with_self, True)
        out = torch.full(expected.shape, float("nan"))
        got = kernels.csr_aggregate(crow, col, None, h, True, mask, with_self, True, out=out)
        assert got is out
        assert torch.equal(out, expected)


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (
            torch.zeros(6, 9),
            r"out must be a contiguous CPU float32 tensor of shape \(6, 8\), "
            r"got float32 \(6, 9\)",
        ),
        (torch.zeros(6, 8, dtype=torch.float64), "got float64"),
        (torch.zeros(8, 6).T, "out must be a contiguous"),
    ],
)
def test_product_bad_out_is_named_and_left_as_it_was(out, message):
    crow, col, _ = _csr(6, 10, 20, seed=1)
    before = out.clone()
    with pytest.raises(ValueError, match=message):
        compiled_module().csr_aggregate(crow, col, None, torch.ones(10, 4), True, with_self=True,
                                        out=out)  # fmt: skip
    assert torch.equal(out, before)


def test_ids_read_through_are_checked_and_bad_ones_named():
    kernels = compiled_module()
    crow, col, _ = _csr(6, 10, 20, seed=1)
    table = torch.ones(8, 3)
    ids = torch.arange(10) % 8
    ids[4] = 8
    with pytest.raises(IndexError, match=r"dense_ids\[4\] = 8 is out of range for dense of 8"):
        kernels.csr_aggregate(crow, col, None, table, True, dense_ids=ids)
    assert int(col.max()) >= 5
    with pytest.raises(IndexError, match=r"col\[\d+\] = \d+ is out of range for 5 sources"):
        kernels.csr_aggregate(crow, col, None, table, True, dense_ids=torch.arange(5))
    with pytest.raises(ValueError, match="the 6 rows must be the first of the 5 sources"):
        kernels.csr_aggregate(crow, col.clamp(max=4), None, table, True, None, True,
                              dense_ids=torch.arange(5))  # fmt: skip
    with pytest.raises(TypeError, match="dense_ids must be int64, got float32"):
        kernels.csr_aggregate(crow, col, None, table, True, dense_ids=torch.zeros(10))
    # no sources: no entries can name one (an empty batch), whatever the table holds
    empty = torch.zeros(1, dtype=torch.int64)
    none = torch.empty(0, dtype=torch.int64)
    out = kernels.csr_aggregate(empty, none, None, table, True, None, True, dense_ids=none)
    assert out.shape == (0, 6)
    with pytest.raises(IndexError, match=r"col\[0\] = 0 is out of range for 0 sources"):
        kernels.csr_aggregate(torch.tensor([0, 1]), torch.tensor([0]), None, table, True,
                              dense_ids=none)  # fmt: skip


def test_own_rows_and_paired_gradient_bad_input_is_named():
    kernels = compiled_module()
    crow, col, _ = _csr(6, 10, 20, seed=1)
    with pytest.raises(ValueError, match="the 6 rows must be the first of the 4 sources"):
        kernels.csr_aggregate(crow, col.clamp(max=3), None, torch.ones(4, 3), True, None, True)
    for grad, addend, out_rows, what in [
        (torch.ones(6, 5), None, 10, "width 5"),
        (torch.ones(6, 4), torch.ones(2, 2), 10, "an addend"),
    ]:
        with pytest.raises(ValueError, match=f"a paired grad needs .*{what}"):
            kernels.csr_aggregate_transposed(crow, col, grad, True, out_rows, addend, paired=True)
    with pytest.raises(ValueError, match=r"relu_input must be float32 of shape \(10, 4\), got"):
        kernels.csr_aggregate_transposed(
            crow, col, torch.ones(6, 4), True, 10, relu_input=torch.ones(9, 4)
        )


def test_transposed_product_of_a_sampled_block_is_the_transpose_products_own_floats():
    """On a block as the sampler numbers it (new sources in order of first appearance),
    float32 with rounding: the same floats as the product with the block's transpose built
    (each output row summed in increasing row order, from 0)."""
    from graphemb.sampling import Block

    generator = torch.Generator().manual_seed(5)
    num_dst, num_edges = 300, 4_000
    dst = torch.randint(0, num_dst, (num_edges,), generator=generator).sort().values
    src = torch.randint(0, 2_500, (num_edges,), generator=generator)
    _, src = torch.unique(torch.cat([torch.arange(num_dst), src]), return_inverse=True)
    block = Block(torch.arange(int(src.max()) + 1), num_dst, torch.stack([src[num_dst:], dst]))
    grad = torch.randn(num_dst, 33, generator=generator)
    grad_dst = torch.randn(num_dst, 33, generator=generator)
    adj_t = block.adj_t
    kernels = compiled_module()
    for reduce in ("mean", "sum"):
        transpose = block.aggregation_transpose(reduce, torch.float32)
        expected = kernels.csr_aggregate(
            transpose.crow_indices(), transpose.col_indices(), transpose.values(), grad, False
        )
        expected[:num_dst] += grad_dst
        out = kernels.csr_aggregate_transposed(
            adj_t.crow_indices(), adj_t.col_indices(), grad, reduce == "mean",
            block.num_src_nodes, grad_dst,
        )  # fmt: skip
        assert torch.equal(out, expected)


def _good():
    crow, col, _ = _csr(6, 10, 20, seed=1)
    return {"crow": crow, "col": col, "grad": torch.ones(6, 4), "mean": True, "out_rows": 10}


@pytest.mark.parametrize(
    ("spoil", "error", "message"),
    [
        (
            lambda a: a["col"].__setitem__(3, 10),
            IndexError,
            r"col\[3\] = 10 is out of range for 10 output rows",
        ),
        (lambda a: a["col"].__setitem__(0, -1), IndexError, r"col\[0\] = -1 is out of range"),
        (lambda a: a.update(grad=torch.ones(5, 4)), ValueError, "grad has 5 rows, crow 6"),
        (
            lambda a: a.update(grad=torch.ones(6, 4, dtype=torch.int32)),
            TypeError,
            "grad must be float32 or float64, got int32",
        ),
        (lambda a: a.update(grad=torch.ones(4, 6).T), ValueError, "grad must be a contiguous"),
        (lambda a: a.update(col=a["col"].int()), TypeError, "col must be int64, got int32"),
        (
            lambda a: a.update(crow=a["crow"] + 1),
            ValueError,
            "crow must run from 0 to the 20 entries, got 1 to 21",
        ),
        (lambda a: a.update(crow=torch.zeros(0, dtype=torch.int64)), ValueError, "crow is empty"),
        (
            lambda a: a.update(addend=torch.ones(11, 4)),
            ValueError,
            "addend has 11 rows, more than the 10 output rows",
        ),
        (lambda a: a.update(addend=torch.ones(3, 5)), ValueError, "addend must have grad's"),
        (
            lambda a: a.update(addend=torch.ones(3, 4, dtype=torch.float64)),
            ValueError,
            "addend must have grad's dtype",
        ),
    ],  # fmt: skip
)
def test_transposed_product_bad_input_is_named_and_changes_nothing(spoil, error, message):
    args = _good()
    spoil(args)
    kept = {name: value.clone() for name, value in args.items() if torch.is_tensor(value)}
    with pytest.raises(error, match=message):
        compiled_module().csr_aggregate_transposed(**args)
    for name, value in kept.items():
        assert torch.equal(args[name], value), name


@pytest.mark.parametrize("openmp", [True, False])
def test_an_error_on_a_worker_thread_reaches_the_caller(openmp):
    """A bad column found by the second thread of the transpose's count (200,000 entries
    in two parts): the IndexError names it, on OpenMP's threads and on the library's own."""
    from graphemb._native.library import library

    crow, col, _ = _csr(1_000, 50, 200_000, seed=3)
    col[-5] = 50
    before, threads = library().allow_openmp(openmp), torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(IndexError, match=r"col\[199995\] = 50 is out of range for 50"):
            compiled_module().csr_aggregate_transposed(crow, col, torch.ones(1_000, 4), True, 50)
    finally:
        library().allow_openmp(before)
        torch.set_num_threads(threads)
