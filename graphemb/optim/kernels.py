"""The fused CPU backend: graphemb's compiled kernels (:mod:`graphemb._native`).

The kernels (built from ``csrc/`` by every install of graphemb) update each row in one
pass -- sum of its gradient contributions, division by the world size, the formula of
:mod:`graphemb.optim.functional` on weight and state -- where the pure-torch path moves every
row through memory about 30 times (gather, seven elementwise passes, scatter).

The library states its own table of formulas (``formulas()``: names, state
tables, hyper-parameters, by its own position). A formula of the registry
:data:`~graphemb.optim.functional.FORMULAS` is compiled when the module has an entry of the
same name with the same state and hyper-parameters (:func:`supports`); any other formula --
a new one, or one the module was built with differently -- is updated by another backend,
and the rest keep their kernels. A module with another interface version is left aside
whole, and :func:`unavailable_reason` says why. Without it, on GPUs, or with
``GRAPHEMB_DISABLE_KERNELS=1`` in the environment when an optimizer is created, optimizers
use another backend (:mod:`graphemb.optim.backends`); all are tested against the same
oracles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType

import torch

from .._compiled import DISABLE_VARIABLE, REBUILD_COMMAND, disabled, load_module
from .functional import FORMULAS, Formula

__all__ = [
    "DISABLE_VARIABLE",
    "available",
    "fused_update",
    "module",
    "sort_rows",
    "supports",
    "unavailable_reason",
    "usable_for",
]

_API_VERSION = 3  # the kernels' API_VERSION of the one-entry-point interface (3: parts)


def _registry_entry(formula: Formula) -> tuple[str, list[tuple[str, str]], list[str]]:
    """``formula`` in the form of an entry of ``graphemb_kernels.formulas()``."""
    return (formula.name, [(key, kind) for key, kind in formula.state], list(formula.hyper))


def _where(module: ModuleType) -> str:
    """The file the kernels of ``module`` come from."""
    return str(getattr(module, "LIBRARY_PATH", getattr(module, "__file__", module.__name__)))


def _load() -> tuple[ModuleType | None, str, dict[str, int], dict[str, str]]:
    """``(module, why not, {formula: the module's id}, {formula: why it is not compiled})``."""
    candidate, failure = load_module()
    if candidate is None:
        return None, failure, {}, {}
    if getattr(candidate, "API_VERSION", 1) != _API_VERSION or not hasattr(candidate, "formulas"):
        return (
            None,
            f"graphemb_kernels at {_where(candidate)} was built from other sources (API version "
            f"{getattr(candidate, 'API_VERSION', 1)}, expected {_API_VERSION}): rebuild them "
            f"with `{REBUILD_COMMAND}`",
            {},
            {},
        )
    compiled = {
        name: (position, (name, [tuple(item) for item in state], list(hyper)))
        for position, (name, state, hyper) in enumerate(candidate.formulas())
    }
    ids: dict[str, int] = {}
    missing: dict[str, str] = {}
    for name, formula in FORMULAS.items():
        if name not in compiled:
            missing[name] = f"graphemb_kernels at {_where(candidate)} has no formula {name!r}"
        elif compiled[name][1] != _registry_entry(formula):
            missing[name] = (
                f"graphemb_kernels at {_where(candidate)} compiles {compiled[name][1]}, the "
                f"registry says {_registry_entry(formula)}: rebuild it"
            )
        else:
            ids[name] = compiled[name][0]
    return candidate, "", ids, missing


_module, _reason, _compiled_ids, _not_compiled = _load()


def unavailable_reason(formula: str | None = None) -> str:
    """Why the compiled module (or its kernel of ``formula``) is not used; ``""`` when it is
    installed (and compiles ``formula`` as the registry states it)."""
    if _reason or formula is None:
        return _reason
    return _not_compiled.get(formula, "" if formula in _compiled_ids else f"no formula {formula!r}")


def supports(formula: str) -> bool:
    """Whether the module compiles ``formula`` (a key of the registry) as the registry states
    it, and the kernels are not disabled."""
    return available() and formula in _compiled_ids


def available() -> bool:
    """Whether the kernels are installed, match the registry, and are not disabled by
    ``GRAPHEMB_DISABLE_KERNELS`` (read now: optimizers ask once per embedding, when they are
    created)."""
    return _module is not None and not disabled()


def usable_for(table: torch.Tensor, formula: str | None = None) -> bool:
    """Whether the kernels can update ``table`` (a contiguous CPU table), with ``formula``
    when one is named.

    Examples
    --------
    >>> usable_for(torch.zeros(4, 3).t())  # a transposed view is not contiguous
    False
    """
    if formula is not None and not supports(formula):
        return False
    return available() and table.device.type == "cpu" and table.is_contiguous()


def module() -> ModuleType:
    """The compiled module (call only when :func:`available`)."""
    if _module is None:
        raise RuntimeError(f"graphemb.optim.kernels: {_reason} (check kernels.available() first)")
    return _module


def sort_rows(
    ids: torch.Tensor,
    num_rows: int,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.sort(ids, stable=True)`` for row ids of a table of ``num_rows`` rows.

    On the calling thread: ids that end in an ascending run of at least half of them (a
    sampled batch's rows, whose blocks append their new sources in order) are sorted by
    sorting the head the same way and merging it with the run; other ids by a radix sort
    over the bits ``num_rows`` needs (two passes for a million rows). A step's ids sort in
    one to two milliseconds, without the parallel regions of ``torch.sort`` that cost far
    more on a busy machine (measured: ~120 ms of a 400 ms step at N=1M, B=100k, 2 threads,
    2 cores).

    Parameters
    ----------
    ids : Tensor of int64 (M,), CPU
        Every id in ``[0, num_rows)`` (else ``IndexError`` naming the first bad one).
    num_rows : int
    out : pair of Tensor of int64 (M,), optional
        Where to write ``index`` and ``order`` (contiguous, CPU, neither one ``ids``): a
        buffer reused from step to step spares the pages a fresh one maps and zeroes.

    Returns
    -------
    index : Tensor of int64 (M,)
        ``ids`` ascending.
    order : Tensor of int64 (M,)
        Position in ``ids`` of each element of ``index``; equal ids keep their order.

    Examples
    --------
    >>> ids = torch.tensor([3, 1, 3, 0])
    >>> index, order = sort_rows(ids, 4) if available() else torch.sort(ids, stable=True)
    >>> index.tolist(), order.tolist()
    ([0, 1, 3, 3], [3, 1, 0, 2])
    """
    return module().sort_rows(ids.contiguous(), int(num_rows), out)


def fused_update(
    formula: str,
    weight: torch.Tensor,
    state: Mapping[str, torch.Tensor],
    index: torch.Tensor,
    order: torch.Tensor,
    grads: torch.Tensor | Sequence[torch.Tensor],
    divisor: float,
    hyper: Mapping[str, float],
) -> None:
    """Sum each run's gradient rows, divide by ``divisor``, apply ``formula`` in place.

    The interface of every fused backend (also :func:`graphemb.optim.triton_update.
    fused_update`): for every run of equal values ``r`` in sorted ``index`` (positions
    ``i0 <= i < i1``), ``g = (grads[order[i0]] + ... + grads[order[i1 - 1]]) / divisor``,
    summed in that order, and the formula updates ``weight[r]`` and the state rows ``r``.

    Parameters
    ----------
    formula : str
        A key of :data:`~graphemb.optim.functional.FORMULAS`.
    weight : Tensor (N, dim), float32, float64, float16 or bfloat16; updated in place
    state : mapping of str to Tensor, updated in place
        The formula's state tables (``Formula.state_layout``) in the compute dtype
        (int64 for step counts).
    index : Tensor of int64 (M,)
        Rows of ``weight``, sorted ascending, duplicates allowed.
    order : Tensor of int64 (M,)
        The ``grads`` row of each position of ``index`` (a stable sort keeps the summation
        order of ``index_add_``).
    grads : Tensor (R, dim), float32 or float64 (the compute dtype), or a list of such
        tensors of one dtype, read in place as their concatenation (``order`` indexes it)
    divisor : float > 0
        The world size.
    hyper : mapping of str to float
        Every name of ``Formula.hyper``.

    Every tensor must be a contiguous CPU tensor. The kernel checks all of it before touching
    a row and raises ``IndexError`` (a row of ``index`` outside the table, a row of ``order``
    outside ``grads``), ``ValueError`` (device, contiguity, shapes, unsorted ``index``,
    ``divisor``) or ``TypeError`` (dtypes) naming the bad value; a rejected call changes
    nothing. Each call is a ``torch.profiler`` span ``graphemb_kernels::<formula>_``.

    Examples
    --------
    >>> weight = torch.zeros(4, 2)
    >>> index, order = torch.sort(torch.tensor([3, 1, 3]), stable=True)
    >>> grads = torch.ones(3, 2)
    >>> if available():
    ...     fused_update("sgd", weight, {}, index, order, grads, 1, {"lr": 0.5})
    ... else:  # the same update in plain torch
    ...     _ = weight.index_add_(0, index, grads[order], alpha=-0.5)
    >>> weight
    tensor([[ 0.0000,  0.0000],
            [-0.5000, -0.5000],
            [ 0.0000,  0.0000],
            [-1.0000, -1.0000]])
    """
    if formula not in FORMULAS:
        raise ValueError(f"unknown formula {formula!r}; expected one of {sorted(FORMULAS)}")
    if formula not in _compiled_ids:
        raise ValueError(f"graphemb_kernels: {unavailable_reason(formula)}")
    spec = FORMULAS[formula]
    missing = [key for key in spec.state_keys if key not in state]
    missing += [name for name in spec.hyper if name not in hyper]
    if missing:
        raise ValueError(f"graphemb_kernels.{formula}: missing {missing}")
    module().fused_update(
        _compiled_ids[formula],
        weight,
        [state[key] for key in spec.state_keys],
        index,
        order,
        [grads] if isinstance(grads, torch.Tensor) else list(grads),
        float(divisor),
        [float(hyper[name]) for name in spec.hyper],
    )
