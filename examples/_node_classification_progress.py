"""Where a run of ``examples/node_classification.py`` stands (best and last accuracies,
epoch times) and its checkpoints: save after an epoch, resume with ``--resume``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import graphemb
from graphemb import NodeEmbedding
from graphemb.optim import SparseAdam


class Best:
    """Test accuracy at the epoch of best validation accuracy."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        state = state or {}
        self.epoch = int(state.get("epoch", 0))
        self.val = float(state.get("val", -1.0))
        self.test = float(state.get("test", 0.0))

    def update(self, epoch: int, accuracy: dict[str, float]) -> None:
        if accuracy["val"] > self.val:
            self.epoch, self.val, self.test = epoch, accuracy["val"], accuracy["test"]

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "val": self.val, "test": self.test}


@dataclass
class Progress:
    """Where a run stands: its first epoch (later than 1 when resumed), the best epoch so
    far, the last epoch's accuracies and the seconds of each epoch trained in this run."""

    first_epoch: int = 1
    best: Best = field(default_factory=Best)
    last: dict[str, float] = field(default_factory=dict)
    epoch_seconds: list[float] = field(default_factory=list)


def save_checkpoint(
    path: Path,
    embedding: NodeEmbedding,
    sparse_opt: SparseAdam,
    model: torch.nn.Module,
    dense_opt: torch.optim.Optimizer,
    epoch: int,
    best: Best,
) -> None:
    """Everything needed to resume after ``epoch``; collective with a process group."""
    if embedding.rank == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
    # CPU copies: a checkpoint written on a GPU loads anywhere.
    extra = {
        "epoch": epoch,
        "model": {key: value.cpu() for key, value in model.state_dict().items()},
        "dense_optimizer": _to_cpu(dense_opt.state_dict()),
        "best": best.state(),
    }
    graphemb.save(path, [embedding], sparse_opt, extra=extra)


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_cpu(item) for item in value]
    return value


def load_checkpoint(
    path: Path,
    embedding: NodeEmbedding,
    sparse_opt: SparseAdam,
    model: torch.nn.Module,
    dense_opt: torch.optim.Optimizer,
) -> tuple[int, Best]:
    """Restore a checkpoint; returns the last finished epoch and the best accuracy so far."""
    extra = graphemb.load(path, [embedding], sparse_opt)["extra"]
    model.load_state_dict(extra["model"])  # copied onto the model's device
    dense_opt.load_state_dict(extra["dense_optimizer"])  # state moved to its parameters'
    return int(extra["epoch"]), Best(extra["best"])


def resumed_line(path: Path, done: int, best: Best) -> str:
    """What a resumed run prints first."""
    return f"RESUMED from {path} after epoch {done} (best val {best.val:.4f} at epoch {best.epoch})"


def resume_from_checkpoint(
    args: argparse.Namespace,
    embedding: NodeEmbedding | None,
    sparse_opt: SparseAdam | None,
    model: torch.nn.Module,
    dense_opt: torch.optim.Optimizer,
    show: bool = True,
) -> Progress:
    """The run's start: restored from ``args.checkpoint`` with ``--resume`` (and the
    :func:`resumed_line` printed when ``show``), else epoch 1 and no best yet."""
    if not args.resume:
        return Progress()
    assert embedding is not None and sparse_opt is not None  # finish_arguments checked
    done, best = load_checkpoint(args.checkpoint, embedding, sparse_opt, model, dense_opt)
    if show:
        print(resumed_line(args.checkpoint, done, best), flush=True)
    return Progress(done + 1, best)
