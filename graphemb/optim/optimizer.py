"""``SparseOptimizer``: the step pipeline shared by every sparse optimizer.

One step, per embedding::

    NodeEmbedding.take_gradients(): recorded (ids, grads)
        [--coalesce--> --push to owners-->        (with a process group, unless pushed)]
        --> the embedding's backend: sum duplicates, / world_size, formula on weight and state
        --> after_update (barrier for shared memory)

The backend (:mod:`graphemb.optim.backends`: fused C++ kernels, fused Triton kernel or pure
torch, one interface) is chosen once per embedding, when the optimizer takes it.

A subclass names its formula (:attr:`SparseOptimizer.formula`, a key of the registry
:data:`graphemb.optim.functional.FORMULAS`, which also gives its per-row state and
hyper-parameters) and passes its defaults; hyper-parameters are checked by one function,
:func:`check_hyper_parameters`. Everything else -- param groups, ``state_dict``, LR
schedulers, processes -- is here.

The class derives from :class:`torch.optim.Optimizer` so that ``torch.optim.lr_scheduler``
accepts it; its "parameters" are :class:`~graphemb.NodeEmbedding` objects, not tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch.profiler import record_function

from .._checks import as_size
from ..distributed.mailbox import RowParts
from ..embedding import NodeEmbedding
from . import backends
from .functional import FORMULAS, Formula
from .rows import Workspace, coalesce_rows

__all__ = ["SparseOptimizer", "StateLayout", "check_hyper_parameters"]

StateLayout = dict[str, tuple[tuple[int, ...], torch.dtype]]


class SparseOptimizer(torch.optim.Optimizer):
    """Base class: applies the gradients recorded by :class:`~graphemb.NodeEmbedding` lookups.

    Semantics
    ---------
    * Gradients of duplicate ids in a batch are **summed** (the true gradient of the loss,
      as torch's ``nn.Embedding(sparse=True)``; DGL's optimizers average them instead).
    * ``step()`` consumes the recorded gradients; a second ``step()`` without a new
      backward changes nothing. ``zero_grad()`` discards gradients recorded so far.
    * With a process group of N ranks, the gradient of each row is summed over ranks and
      divided by N -- the global mean, exactly as ``DistributedDataParallel`` averages dense
      gradients -- so N ranks with local batches b_i and a mean loss each train like one
      process on the union of the b_i (for equal local batch sizes, as with DDP). Each row
      is updated by its owner rank only.
    * ``step()`` is collective with a process group: every rank calls it, also when its
      batch was empty or did not use an embedding.
    * Ids out of range in a lookup on a CUDA table are reported by the next ``step()``
      (:meth:`graphemb.NodeEmbedding.check_ids`), which then raises before any row changes.
    """

    formula: str = ""
    """Name of the update formula in :data:`graphemb.optim.functional.FORMULAS`."""

    def __init__(self, params: Iterable[NodeEmbedding] | Iterable[dict], defaults: dict) -> None:
        if self.formula not in FORMULAS:
            raise TypeError(
                f"{type(self).__name__}.formula must name one of {sorted(FORMULAS)}, "
                f"got {self.formula!r}"
            )
        if isinstance(params, (NodeEmbedding, torch.Tensor)):
            raise TypeError(
                f"{type(self).__name__}: params must be a list of NodeEmbedding, got a single "
                f"{type(params).__name__}"
            )
        params = list(params)  # type: ignore[assignment]
        if not params:
            raise ValueError(
                f"{type(self).__name__}: params is empty; pass a list of NodeEmbedding"
            )
        self._check_group(defaults)
        self._workspace = Workspace()
        self._backends: dict[NodeEmbedding, backends.UpdateBackend] = {}
        self._steps_taken = 0
        super().__init__(params, defaults)  # type: ignore[arg-type]  # embeddings

    # ------------------------------------------------------------------ hyper-parameters
    def _check_group(self, group: dict) -> None:
        """Raise ``ValueError`` naming any hyper-parameter out of range."""
        check_hyper_parameters(group)

    def _hyper_parameters(self, group: Mapping[str, Any]) -> dict[str, float]:
        """The formula's scalar hyper-parameters (``Formula.hyper``) from a param group:
        its own names, and ``beta1``, ``beta2`` from torch's ``betas``."""
        values = {}
        for name in self._formula.hyper:
            if name in group:
                values[name] = float(group[name])
            else:
                values[name] = float(group["betas"][_BETAS.index(name)])
        return values

    # ------------------------------------------------------------------ description
    @property
    def _formula(self) -> Formula:
        return FORMULAS[self.formula]

    @property
    def embeddings(self) -> list[NodeEmbedding]:
        """Every embedding this optimizer trains, in param-group order."""
        return [e for g in self.param_groups for e in g["params"]]

    @property
    def steps_taken(self) -> int:
        """Number of ``step()`` calls so far (restored by ``load_state_dict`` and
        :func:`graphemb.load`); quoted in error messages of collectives."""
        return self._steps_taken

    def state_layout(self, embedding: NodeEmbedding) -> StateLayout:
        """Per-row state of ``embedding``: name -> (row shape, dtype).

        Examples
        --------
        >>> import graphemb
        >>> from graphemb.optim import SparseAdam
        >>> emb = graphemb.NodeEmbedding(10, 4, "layout-demo")
        >>> SparseAdam([emb]).state_layout(emb)["exp_avg"]
        ((4,), torch.float32)
        """
        return self._formula.state_layout(embedding.embedding_dim, embedding.compute_dtype)

    def update_backend(self, embedding: NodeEmbedding) -> str:
        """Name of the backend that updates ``embedding``'s rows (chosen when this optimizer
        took it): ``"cpu-kernels"``, ``"triton"`` or ``"torch"`` (see
        :mod:`graphemb.optim.backends`).

        Examples
        --------
        >>> import graphemb
        >>> from graphemb.optim import SparseSGD
        >>> emb = graphemb.NodeEmbedding(10, 4, "backend-demo", dtype=torch.float64)
        >>> SparseSGD([emb], lr=0.1).update_backend(emb) in ("cpu-kernels", "torch")
        True
        """
        return self._backends[embedding].name

    # ------------------------------------------------------------------ param groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of embeddings (collective with a process group: allocates state)."""
        if not isinstance(param_group, dict) or "params" not in param_group:
            raise TypeError(f"a param group is a dict with 'params', got {param_group!r}")
        embeddings = param_group["params"]
        if isinstance(embeddings, NodeEmbedding):
            embeddings = [embeddings]
        embeddings = list(embeddings)
        seen = {id(e) for g in self.param_groups for e in g["params"]}
        for position, embedding in enumerate(embeddings):
            if not isinstance(embedding, NodeEmbedding):
                raise TypeError(
                    f"{type(self).__name__} optimizes graphemb.NodeEmbedding objects; "
                    f"params[{position}] is a {type(embedding).__name__}"
                )
            if id(embedding) in seen:
                raise ValueError(
                    f"{type(self).__name__}: NodeEmbedding {embedding.name!r} appears twice "
                    "in params"
                )
            seen.add(id(embedding))
        if not embeddings:
            raise ValueError(f"{type(self).__name__}: a param group has no embeddings")
        group = {**self.defaults, **param_group, "params": embeddings}
        self._check_group(group)
        for embedding in embeddings:
            state = {
                key: embedding.storage.create_table(
                    f"{type(self).__name__}.{key}", row_shape, dtype
                )
                for key, (row_shape, dtype) in self.state_layout(embedding).items()
            }
            self.state[embedding] = state  # type: ignore[index]  # keyed by embeddings
            self._backends[embedding] = backends.select_backend(
                embedding.weight, state, self._workspace, self._formula
            )
        self.param_groups.append(group)

    # ------------------------------------------------------------------ step
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Discard the gradients recorded so far by this optimizer's embeddings."""
        for embedding in self.embeddings:
            embedding.clear_gradients()

    @torch.no_grad()
    def step(self, closure=None):
        """Apply the recorded gradients to the rows they belong to.

        Collective with a process group. Returns the closure's loss, if one is given.

        Raises
        ------
        IndexError
            A lookup on a CUDA table since the last step had an id out of range (checked
            here rather than at the lookup, which never waits for the GPU). Nothing is
            updated and the recorded gradients of that embedding are discarded.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        embeddings = self.embeddings
        for embedding in embeddings:  # before any row changes
            embedding.check_ids()
        self._steps_taken += 1
        for group in self.param_groups:
            for embedding in group["params"]:
                self._step_embedding(embedding, group)
        return loss

    def _step_embedding(self, embedding: NodeEmbedding, group: dict) -> None:
        # Profiler spans name the phases of a step (benchmarks/harness reads them back).
        storage = embedding.storage
        divisor = 1  # gradients are averaged over ranks: the global mean, as DDP's
        operation = f"gradient push of {type(self).__name__} step {self._steps_taken}"
        # with overlap: waits for the pushes started by backward (or now)
        span = "graphemb::wait_push" if storage.overlaps else "graphemb::take_gradients"
        with record_function(span):
            ids, recorded, pushed = embedding.take_gradients(operation)
        grads: torch.Tensor | RowParts = recorded
        if pushed:
            divisor = storage.world_size
        elif storage.world_size > 1:  # rows to send to their owners (alone, it owns every row)
            if storage.coalesce_before_push:  # fewer rows to send
                with record_function("graphemb::coalesce"):
                    ids, recorded = coalesce_rows(ids, recorded, self._workspace)
            with record_function("graphemb::push"):
                ids, grads = storage.push_gradients(ids, recorded, operation)
            divisor = storage.world_size
        if ids.numel():
            with record_function("graphemb::update"):
                self._update(embedding, storage.local_index(ids), grads, divisor, group)
        with record_function("graphemb::after_update"):
            storage.after_update(f"end of {type(self).__name__} step {self._steps_taken}")

    def _update(
        self,
        embedding: NodeEmbedding,
        index: torch.Tensor,
        grads: torch.Tensor | RowParts,
        divisor: int,
        group: dict,
    ) -> None:
        """The one update hook: for the rows ``index`` of this rank's tables (duplicates
        allowed), sum their ``grads`` rows, divide by ``divisor`` and apply the formula to
        the weight and state rows in place, with the embedding's backend."""
        self._backends[embedding].update_(
            self._formula,
            embedding.weight,
            self.state[embedding],  # type: ignore[index]
            index,
            grads,
            divisor,
            self._hyper_parameters(group),
        )

    # ------------------------------------------------------------------ state dict
    def state_dict(self, *, with_state: bool = True) -> dict[str, Any]:
        """Hyper-parameters, step counter and per-row state, as full CPU tensors.

        Collective for partitioned embeddings (unless ``with_state=False``). For tables too
        large to copy at once use :func:`graphemb.save`, which stores the same thing.

        Parameters
        ----------
        with_state : bool
            Include the per-row state tensors (``False``: only what :func:`graphemb.save`
            writes as metadata).

        Returns
        -------
        dict
            ``{"state": {i: {name: Tensor (num_embeddings, ...)}}, "param_groups": [...],
            "steps_taken": int}`` where ``i`` indexes the embeddings in group order and each
            group lists its embeddings' indices in ``"params"`` and names in
            ``"param_names"``.
        """
        groups, offset = [], 0
        for group in self.param_groups:
            count = len(group["params"])
            saved = {k: v for k, v in group.items() if k != "params"}
            saved["params"] = list(range(offset, offset + count))
            saved["param_names"] = [e.name for e in group["params"]]
            groups.append(saved)
            offset += count
        result: dict[str, Any] = {"param_groups": groups, "steps_taken": self._steps_taken}
        if with_state:
            result["state"] = {
                i: {key: e.storage.gather(t) for key, t in self.state[e].items()}  # type: ignore[index]
                for i, e in enumerate(self.embeddings)
            }
        return result

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output. Everything is checked before anything
        changes: a mismatch raises ``ValueError`` naming the field and leaves the optimizer
        as it was. Collective with a process group."""
        self.prepare_load(state_dict)()

    def prepare_load(
        self, state_dict: dict[str, Any], *, with_state: bool = True
    ) -> Callable[[], None]:
        """Check ``state_dict`` completely; return the function that loads it.

        The one owner of what restoring an optimizer means, shared by
        :meth:`load_state_dict` and :func:`graphemb.load`: param groups (hyper-parameters,
        embedding names; lists of a JSON round trip become tuples again where the live group
        holds tuples), the step counter and, with ``with_state``, the per-row state tensors.
        Nothing changes until the returned function is called.

        Parameters
        ----------
        state_dict : dict
            The output of :meth:`state_dict`; without ``with_state`` its ``"state"`` is not
            read (:func:`graphemb.load` streams the per-row state itself) and may be absent.
            A missing ``"steps_taken"`` (dicts of older versions) restores 0.
        with_state : bool
            Check and load the per-row state tensors.

        Returns
        -------
        callable
            ``apply()``: installs everything (collective with a process group when
            ``with_state``).

        Raises
        ------
        ValueError
            Anything that does not fit this optimizer, naming the field.
        """
        new_groups = self._checked_groups(state_dict)
        steps = as_size("state_dict['steps_taken']", state_dict.get("steps_taken", 0))
        embeddings = self.embeddings
        saved_state: dict = {}
        if with_state:
            saved_state = state_dict.get("state")  # type: ignore[assignment]
            if not isinstance(saved_state, dict) or set(saved_state) != set(range(len(embeddings))):
                keys = sorted(saved_state) if isinstance(saved_state, dict) else saved_state
                raise ValueError(
                    f"state_dict['state'] must map embedding indices 0..{len(embeddings) - 1} "
                    f"to their state, got keys {keys!r}"
                )
            for i, embedding in enumerate(embeddings):
                self._check_saved_state(embedding, saved_state[i])

        def apply() -> None:
            if with_state:
                for i, embedding in enumerate(embeddings):
                    for key, table in self.state[embedding].items():  # type: ignore[index]
                        embedding.storage.write_all(table, saved_state[i][key].to(table.device))
            for group, new in zip(self.param_groups, new_groups, strict=True):
                group.clear()
                group.update(new)
            self._steps_taken = steps

        return apply

    def _checked_groups(self, state_dict: dict[str, Any]) -> list[dict]:
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("param_groups"), list):
            raise ValueError("state_dict must be a dict with a list of 'param_groups'")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"state_dict has {len(saved_groups)} param groups, the optimizer has "
                f"{len(self.param_groups)}"
            )
        new_groups = []
        for index, (group, saved) in enumerate(zip(self.param_groups, saved_groups, strict=True)):
            if not isinstance(saved, dict):
                raise ValueError(f"param_groups[{index}] must be a dict, got {saved!r}")
            names = [e.name for e in group["params"]]
            saved_names = saved.get("param_names", names)
            # "params" (indices) is optional: checkpoints identify embeddings by name only.
            saved_params = saved.get("params", names)
            if (
                not isinstance(saved_params, (list, tuple))
                or len(saved_params) != len(names)
                or (saved_names != names)
            ):
                raise ValueError(
                    f"param_groups[{index}] holds embeddings {saved_names}, the optimizer's "
                    f"group holds {names}"
                )
            missing = set(self.defaults) - set(saved)
            if missing:
                raise ValueError(f"param_groups[{index}] lacks hyper-parameters {sorted(missing)}")
            new = {k: v for k, v in saved.items() if k not in ("params", "param_names")}
            for key, value in new.items():
                if isinstance(group.get(key), tuple) and isinstance(value, list):
                    new[key] = tuple(value)
            new["params"] = group["params"]
            self._check_group(new)
            new_groups.append(new)
        return new_groups

    def _check_saved_state(self, embedding: NodeEmbedding, saved: dict) -> None:
        layout = self.state_layout(embedding)
        if not isinstance(saved, dict) or set(saved) != set(layout):
            raise ValueError(
                f"state of NodeEmbedding {embedding.name!r} must hold {sorted(layout)}, got "
                f"{sorted(saved) if isinstance(saved, dict) else saved!r}"
            )
        for key, (row_shape, dtype) in layout.items():
            tensor = saved[key]
            expected = (embedding.num_embeddings, *row_shape)
            if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != expected:
                found = tuple(getattr(tensor, "shape", ())) or type(tensor).__name__
                raise ValueError(
                    f"state {key!r} of NodeEmbedding {embedding.name!r} must have shape "
                    f"{expected}, got {found}"
                )
            if tensor.dtype != dtype:
                raise ValueError(
                    f"state {key!r} of NodeEmbedding {embedding.name!r} must be {dtype}, got "
                    f"{tensor.dtype}"
                )


# ---------------------------------------------------------------------- hyper-parameters
_BETAS = ("beta1", "beta2")  # the formula's names of torch's ("betas")[0], [1]


def check_hyper_parameters(group: Mapping[str, Any]) -> None:
    """``ValueError`` naming the first hyper-parameter of ``group`` out of range: ``lr`` and
    ``eps`` >= 0, ``betas`` a pair in [0, 1). Other keys are not looked at.

    Examples
    --------
    >>> check_hyper_parameters({"lr": 0.1, "betas": (0.9, 1.0)})
    Traceback (most recent call last):
    ...
    ValueError: invalid beta parameter at index 1: 1.0 (expected a number in [0.0, 1.0))
    """
    if "lr" in group:
        check_number("learning rate (lr)", group["lr"], 0.0)
    if "eps" in group:
        check_number("epsilon (eps)", group["eps"], 0.0)
    if "betas" in group:
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"invalid betas: {betas!r} (expected a pair of numbers in [0, 1))")
        for position, beta in enumerate(betas):
            check_number(f"beta parameter at index {position}", beta, 0.0, 1.0)


def check_number(
    name: str, value: Any, low: float, high: float = math.inf, high_inclusive: bool = False
) -> None:
    """``ValueError`` naming ``name`` unless ``low <= value < high`` (``<=`` if inclusive)."""
    ok_type = isinstance(value, (int, float)) and not isinstance(value, bool)
    in_range = ok_type and low <= value and (value <= high if high_inclusive else value < high)
    if not in_range:
        bound = "]" if high_inclusive else ")"
        raise ValueError(f"invalid {name}: {value!r} (expected a number in [{low}, {high}{bound})")
