"""The workload every contender runs: batches of random ids and a loss on their rows."""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

Loss = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Workload:
    """What the contenders of one comparison share: a table of ``num_embeddings`` rows of
    width ``dim``, the batches of ids (int64 ``(B,)``) a step looks up in turn, and the loss
    of the looked-up rows (``(B, dim)`` -> scalar)."""

    num_embeddings: int
    dim: int
    batches: Sequence[torch.Tensor]
    loss: Loss


def make_batches(num_embeddings: int, batch: int, count: int, seed: int) -> list[torch.Tensor]:
    """``count`` batches of ``batch`` uniform random ids (with replacement), int64, CPU."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, num_embeddings, (batch,), generator=gen) for _ in range(count)]


def rank_slice(ids: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Contiguous share ``rank`` of a global batch (sizes differ by at most one)."""
    per, extra = divmod(ids.numel(), world_size)
    start = rank * per + min(rank, extra)
    return ids[start : start + per + (1 if rank < extra else 0)]


def expected_unique(num_embeddings: int, draws: int) -> float:
    """Expected distinct ids among ``draws`` uniform draws (with replacement) of ``n`` ids:
    ``n * (1 - (1 - 1/n) ** draws)``."""
    return num_embeddings * -math.expm1(draws * math.log1p(-1.0 / num_embeddings))


def mean_unique(batches: Sequence[torch.Tensor]) -> float:
    """Mean number of distinct ids per batch."""
    return sum(torch.unique(b).numel() for b in batches) / len(batches)


def _square_loss(rows: torch.Tensor) -> torch.Tensor:
    return (rows * rows).sum()


class _LinearLoss:
    """``F.linear(rows, W).sum()`` with a fixed random ``W`` of shape (16, D)."""

    def __init__(self, dim: int, device: torch.device) -> None:
        gen = torch.Generator().manual_seed(1234)
        self.weight = (torch.randn(16, dim, generator=gen) / math.sqrt(dim)).to(device)

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(rows, self.weight).sum()


class _Upstream(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, upstream):  # type: ignore[override]
        ctx.upstream = upstream
        return rows.new_zeros(())

    @staticmethod
    def backward(ctx, _):  # type: ignore[override]
        return ctx.upstream, None


class _UpstreamLoss:
    """A stand-in for the rest of the model: a scalar whose backward hands the rows a fixed,
    precomputed, contiguous ``(B, D)`` gradient -- as a model's first layer would -- so that
    the timing is the embedding library's own work (lookup, gradient bookkeeping, update),
    not the elementwise ops of a toy loss."""

    def __init__(self, dim: int, device: torch.device) -> None:
        self.dim, self.device = dim, device
        self._upstream: torch.Tensor | None = None

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        if self._upstream is None or self._upstream.shape != rows.shape:
            gen = torch.Generator().manual_seed(4321)
            self._upstream = torch.randn(rows.shape, generator=gen).to(self.device)
        return _Upstream.apply(rows, self._upstream)


LOSSES = {
    "upstream": "the model's gradient, precomputed: backward hands the looked-up rows a fixed "
    "contiguous (B, D) gradient, so loss and model cost nothing and the timing is "
    "the library's lookup, gradient bookkeeping and update",
    "square": "loss = (rows * rows).sum(); its gradient 2 * rows is a dense, contiguous "
    "(B, D) tensor",
    "linear": "loss = F.linear(rows, W).sum() with a fixed random W (16, D); its gradient "
    "ones(B, 16) @ W is a dense, contiguous (B, D) tensor",
}


def make_loss(kind: str, dim: int, device: torch.device | str = "cpu") -> Loss:
    """The loss ``kind`` (a key of :data:`LOSSES`) for rows of width ``dim``."""
    if kind == "upstream":
        return _UpstreamLoss(dim, torch.device(device))
    if kind == "square":
        return _square_loss
    if kind == "linear":
        return _LinearLoss(dim, torch.device(device))
    raise ValueError(f"unknown loss {kind!r}; choose one of {sorted(LOSSES)}")


def rank_spec(args, **entries) -> dict:
    """The ``spec`` that :func:`rank_workload` reads back on every rank: the workload's
    options from ``args`` (sizes, seed, loss), and a benchmark's own ``entries``."""
    return {
        "num_embeddings": args.num_embeddings,
        "dim": args.dim,
        "batch": args.batch,
        "seed": args.seed,
        "loss": args.loss,
        **entries,
    }


def rank_workload(spec: dict, rank: int, world_size: int) -> Workload:
    """This rank's share of every batch and the loss, from a run's ``spec`` (built the
    same way on every rank)."""
    n, d = spec["num_embeddings"], spec["dim"]
    batches = [
        rank_slice(b, rank, world_size) for b in make_batches(n, spec["batch"], 8, spec["seed"])
    ]
    return Workload(n, d, batches, make_loss(spec["loss"], d))


def unique_name(label: str) -> str:
    """A table name no other process on this machine uses (for shared-memory names)."""
    return f"bench-{label}-{os.getpid()}-{secrets.token_hex(3)}"
