"""The Triton kernel of :func:`graphemb.optim.triton_update.fused_update`, apart from its
Python wrapper (as gensim keeps its inner loop apart from ``word2vec.py``).

The kernel, :func:`_fused_rows`, finds the run of sorted positions a program owns and
updates its row, chunk by chunk; each helper it calls holds one part of that: whether a
position starts a run and where the run ends, a chunk's gradient, the row-wise Adagrad
multiplier, Adam's step count and bias corrections, a chunk's optimizer state, the rounded
update of the weight.

Nothing here imports Triton: :func:`jit` is called by the wrapper on first use, with the
imported module, and makes this module's ``tl`` and helpers the ones the kernel reads by
their global names.
"""

from __future__ import annotations

from typing import Any

__all__ = ["jit"]

tl: Any = None  # triton.language, set by jit()


def jit(triton: Any) -> Any:
    """Wrap the kernel (an interpreted function under ``TRITON_INTERPRET=1``) and return it."""
    global tl
    tl = triton.language
    # the kernel calls the helpers by their global names: those must be the jitted ones
    for helper in _HELPERS:
        globals()[helper.__name__] = triton.jit(helper)
    return triton.jit(_fused_rows)


def _starts_run(index_ptr, position, row):
    """Whether ``position`` is the first of the run of ``row`` (its left neighbour differs)."""
    previous = tl.load(index_ptr + position - 1, mask=position > 0, other=-1)
    return (position == 0) | (previous != row)


def _run_end(index_ptr, position, row, num_positions):
    """The end of the run of ``row`` that starts at ``position``: the first later position
    whose row differs, or ``num_positions``."""
    end = position + 1
    while (end < num_positions) & (
        tl.load(index_ptr + end, mask=end < num_positions, other=-1) == row
    ):
        end += 1
    return end


def _chunk_gradient(
    order_ptr, grads_ptr, position, end, dim, start, divisor, BLOCK_D: tl.constexpr
):
    """The columns ``start .. start + BLOCK_D`` of a row (and which of them are ``< dim``),
    and their gradient ``(grads[order[position]] + ... + grads[order[end - 1]]) / divisor``,
    summed in that order: one chunk of one run."""
    cols = start + tl.arange(0, BLOCK_D)
    mask = cols < dim
    g = tl.zeros([BLOCK_D], dtype=tl.float32)
    k = position
    while k < end:
        source = tl.load(order_ptr + k)
        g += tl.load(grads_ptr + source * dim + cols, mask=mask, other=0.0)
        k += 1
    return cols, mask, tl.div_rn(g, divisor)


def _fused_rows(
    weight_ptr,
    state_a_ptr,
    state_b_ptr,
    step_ptr,
    index_ptr,
    order_ptr,
    grads_ptr,
    num_positions,
    dim,
    divisor,
    lr,
    eps,
    beta2,
    one_minus_beta1,
    one_minus_beta2,
    inv_lr,
    eps_over_lr,
    IS_SGD: tl.constexpr,
    IS_ADAGRAD: tl.constexpr,
    IS_ROWWISE_ADAGRAD: tl.constexpr,
    IS_ADAM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPDATE_WEIGHT: tl.constexpr,
):
    """One program per sorted position; the first position of a run updates its row.

    Exactly one ``IS_<NAME>`` flag is set (:func:`branch_flags`). The state pointers by
    formula (a pointer a formula does not use is any valid tensor):

    ===============  ====================  =========================  ===============
    formula          ``state_a_ptr``       ``state_b_ptr``            ``step_ptr``
    ===============  ====================  =========================  ===============
    SGD              --                    --                         --
    Adagrad          ``sum`` (N, dim)      --                         --
    row-wise Adagr.  ``sum`` (N,)          --                         --
    Adam             ``exp_avg`` (N, dim)  ``exp_avg_sq`` (N, dim)    ``step`` (N,) i64
    ===============  ====================  =========================  ===============
    """
    position = tl.program_id(0)
    row = tl.load(index_ptr + position)
    if _starts_run(index_ptr, position, row):
        end = _run_end(index_ptr, position, row, num_positions)  # the run: [position, end)
        base = row * dim  # int64: tables beyond 2**31 elements
        if IS_ROWWISE_ADAGRAD:  # the row's mean square first, chunk by chunk
            multiplier = _rowwise_multiplier(
                order_ptr, grads_ptr, state_a_ptr, row, position, end, dim, divisor, lr, eps,
                BLOCK_D,
            )  # fmt: skip
        if IS_ADAM:  # per-row step and float64 bias corrections
            t = _next_step(step_ptr, row)
            if UPDATE_WEIGHT:
                scale, shift = _adam_scale_shift(
                    t, one_minus_beta1, one_minus_beta2, inv_lr, eps_over_lr
                )
        start = 0
        while start < dim:
            cols, mask, g = _chunk_gradient(
                order_ptr, grads_ptr, position, end, dim, start, divisor, BLOCK_D
            )
            offsets = base + cols
            if IS_ADAGRAD:
                s = _accumulate(state_a_ptr, offsets, mask, g * g)
            if IS_ADAM:
                m, v = _adam_moments(
                    state_a_ptr, state_b_ptr, offsets, mask, g, beta2, one_minus_beta1,
                    one_minus_beta2,
                )  # fmt: skip
            if UPDATE_WEIGHT:
                if IS_SGD:
                    update = lr * g
                if IS_ADAGRAD:
                    update = tl.div_rn(lr * g, tl.sqrt_rn(s) + eps)
                if IS_ROWWISE_ADAGRAD:
                    update = g * multiplier
                if IS_ADAM:
                    update = tl.div_rn(m, tl.sqrt_rn(v) * scale + shift)
                _subtract_rounded(weight_ptr, offsets, update, mask)
            start += BLOCK_D


def _rowwise_multiplier(
    order_ptr, grads_ptr, sum_ptr, row, position, end, dim, divisor, lr, eps, BLOCK_D: tl.constexpr
):
    """Row-wise Adagrad: adds the mean square of the run's gradient row to ``sum[row]`` and
    returns the row's step size ``lr / (sqrt(sum[row]) + eps)``."""
    squares = tl.zeros([BLOCK_D], dtype=tl.float32)
    start = 0
    while start < dim:
        cols, mask, g = _chunk_gradient(
            order_ptr, grads_ptr, position, end, dim, start, divisor, BLOCK_D
        )
        squares += g * g
        start += BLOCK_D
    total = tl.load(sum_ptr + row) + tl.div_rn(tl.sum(squares, axis=0), tl.cast(dim, tl.float32))
    # Every thread of the program loads the scalar; without the barrier one warp's store can
    # land before another warp's load (a race seen on an H100).
    tl.debug_barrier()
    tl.store(sum_ptr + row, total)
    return tl.div_rn(lr, tl.sqrt_rn(total) + eps)


def _next_step(step_ptr, row):
    """Adam: counts one more step of ``row`` and returns the count."""
    t = tl.load(step_ptr + row) + 1
    tl.debug_barrier()  # all warps have read the step before it is written
    tl.store(step_ptr + row, t)
    return t


def _adam_scale_shift(t, one_minus_beta1, one_minus_beta2, inv_lr, eps_over_lr):
    """Adam's bias corrections at step ``t`` as ``(scale, shift)`` of the update
    ``w -= m / (sqrt(v) * scale + shift)`` (as ``functional.adam_rows_``), in float64."""
    # beta ** t by repeated squaring: only float64 multiplications
    # (scalar arguments are float32 when compiled: the same here when interpreted)
    base1 = 1.0 - tl.cast(tl.cast(one_minus_beta1, tl.float32), tl.float64)
    base2 = 1.0 - tl.cast(tl.cast(one_minus_beta2, tl.float32), tl.float64)
    power1 = base1 * 0.0 + 1.0
    power2 = base2 * 0.0 + 1.0
    exponent = t
    while exponent > 0:
        odd = (exponent & 1) == 1
        power1 = tl.where(odd, power1 * base1, power1)
        power2 = tl.where(odd, power2 * base2, power2)
        base1 = base1 * base1
        base2 = base2 * base2
        exponent = exponent >> 1
    bias_correction1 = 1.0 - power1
    bias_correction2_sqrt = tl.sqrt(1.0 - power2)
    inv_lr64 = tl.cast(tl.cast(inv_lr, tl.float32), tl.float64)
    eps_over_lr64 = tl.cast(tl.cast(eps_over_lr, tl.float32), tl.float64)
    scale = tl.cast(bias_correction1 * inv_lr64 / bias_correction2_sqrt, tl.float32)
    shift = tl.cast(bias_correction1 * eps_over_lr64, tl.float32)
    return scale, shift


def _accumulate(table_ptr, offsets, mask, value):
    """``table[offsets] += value`` (Adagrad's sum of squares); returns the new values."""
    total = tl.load(table_ptr + offsets, mask=mask, other=0.0) + value
    tl.store(table_ptr + offsets, total, mask=mask)
    return total


def _adam_moments(
    exp_avg_ptr, exp_avg_sq_ptr, offsets, mask, g, beta2, one_minus_beta1, one_minus_beta2
):
    """Adam's moments of a chunk updated with its gradient ``g``; returns ``(m, v)``."""
    m = tl.load(exp_avg_ptr + offsets, mask=mask, other=0.0)
    v = tl.load(exp_avg_sq_ptr + offsets, mask=mask, other=0.0)
    m = m + one_minus_beta1 * (g - m)  # lerp, as torch's Adam
    v = v * beta2 + one_minus_beta2 * g * g
    tl.store(exp_avg_ptr + offsets, m, mask=mask)
    tl.store(exp_avg_sq_ptr + offsets, v, mask=mask)
    return m, v


def _subtract_rounded(weight_ptr, offsets, update, mask):
    """``weight[offsets] -= update`` in float32, the result rounded to the table's dtype (to
    nearest even)."""
    w = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32) - update
    if weight_ptr.dtype.element_ty == tl.bfloat16:
        # round to nearest even by hand: Triton's interpreter truncates instead
        bits = tl.cast(w, tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        bits = tl.where(w != w, 0x7FC0, bits)  # NaN stays NaN
        stored = tl.cast(tl.cast(bits, tl.uint16), tl.bfloat16, bitcast=True)
    else:
        stored = w.to(weight_ptr.dtype.element_ty)
    tl.store(weight_ptr + offsets, stored, mask=mask)


# The functions the kernel calls, jitted by jit() under their names.
_HELPERS = (
    _starts_run,
    _run_end,
    _chunk_gradient,
    _rowwise_multiplier,
    _next_step,
    _adam_scale_shift,
    _accumulate,
    _adam_moments,
    _subtract_rounded,
)
