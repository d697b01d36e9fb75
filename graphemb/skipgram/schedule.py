"""What both trainers of :func:`graphemb.skipgram.train_node_embeddings` share: their checked
settings, the walk chunks of a run, the noise distribution and subsampling, the learning
rate's schedule, and the torch trainer's step.

A run is ``epochs * num_walks`` rounds; each round draws a fresh permutation of the nodes
and starts one walk from each, ``chunk_walks`` walks at a time (:func:`chunks`). The
learning rate decays linearly with the walks done over the whole run
(:func:`~.compiled.learning_rate`). :func:`train_step` is one step of the torch trainer:
word2vec's dynamic window and the negatives drawn for a batch, then its SGD step.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch

from ..graph import Graph
from ..sampling.negatives import NegativeSampler
from ..sampling.walks import RandomWalker
from .compiled import learning_rate
from .model import SkipGram
from .windows import dynamic_radii, keep_probabilities

__all__ = [
    "Settings",
    "chunk_count",
    "chunks",
    "learning_rate",
    "noise_and_keep",
    "progress_bar",
    "token_counts",
    "train_step",
    "walker",
]


@dataclasses.dataclass(frozen=True)
class Settings:
    """The checked arguments of :func:`graphemb.skipgram.train_node_embeddings` (see its
    parameters)."""

    dimensions: int
    walk_length: int
    num_walks: int
    window: int
    p: float
    q: float
    negatives: int
    epochs: int
    sample: float
    lr: float
    sharing: str
    walk_negatives: int
    matmul_dtype: torch.dtype | str | None
    batch_walks: int
    chunk_walks: int
    seed: int
    progress: bool
    name: str
    duplicates: str
    weighted: bool = False
    passes: int = 1


def walker(graph: Graph, settings: Settings) -> RandomWalker:
    """The random walker of both trainers."""
    return RandomWalker(graph, settings.p, settings.q, weighted=settings.weighted)


def token_counts(graph: Graph, weighted: bool) -> torch.Tensor:
    """How often walks visit each node, up to a constant: float64 of shape (N,).

    word2vec counts the tokens of its corpus before training; walks are drawn as they are
    trained, so their counts stand in: a node's in-degree, or with ``weighted`` walks its
    weighted in-degree (the sum of its in-edges' weights). On an undirected graph a walk's
    long-run share of visits to a node is exactly that (the stationary distribution of
    the walk); counting edges instead of weights would give the noise distribution and the
    subsampling of an unweighted graph whose walks these are not.
    """
    if weighted and graph.edge_weight is not None:
        _, destinations = graph.edges()
        counts = torch.zeros(graph.num_nodes, dtype=torch.float64, device=graph.device)
        return counts.index_add_(0, destinations, graph.edge_weight.to(torch.float64))
    return graph.in_degrees().to(torch.float64)


def noise_and_keep(graph: Graph, settings: Settings) -> tuple[NegativeSampler, torch.Tensor]:
    """The noise distribution (:func:`token_counts` ** 0.75; uniform on a graph without
    edges) and the subsampling keep probabilities, float64 of shape (N,)."""
    counts = token_counts(graph, settings.weighted)
    noise = NegativeSampler(counts if bool((counts > 0).any()) else torch.ones_like(counts))
    return noise, keep_probabilities(counts, settings.sample)


def chunk_count(graph: Graph, settings: Settings) -> int:
    """The number of walk chunks of the run (:func:`chunks`): ``ceil(N / chunk_walks)`` per
    round, ``epochs * num_walks`` rounds.

    Parameters
    ----------
    graph : Graph
        The graph whose nodes start the walks (``N`` of them).
    settings : Settings
        The run's ``chunk_walks``, ``epochs`` and ``num_walks``.

    Returns
    -------
    int
    """
    per_round = -(-graph.num_nodes // settings.chunk_walks)
    return per_round * settings.epochs * settings.num_walks


def chunks(
    graph: Graph, settings: Settings, order_generator: torch.Generator
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(index, count, start nodes)`` of every walk chunk of the run: each round a fresh
    permutation of the nodes, split into ``chunk_walks``; ``count`` chunks in all
    (:func:`chunk_count`)."""
    count = chunk_count(graph, settings)
    index = 0
    for _ in range(settings.epochs * settings.num_walks):
        order = torch.randperm(graph.num_nodes, generator=order_generator)
        for starts in order.split(settings.chunk_walks):
            yield index, count, starts
            index += 1


def progress_bar(total: int, show: bool) -> Any:
    """A tqdm bar of ``total`` walks when ``show`` (tqdm is needed only then), else a
    context whose ``update`` does nothing."""
    if not show:
        return contextlib.nullcontext(_NoBar())
    from tqdm import tqdm

    return tqdm(total=total, unit="walk", smoothing=0.1)


class _NoBar:
    def update(self, count: int) -> None:
        pass


def train_step(
    model: SkipGram,
    walks: torch.Tensor,
    noise: NegativeSampler,
    *,
    lr: float,
    generator: torch.Generator | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    block_size: int | None = None,
    matmul_dtype: torch.dtype | None = None,
    duplicates: str = "cap:1.5",
    return_loss: bool = False,
    loss_scale: float = 1.0,
) -> float | None:
    """One step of the torch trainer: word2vec's SGD on the summed loss of a batch of walks.

    Draws a dynamic window radius per position (:func:`~.windows.dynamic_radii`), then
    the negatives in the model's layout, both from ``generator`` in that order; then
    steps at learning rate ``lr``: :meth:`SkipGram.sgd_step` where
    :attr:`SkipGram.fused_step`, else backward of the summed loss and ``optimizer``.

    Parameters
    ----------
    model : SkipGram
    walks : Tensor of int64, shape (W, T)
        The batch, :data:`~graphemb.sampling.walks.PAD` after a walk's end.
    noise : NegativeSampler
        Draws the negatives.
    lr : float
        This step's learning rate (e.g. :func:`learning_rate` of the run's progress); set
        on ``optimizer``'s groups too.
    generator : torch.Generator, optional
        Source of the radii and negatives.
    optimizer : torch.optim.Optimizer, optional
        Steps the tables where the fused step does not apply (needed then).
    block_size : int, optional
        ``M`` of block layouts (see :meth:`SkipGram.negatives_shape`).
    matmul_dtype, duplicates
        Of the fused step (see :meth:`SkipGram.sgd_step`).
    return_loss : bool
        Return the batch's summed loss before the step (else None, which saves its
        computation in the fused step).
    loss_scale : float
        Factor of the loss before backward (e.g. the world size, to undo an optimizer's
        mean over ranks).

    Returns
    -------
    float or None
    """
    radii = dynamic_radii(walks.shape, model.window, device=walks.device, generator=generator)
    drawn = noise(model.negatives_shape(walks.shape, block_size), generator=generator)
    if optimizer is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr
    if model.fused_step:
        return model.sgd_step(
            walks,
            drawn,
            lr=lr,
            radii=radii,
            matmul_dtype=matmul_dtype,
            duplicates=duplicates,
            return_loss=return_loss,
        )
    if optimizer is None:
        raise ValueError(
            f"train_step needs an optimizer for sharing={model.sharing!r} with "
            f"{model.center.storage_kind!r} tables (no fused step)"
        )
    loss = model(walks, drawn, radii=radii, reduction="sum")
    (loss if loss_scale == 1 else loss * loss_scale).backward()
    optimizer.step()
    return loss.item() if return_loss else None
