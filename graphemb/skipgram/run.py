"""DeepWalk / node2vec in one call: :func:`train_node_embeddings`, the one run loop of every
backend -- walk chunks, passes, the learning rate, progress, and the guard against rows
that blew up."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from .._checks import as_size
from ..graph import Graph
from .backends import SkipGramBackend, create_backend
from .corpus import Corpus
from .guard import check_rows
from .options import Backend, CompiledOptions, SkipGramOptions, TorchOptions, parse_backend
from .rate import LearningRate

__all__ = ["train_node_embeddings"]


def train_node_embeddings(
    graph: Graph,
    options: SkipGramOptions | None = None,
    *,
    backend: Backend | str = Backend.AUTO,
    workers: int | None = None,
    compiled_options: CompiledOptions | None = None,
    torch_options: TorchOptions | None = None,
    progress: bool = False,
    **changes: Any,
) -> torch.Tensor:
    """DeepWalk / node2vec embeddings of every node of ``graph``, trained the word2vec way.

    Parameters
    ----------
    graph : Graph
        Walks follow its out-edges (store both directions of an undirected graph).
    options : SkipGramOptions, optional
        What the run does (walks, window, noise, learning rate, seed; see
        :class:`~graphemb.skipgram.SkipGramOptions`); default its defaults.
    backend : {"auto", "compiled", "torch"} or Backend
        Which code trains (:class:`~graphemb.skipgram.Backend`): "auto" the compiled one on
        CPU graphs where the kernels load (with a warning when they are missing), else
        torch; "compiled" raises where it cannot run.
    workers : int, optional
        CPU threads that train: the compiled backend's lock-free threads, or torch's
        threads for the torch backend on CPU. Default ``torch.get_num_threads()``.
    compiled_options, torch_options : optional
        What only that backend takes (:class:`~graphemb.skipgram.CompiledOptions`,
        :class:`~graphemb.skipgram.TorchOptions`), used when it trains.
    progress : bool
        Show a tqdm progress bar of the walks trained.
    **changes
        Options to change from ``options`` by name (``dimensions=64, window=5``).

    Returns
    -------
    Tensor of float32, shape (N, D)
        The input rows (word2vec's vectors), in node-id order, on the graph's device.

    Raises
    ------
    TrainingDiverged
        A score or a row came out non-finite, or a row's norm past
        :data:`~graphemb.skipgram.guard.MAX_ROW_NORM` (too high ``lr``): nothing is
        returned.

    Examples
    --------
    >>> ring = Graph.from_edges(torch.arange(6), (torch.arange(6) + 1) % 6, undirected=True)
    >>> rows = train_node_embeddings(ring, dimensions=8, walk_length=5, num_walks=2)
    >>> rows.shape
    torch.Size([6, 8])
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a graphemb.graph.Graph, got {type(graph).__name__}")
    options = (options or SkipGramOptions()).replace(**changes).checked()
    choice = parse_backend(backend)
    workers = torch.get_num_threads() if workers is None else as_size("workers", workers, minimum=1)
    rank, world_size = _process_group()
    corpus = Corpus(graph, options, rank, world_size)
    rate = LearningRate.of_run(options.lr, corpus.total_walks * options.passes, options.walk_length)
    trainer = create_backend(
        choice, corpus, options, workers=workers, chunks=corpus.count * options.passes,
        world_size=world_size,
        compiled_options=compiled_options, torch_options=torch_options,
    )  # fmt: skip
    with trainer:
        _train_chunks(trainer, corpus, options.passes, rate, progress and rank == 0)
    rows = trainer.input_rows()
    # the backend (its output rows, its noise) freed before the check reads the input
    # rows: the check's temporaries never sit beside both tables
    del trainer
    check_rows(rows, options.lr, "by the end of training")
    return rows


def _train_chunks(
    trainer: SkipGramBackend, corpus: Corpus, passes: int, rate: LearningRate, progress: bool
) -> None:
    """Every chunk of ``corpus``'s walks through ``trainer``, ``passes`` times over, one
    chunk held at a time; a progress bar of the walks trained if ``progress``."""
    done = 0
    with _progress_bar(rate.total_walks, progress) as advance:
        for chunk in corpus.chunks():
            for repeat in range(passes):  # SGD passes over the same walks
                trainer.train_chunk(chunk, repeat, done, rate)
                done += chunk.size
                advance(chunk.size)
            del chunk  # before the next is walked: one chunk of walks held at a time


def _process_group() -> tuple[int, int]:
    """``(rank, world size)`` of the process group that trains together, ``(0, 1)`` without
    one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


@contextlib.contextmanager
def _progress_bar(total: int, show: bool) -> Iterator[Any]:
    """``advance(walks)`` of a tqdm bar of ``total`` walks when ``show``, else a no-op."""
    if not show:
        yield lambda count: None
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="walk", smoothing=0.1) as bar:
        yield bar.update
