"""Fused sparse update in Triton: one kernel launch per embedding and step, for GPUs.

The interface of the fused CPU kernels (:func:`graphemb.optim.kernels.fused_update`): given
the owned table rows ``index`` of a step sorted ascending (runs of equal rows are duplicate
ids, or rows pushed by several ranks) and ``order``, the ``grads`` row of each sorted
position, one kernel sums the gradient rows of each run in order, divides the sum by
``divisor`` (the world size), and applies the formula of the registry
(:data:`graphemb.optim.functional.FORMULAS`: the formula's name selects the kernel's
branch, :data:`BRANCHES`; its state tables and hyper-parameters are the arguments) to the
weight row and its optimizer state in place. Tables may be float32, float16 or bfloat16; gradients,
state and all arithmetic are float32, and the weight is rounded to the table's dtype once,
when it is stored.

Each program of the kernel owns one sorted position. If the position starts a run (its
left neighbour in ``index`` differs: no ``torch.unique``, no host synchronisation), it
walks to the end of the run, then over the row in chunks of ``BLOCK_D`` columns. Runs are
distinct rows, so no two programs write the same memory.

Triton is imported on first use, not with :mod:`graphemb`. Under ``TRITON_INTERPRET=1``
(set before Triton is imported: the mode is per process) the kernel runs in Triton's
interpreter, also on CPU tensors: that is how it is tested without a GPU. The interpreter is
for tests only, so :func:`available` accepts it only when asked to.

Examples
--------
>>> import torch
>>> from graphemb.optim import triton_update
>>> weight = torch.ones(4, 3)
>>> ids = torch.tensor([2, 0, 2])                                   # row 2 twice
>>> grads = torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]])
>>> index, order = torch.sort(ids, stable=True)
>>> if triton_update.available(weight, interpret=True):            # TRITON_INTERPRET=1
...     triton_update.fused_update("sgd", weight, {}, index, order, grads, 1, {"lr": 0.5})
... else:                                                           # the same, in torch
...     _ = weight.index_add_(0, ids, grads, alpha=-0.5)
>>> weight
tensor([[ 0.,  0.,  0.],
        [ 1.,  1.,  1.],
        [-1., -1., -1.],
        [ 1.,  1.,  1.]])
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import torch

from .._compiled import disabled
from . import triton_kernel
from .functional import FORMULAS, Formula

__all__ = [
    "BRANCHES",
    "available",
    "fused_update",
    "interpreted",
    "supports",
    "triton_version",
]

BRANCHES = ("sgd", "adagrad", "rowwise_adagrad", "adam")
"""The formulas the kernel has a branch for, by name; each is a constexpr flag
``IS_<NAME>`` of the kernel. Another formula is left to the pure-torch backend."""

# Triton 2.x is not used: its interpreter cannot run this kernel (triton 2.2.0, the dgl
# stack's, fails on integer constants and scalar arithmetic: AttributeError in its Builder),
# so nothing would test it. Tested: 3.6.
MIN_TRITON = (3, 0)
TABLE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_BLOCK = 1024  # columns per chunk: wider rows take several chunks

# Filled by _load() on first use: importing Triton costs time and fixes the interpreter
# mode of the whole process, so `import graphemb` must not do it.
_loaded: dict[str, Any] = {}


def _load() -> dict[str, Any]:
    """Import Triton and wrap the kernel, once. The result has no ``"kernel"`` without a
    usable Triton (then ``"too_old"`` holds the version of one that is too old)."""
    if "done" in _loaded:
        return _loaded
    result: dict[str, Any] = {"done": True}
    try:
        import triton
        import triton.language
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # absent (macOS, CPU-only installs) or broken: never available
        triton = None
    if triton is not None:
        version = tuple(
            int("".join(c for c in part if c.isdigit()) or 0)
            for part in triton.__version__.split(".")[:2]
        )
        if version < MIN_TRITON:
            result["too_old"] = triton.__version__
        else:
            kernel = triton_kernel.jit(triton)
            result.update(
                version=version, kernel=kernel, interpreted=isinstance(kernel, InterpretedFunction)
            )
    _loaded.update(result)  # complete at once: a concurrent caller never sees half of it
    return _loaded


def triton_version() -> tuple[int, int] | None:
    """``(major, minor)`` of the Triton this module uses (importing it on first call), or
    ``None`` without a usable one (absent, or older than 3.0)."""
    return _load().get("version")


def interpreted() -> bool:
    """Whether the kernel runs in Triton's interpreter in this process (``TRITON_INTERPRET=1``
    was set when Triton was imported). ``False`` without a usable Triton."""
    return bool(_load().get("interpreted", False))


def available(tensor: torch.Tensor, *, interpret: bool = False) -> bool:
    """Whether :func:`fused_update` can update the table ``tensor`` here.

    True for a contiguous 2-D float32/float16/bfloat16 table on a CUDA device when Triton
    (>= 3.0) imports and ``GRAPHEMB_DISABLE_KERNELS`` is not set. A process whose Triton
    runs interpreted (``TRITON_INTERPRET=1``) can update CUDA and CPU tables, slowly: only
    when the caller opts in with ``interpret=True`` (tests).

    Parameters
    ----------
    tensor : Tensor (num_rows, dim)
        The weight table.
    interpret : bool
        Accept Triton's interpreter (CPU tables need it).

    Examples
    --------
    >>> import torch
    >>> from graphemb.optim import triton_update
    >>> triton_update.available(torch.zeros(3, 4))          # a CPU table, no opt-in
    False
    >>> triton_update.available(torch.zeros(3, 4, dtype=torch.float64), interpret=True)
    False
    """
    if not isinstance(tensor, torch.Tensor) or tensor.device.type not in ("cuda", "cpu"):
        return False
    if tensor.device.type == "cpu" and not interpret:
        return False  # decided before importing Triton: CPU steps never pay for it
    if tensor.dim() != 2 or tensor.dtype not in TABLE_DTYPES or not tensor.is_contiguous():
        return False
    if disabled():
        return False
    loaded = _load()
    if "kernel" not in loaded:
        return False
    return interpret if loaded["interpreted"] else tensor.device.type == "cuda"


def supports(formula: str) -> bool:
    """Whether the kernel has a branch for ``formula`` (a key of the registry).

    Examples
    --------
    >>> supports("adam"), supports("lamb")
    (True, False)
    """
    return formula in BRANCHES


def _number(name: str, value: Any, low: float, high: float = math.inf) -> float:
    """``float(value)``; ``ValueError`` naming ``name`` unless ``low <= value < high``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"fused_update: {name} must be a number, got {value!r}")
    number = float(value)
    if not low <= number < high:  # also rejects NaN
        raise ValueError(f"fused_update: invalid {name}: {value!r} (expected [{low}, {high}))")
    return number


def _hyper_parameters(formula: Formula, hyper: Mapping[str, Any]) -> dict[str, float]:
    """The formula's hyper-parameters (``Formula.hyper``) out of ``hyper``, checked: betas in
    [0, 1), the others >= 0."""
    if not isinstance(hyper, Mapping):
        raise TypeError(f"fused_update: hyper must be a dict, got {type(hyper).__name__}")
    missing = [name for name in formula.hyper if name not in hyper]
    if missing:
        raise ValueError(f"fused_update: {formula.name} needs hyper-parameters {missing}")
    return {
        name: _number(name, hyper[name], 0.0, 1.0 if name.startswith("beta") else math.inf)
        for name in formula.hyper
    }


def _check_tensor(
    name: str, tensor: Any, device: torch.device, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"fused_update: {name} must be a Tensor, got {type(tensor).__name__}")
    if tensor.device != device:
        raise ValueError(f"fused_update: {name} is on {tensor.device}, the weight on {device}")
    if tensor.dtype != dtype:
        raise TypeError(f"fused_update: {name} must be {dtype}, got {tensor.dtype}")
    if tuple(tensor.shape) != shape:
        raise ValueError(f"fused_update: {name} must have shape {shape}, got {tuple(tensor.shape)}")
    if not tensor.is_contiguous():
        raise ValueError(f"fused_update: {name} must be contiguous")


def _check_values(index: torch.Tensor, order: torch.Tensor, num_rows: int, num_grads: int) -> None:
    """Range and order of ``index`` / ``order``. Only for CPU tensors: on a GPU it would
    cost a host synchronisation per step; there the optimizer derives both from validated
    ids."""
    if index.numel() == 0:
        return
    low, high = int(index.min()), int(index.max())
    if low < 0 or high >= num_rows:
        bad = low if low < 0 else high
        raise IndexError(f"fused_update: index holds row {bad}, outside [0, {num_rows})")
    if bool((index[1:] < index[:-1]).any()):
        position = int(torch.nonzero(index[1:] < index[:-1])[0, 0]) + 1
        raise ValueError(
            f"fused_update: index must be sorted ascending; index[{position}] = "
            f"{int(index[position])} follows {int(index[position - 1])}"
        )
    low, high = int(order.min()), int(order.max())
    if low < 0 or high >= num_grads:
        bad = low if low < 0 else high
        raise IndexError(f"fused_update: order holds grads row {bad}, outside [0, {num_grads})")


def _block_size(dim: int, block_size: int | None) -> int:
    if block_size is None:
        return min(max(16, 1 << (dim - 1).bit_length()), MAX_BLOCK)
    if (
        isinstance(block_size, bool)
        or not isinstance(block_size, int)
        or block_size < 1
        or (block_size & (block_size - 1))
    ):
        raise ValueError(f"fused_update: block_size must be a power of two, got {block_size!r}")
    if block_size > MAX_BLOCK:
        raise ValueError(f"fused_update: block_size must be at most {MAX_BLOCK}, got {block_size}")
    return block_size


def fused_update(
    formula: str,
    weight: torch.Tensor,
    state: Mapping[str, torch.Tensor],
    index: torch.Tensor,
    order: torch.Tensor,
    grads: torch.Tensor,
    divisor: float,
    hyper: Mapping[str, Any],
    *,
    block_size: int | None = None,
) -> None:
    """Sum each run's gradient rows, divide by ``divisor``, apply ``formula`` in place.

    The contract of :func:`graphemb.optim.kernels.fused_update` (every fused backend's) in
    one Triton kernel launch; rows not in ``index`` are not touched.

    Parameters
    ----------
    formula, index, order, divisor, hyper
        As for :func:`graphemb.optim.kernels.fused_update`: a formula with a branch here
        (:data:`BRANCHES`).
    weight : Tensor (N, dim), float32, float16 or bfloat16, contiguous; updated in place
        On a CUDA device, or on CPU (Triton's interpreter: for tests).
    state : dict of Tensor, updated in place
        The formula's state tables (``Formula.state_layout``) in float32; step counts int64.
    grads : Tensor of float32 (R, dim)
        Gradient rows, one tensor.
    block_size : int, optional
        Columns per chunk, a power of two (default: the row width rounded up to a power of
        two, at most 1024).

    Raises
    ------
    TypeError, ValueError, IndexError
        For a bad argument, naming it, before anything changes. Values of ``index`` and
        ``order`` (range, order) are checked for CPU tensors only: on a GPU that would cost
        a host synchronisation per step.
    RuntimeError
        Without a usable Triton (>= 3.0), or for CPU tensors when Triton is not interpreted.
    """
    spec = _checked_table(formula, weight, state)
    _check_rows(weight, index, order, grads)
    divisor = _number("divisor", divisor, 0.0)
    if divisor == 0.0:
        raise ValueError("fused_update: invalid divisor: 0 (expected a number > 0)")
    values = _hyper_parameters(spec, hyper)
    block = _block_size(weight.shape[1], block_size)
    kernel = _kernel_for(weight.device)
    positions, dim = index.numel(), weight.shape[1]
    if positions == 0 or dim == 0:
        return
    arguments = (
        weight,
        *_state_tables(spec, weight, state, index),
        index,
        order,
        grads,
        positions,
        dim,
        *_scalars(divisor, values),
    )
    flags = {
        **branch_flags(formula),
        "BLOCK_D": block,
        # lr == 0: Adam updates its moments only, as functional.adam_rows_ (no 0 * m / 0)
        "UPDATE_WEIGHT": values["lr"] != 0.0 or formula != "adam",
    }
    launch = kernel[(positions,)]
    if weight.device.type == "cuda":
        with torch.cuda.device(weight.device):  # Triton launches on the current device
            launch(*arguments, **flags, num_warps=max(1, min(8, block // 256)))
    else:
        launch(*arguments, **flags)


def _kernel_for(device: torch.device) -> Any:
    """The jitted kernel, for tables on ``device``; RuntimeError where it cannot run."""
    loaded = _load()
    if "kernel" not in loaded:
        found = loaded.get("too_old")
        raise RuntimeError(
            "fused_update needs Triton >= 3.0" + (f" (found {found})" if found else "")
        )
    if device.type == "cpu" and not loaded["interpreted"]:
        raise RuntimeError(
            "fused_update: CPU tensors need Triton's interpreter: set TRITON_INTERPRET=1 "
            "before Triton is imported"
        )
    return loaded["kernel"]


def _state_tables(
    spec: Formula, weight: torch.Tensor, state: Mapping[str, torch.Tensor], index: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The kernel's ``state_a_ptr``, ``state_b_ptr`` and ``step_ptr``: the formula's float
    tables in registry order, then its step counts (Adam); a pointer the formula does not
    use is any tensor (``weight``, ``index``)."""
    tables = [state[key] for key, kind in spec.state if kind != "count"]
    counts = [state[key] for key, kind in spec.state if kind == "count"]
    state_a = tables[0] if tables else weight
    state_b = tables[1] if len(tables) > 1 else state_a
    return state_a, state_b, counts[0] if counts else index


def _scalars(divisor: float, values: Mapping[str, float]) -> tuple[float, ...]:
    """The kernel's scalar arguments from ``divisor`` on: ``divisor, lr, eps, beta2,
    1 - beta1, 1 - beta2, 1 / lr, eps / lr`` (0 where a formula has no such value)."""
    lr, eps = values["lr"], values.get("eps", 0.0)
    beta1, beta2 = values.get("beta1", 0.0), values.get("beta2", 0.0)
    inv_lr, eps_over_lr = (1.0 / lr, eps / lr) if lr > 0 else (0.0, 0.0)
    return divisor, lr, eps, beta2, 1.0 - beta1, 1.0 - beta2, inv_lr, eps_over_lr


def _checked_table(formula: str, weight: torch.Tensor, state: Mapping[str, Any]) -> Formula:
    """The checks of :func:`fused_update`'s ``formula``, ``weight`` and ``state``; the
    formula's spec."""
    if not isinstance(formula, str) or formula not in FORMULAS:
        raise ValueError(
            f"fused_update: unknown formula {formula!r}; expected one of {sorted(FORMULAS)}"
        )
    if not supports(formula):
        raise ValueError(
            f"fused_update: the Triton kernel has no branch for {formula!r} (it has {BRANCHES}); "
            "the pure-torch backend updates it"
        )
    spec = FORMULAS[formula]
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"fused_update: weight must be a Tensor, got {type(weight).__name__}")
    if weight.dim() != 2 or not weight.is_contiguous():
        raise ValueError(
            f"fused_update: weight must be a contiguous 2-D table, got shape {tuple(weight.shape)}"
        )
    if weight.dtype not in TABLE_DTYPES:
        raise TypeError(
            f"fused_update: weight dtype {weight.dtype} is not one of {TABLE_DTYPES} "
            "(float64 tables use the pure-torch path)"
        )
    device = weight.device
    if device.type not in ("cuda", "cpu"):
        raise ValueError(f"fused_update: weight on {device}; Triton runs on CUDA (CPU: tests)")
    if not isinstance(state, Mapping) or set(state) != set(spec.state_keys):
        keys = sorted(state) if isinstance(state, Mapping) else state
        raise ValueError(
            f"fused_update: {formula} state must hold {list(spec.state_keys)}, got {keys!r}"
        )
    num_rows, dim = weight.shape
    for key, (row_shape, dtype) in spec.state_layout(dim, torch.float32).items():
        _check_tensor(f"state[{key!r}]", state[key], device, dtype, (num_rows, *row_shape))
    return spec


def _check_rows(
    weight: torch.Tensor, index: torch.Tensor, order: torch.Tensor, grads: torch.Tensor
) -> None:
    """The checks of :func:`fused_update`'s ``index``, ``order`` and ``grads`` against the
    (checked) ``weight``; their values too for CPU tensors."""
    device, (num_rows, dim) = weight.device, weight.shape
    if not isinstance(index, torch.Tensor) or index.dim() != 1:
        raise ValueError(f"fused_update: index must be a 1-D Tensor, got {index!r:.80}")
    positions = index.numel()
    _check_tensor("index", index, device, torch.int64, (positions,))
    _check_tensor("order", order, device, torch.int64, (positions,))
    if not isinstance(grads, torch.Tensor) or grads.dim() != 2:
        raise ValueError(f"fused_update: grads must be a 2-D Tensor, got {grads!r:.80}")
    _check_tensor("grads", grads, device, torch.float32, (grads.shape[0], dim))
    if device.type == "cpu":
        _check_values(index, order, num_rows, grads.shape[0])


def branch_flags(formula: str) -> dict[str, bool]:
    """The kernel's constexpr flags ``IS_<NAME>`` that select ``formula``'s branch.

    Examples
    --------
    >>> branch_flags("adam")["IS_ADAM"], branch_flags("adam")["IS_SGD"]
    (True, False)
    """
    if not supports(formula):
        raise ValueError(f"the Triton kernel has no branch for {formula!r}: {BRANCHES}")
    return {f"IS_{name.upper()}": name == formula for name in BRANCHES}
