"""``SparseOptimizer``: the step pipeline shared by every sparse optimizer.

One step, per embedding (see ``DESIGN.md``)::

    recorded (ids, grads) [--coalesce--> --push to owners-->        (with a process group)]
        --> sum duplicates, / world_size, update formula on weight and state rows
        --> after_update (barrier for shared memory)

The middle line runs as one fused pass per row on CPU (:mod:`graphemb.optim.kernels`), or
as coalesce -> gather rows -> formula (:mod:`graphemb.optim.functional`) -> scatter rows
in pure torch (GPUs, or without the compiled kernels).

Subclasses declare their per-row state (:meth:`_state_layout`), check their
hyper-parameters (:meth:`_check_group`) and call a formula of
:mod:`graphemb.optim.functional` (:meth:`_update_rows`). Everything else -- param groups,
``state_dict``, LR schedulers, processes -- is here.

The class derives from :class:`torch.optim.Optimizer` so that ``torch.optim.lr_scheduler``
accepts it; its "parameters" are :class:`~graphemb.NodeEmbedding` objects, not tensors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from ..embedding import NodeEmbedding
from . import kernels
from .rows import Workspace, coalesce_rows, gather_rows, scatter_rows

__all__ = ["SparseOptimizer"]

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
    """

    def __init__(self, params: Iterable[NodeEmbedding] | Iterable[dict], defaults: dict) -> None:
        if isinstance(params, (NodeEmbedding, torch.Tensor)):
            raise TypeError(
                f"{type(self).__name__}: params must be a list of NodeEmbedding, got a single "
                f"{type(params).__name__}"
            )
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: params is empty; pass a list of NodeEmbedding")
        self._check_group(defaults)
        self._workspace = Workspace()
        self._steps_taken = 0
        super().__init__(params, defaults)

    # ------------------------------------------------------------------ subclass hooks
    def _state_layout(self, embedding: NodeEmbedding) -> StateLayout:
        """Per-row state of ``embedding``: name -> (row shape, dtype)."""
        return {}

    def _check_group(self, group: dict) -> None:
        """Raise ``ValueError`` naming any hyper-parameter out of range."""

    def _update_rows(
        self,
        weight: torch.Tensor,
        grad: torch.Tensor,
        state: dict[str, torch.Tensor],
        group: dict,
        scratch: torch.Tensor,
    ) -> None:
        """Apply the formula to gathered rows, in place."""
        raise NotImplementedError

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
            self.state[embedding] = self._allocate_state(embedding)
        self.param_groups.append(group)

    def _allocate_state(self, embedding: NodeEmbedding) -> dict[str, torch.Tensor]:
        return {
            key: embedding._storage.create_table(
                f"{type(self).__name__}.{key}", row_shape, dtype
            )
            for key, (row_shape, dtype) in self._state_layout(embedding).items()
        }

    # ------------------------------------------------------------------ step
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Discard the gradients recorded so far by this optimizer's embeddings."""
        for group in self.param_groups:
            for embedding in group["params"]:
                embedding._clear_gradients()

    @torch.no_grad()
    def step(self, closure=None):
        """Apply the recorded gradients to the rows they belong to.

        Collective with a process group. Returns the closure's loss, if one is given.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._steps_taken += 1
        for group in self.param_groups:
            for embedding in group["params"]:
                self._step_embedding(embedding, group)
        return loss

    def _step_embedding(self, embedding: NodeEmbedding, group: dict) -> None:
        storage = embedding._storage
        ids, grads = embedding._take_gradients()
        divisor = 1  # gradients are averaged over ranks: the global mean, as DDP's
        if storage.distributed:
            what = f"gradient push of {type(self).__name__} step {self._steps_taken}"
            if storage.coalesce_before_push:  # fewer rows to send
                ids, grads = coalesce_rows(ids, grads, self._workspace)
            ids, (grads,) = storage.push(ids, [grads], what)
            divisor = storage.world_size
        if ids.numel():
            index = storage.owned_index(ids)
            if kernels.usable_for(embedding.weight):
                # One fused pass per row; a stable sort keeps index_add_'s summation order.
                index, order = torch.sort(index, stable=True)
                self._fused_update(embedding, index, order, grads.contiguous(), divisor, group)
            else:
                index, grads = coalesce_rows(index, grads, self._workspace)
                if divisor != 1:
                    grads.div_(divisor)
                self._apply(embedding, index, grads, group)
        storage.after_update(f"end of {type(self).__name__} step {self._steps_taken}")

    def _fused_update(
        self, embedding: NodeEmbedding, index: torch.Tensor, order: torch.Tensor,
        grads: torch.Tensor, divisor: int, group: dict,
    ) -> None:
        """Update the rows of sorted ``index`` with :mod:`graphemb.optim.kernels`: sum the
        ``grads`` rows ``order`` of each run of equal indices, divide by ``divisor``, apply
        the formula to weight and state in place."""
        raise NotImplementedError

    def _apply(
        self, embedding: NodeEmbedding, index: torch.Tensor, grads: torch.Tensor, group: dict
    ) -> None:
        """Gather the owned rows ``index``, run the formula, scatter the rows back."""
        rows, dim = index.numel(), grads.shape[1]
        compute, device = grads.dtype, grads.device
        take = self._workspace.take
        weight = gather_rows(
            embedding.weight, index, compute, take("weight", rows, (dim,), compute, device)
        )
        tables = self.state[embedding]
        state = {
            key: gather_rows(
                table, index, table.dtype,
                take(f"state.{key}", rows, table.shape[1:], table.dtype, device),
            )
            for key, table in tables.items()
        }
        self._update_rows(weight, grads, state, group, take("scratch", rows, (dim,), compute, device))
        scatter_rows(embedding.weight, index, weight)
        for key, table in tables.items():
            scatter_rows(table, index, state[key])

    # ------------------------------------------------------------------ state dict
    def _embeddings(self) -> list[NodeEmbedding]:
        return [e for g in self.param_groups for e in g["params"]]

    def state_dict(self) -> dict[str, Any]:
        """Hyper-parameters and per-row state, as full CPU tensors.

        Collective for partitioned embeddings. For tables too large to copy at once use
        :func:`graphemb.save`.

        Returns
        -------
        dict
            ``{"state": {i: {name: Tensor (num_embeddings, ...)}}, "param_groups": [...]}``
            where ``i`` indexes the embeddings in group order and each group lists its
            embeddings' indices in ``"params"`` and names in ``"param_names"``.
        """
        embeddings = self._embeddings()
        state = {
            i: {key: e._storage.gather(t) for key, t in self.state[e].items()}
            for i, e in enumerate(embeddings)
        }
        groups, offset = [], 0
        for group in self.param_groups:
            count = len(group["params"])
            saved = {k: v for k, v in group.items() if k != "params"}
            saved["params"] = list(range(offset, offset + count))
            saved["param_names"] = [e.name for e in group["params"]]
            groups.append(saved)
            offset += count
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output. Everything is checked before anything
        changes: a mismatch raises ``ValueError`` naming the field and leaves the optimizer
        as it was. Collective with a process group."""
        new_groups = self._checked_groups(state_dict)
        embeddings = self._embeddings()
        saved_state = state_dict.get("state")
        if not isinstance(saved_state, dict) or set(saved_state) != set(range(len(embeddings))):
            raise ValueError(
                f"state_dict['state'] must map embedding indices 0..{len(embeddings) - 1} to "
                f"their state, got keys {sorted(saved_state) if isinstance(saved_state, dict) else saved_state!r}"
            )
        for i, embedding in enumerate(embeddings):
            self._check_saved_state(embedding, saved_state[i])

        for i, embedding in enumerate(embeddings):
            for key, table in self.state[embedding].items():
                embedding._storage.write_all(table, saved_state[i][key].to(table.device))
        for group, new in zip(self.param_groups, new_groups):
            group.clear()
            group.update(new)

    def _checked_groups(self, state_dict: dict[str, Any]) -> list[dict]:
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict:
            raise ValueError("state_dict must be a dict with 'state' and 'param_groups'")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"state_dict has {len(saved_groups)} param groups, the optimizer has "
                f"{len(self.param_groups)}"
            )
        new_groups = []
        for index, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            names = [e.name for e in group["params"]]
            saved_names = saved.get("param_names", names)
            if len(saved.get("params", ())) != len(names) or saved_names != names:
                raise ValueError(
                    f"param_groups[{index}] holds embeddings {saved_names}, the optimizer's "
                    f"group holds {names}"
                )
            missing = set(self.defaults) - set(saved)
            if missing:
                raise ValueError(f"param_groups[{index}] lacks hyper-parameters {sorted(missing)}")
            new = {k: v for k, v in saved.items() if k not in ("params", "param_names")}
            new["params"] = group["params"]
            self._check_group(new)
            new_groups.append(new)
        return new_groups

    def _check_saved_state(self, embedding: NodeEmbedding, saved: dict) -> None:
        layout = self._state_layout(embedding)
        if not isinstance(saved, dict) or set(saved) != set(layout):
            raise ValueError(
                f"state of NodeEmbedding {embedding.name!r} must hold {sorted(layout)}, got "
                f"{sorted(saved) if isinstance(saved, dict) else saved!r}"
            )
        for key, (row_shape, dtype) in layout.items():
            tensor = saved[key]
            expected = (embedding.num_embeddings, *row_shape)
            if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != expected:
                raise ValueError(
                    f"state {key!r} of NodeEmbedding {embedding.name!r} must have shape "
                    f"{expected}, got {tuple(getattr(tensor, 'shape', ())) or type(tensor).__name__}"
                )
            if tensor.dtype != dtype:
                raise ValueError(
                    f"state {key!r} of NodeEmbedding {embedding.name!r} must be {dtype}, got "
                    f"{tensor.dtype}"
                )


def check_number(name: str, value: Any, low: float, high: float = math.inf,
                 high_inclusive: bool = False) -> None:
    """``ValueError`` naming ``name`` unless ``low <= value < high`` (``<=`` if inclusive)."""
    ok_type = isinstance(value, (int, float)) and not isinstance(value, bool)
    in_range = ok_type and low <= value and (value <= high if high_inclusive else value < high)
    if not in_range:
        bound = "]" if high_inclusive else ")"
        raise ValueError(f"invalid {name}: {value!r} (expected a number in [{low}, {high}{bound})")
