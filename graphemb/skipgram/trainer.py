"""DeepWalk / node2vec in one call: :func:`train_node_embeddings`.

It checks its arguments into :class:`~.schedule.Settings`, then runs one of two trainers
over the walk chunks of the run (:func:`~.schedule.chunks`): the compiled Hogwild trainer
(:mod:`graphemb.skipgram.compiled`, word2vec's own per-pair updates in C++ threads) on CPU
graphs where it is built, else the torch trainer (:func:`~.workers.train_process`, batched
steps of :func:`~.schedule.train_step`, in one process or several).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from .._checks import as_size
from ..graph import Graph
from .compiled import (
    check_finite,
    chunk_seed,
    compiled_trainer,
    held_walks,
    hogwild_pass,
    init_tables,
)
from .governor import ThreadGovernor
from .schedule import Settings, chunk_count, chunks, noise_and_keep, progress_bar, walker
from .sharing import SHARING, TRAINER_SHARING, layout
from .step import check_duplicates
from .workers import train_in_processes, train_process

__all__ = ["COMPILED_LR", "TORCH_LR", "TRAINERS", "train_node_embeddings"]

#: Default learning rates of :func:`train_node_embeddings`: word2vec's for the compiled
#: trainer; higher for the torch trainer's batched steps (see its ``lr``).
COMPILED_LR, TORCH_LR = 0.025, 0.035

#: :func:`train_node_embeddings`' trainers.
TRAINERS = ("auto", "compiled", "torch")


def train_node_embeddings(
    graph: Graph,
    *,
    dimensions: int = 128,
    walk_length: int = 80,
    num_walks: int = 10,
    window: int = 10,
    p: float = 1.0,
    q: float = 1.0,
    weighted: bool = False,
    negatives: int = 5,
    epochs: int = 1,
    passes: int = 1,
    sample: float = 1e-3,
    lr: float | None = None,
    trainer: str = "auto",
    sharing: str = "batch",
    walk_negatives: int | None = None,
    matmul_dtype: torch.dtype | str | None = "auto",
    batch_walks: int = 32,
    duplicates: str = "cap:1.5",
    chunk_walks: int = 8192,
    workers: int = 1,
    seed: int = 0,
    progress: bool = False,
    name: str = "deepwalk",
) -> torch.Tensor:
    """DeepWalk / node2vec embeddings of every node, trained the word2vec way.

    ``num_walks`` walks of ``walk_length`` steps from every node (node2vec's biased walks
    when ``p`` or ``q`` differ from 1), frequent nodes subsampled, a dynamic window of at
    most ``window``, ``negatives`` noise nodes per pair from ``degree ** 0.75``, and one
    pass of plain SGD whose learning rate decays linearly from ``lr`` to ``lr / 250``
    (gensim's 0.025 to 0.0001) over all walks (``epochs`` rounds of ``num_walks`` walks
    per node, each trained ``passes`` times; the compiled trainer holds it for each 10,000
    tokens, as word2vec does).
    Walks are drawn ``chunk_walks`` at a time and consumed at once, so memory does not
    grow with ``num_walks`` or the number of nodes beyond the two tables.

    Two trainers: the compiled one (``graphemb_kernels.skipgram_train``,
    :mod:`graphemb.skipgram.compiled`) is word2vec's own algorithm -- rows updated one
    (context, node) pair at a time, in ``workers`` lock-free threads -- and is used on
    CPU graphs whenever the module is built and ``GRAPHEMB_DISABLE_KERNELS`` is not set;
    the torch trainer (batched steps of :meth:`SkipGram.sgd_step`) runs on CUDA graphs
    and as the fallback. ``sharing``, ``walk_negatives``, ``matmul_dtype``,
    ``batch_walks`` and ``duplicates`` are the torch trainer's only.

    Parameters
    ----------
    graph : Graph
        Walks follow its out-edges (store both directions of an undirected graph).
    dimensions : int
        Embedding size ``D``.
    walk_length : int
        Nodes per walk (the reference implementations' ``--walk-length``: a walk of
        ``walk_length`` nodes takes ``walk_length - 1`` steps).
    num_walks : int
        Walks started from every node per epoch.
    window : int
        Largest context distance (word2vec's ``window``).
    p, q : float
        node2vec's return and in-out parameters.
    weighted : bool
        Walks step in proportion to ``graph.edge_weight`` (see ``RandomWalker``).
    negatives : int
        Negatives per (center, context) pair ``K``.
    epochs : int
        Rounds of walks; each draws ``num_walks`` fresh walks per node.
    passes : int
        SGD passes over the same walks (the reference node2vec's ``--iter``, gensim's
        ``epochs``): each chunk of walks is trained ``passes`` times in a row, with fresh
        subsampling and negatives each time, before the next chunk is drawn (memory does
        not grow with it). The learning rate decays over all passes.
    sample : float
        Subsampling threshold of frequent nodes (gensim's ``sample``; 0 disables). Node
        frequencies are their expected share of walk tokens: the in-degree share, or the
        weighted in-degree share with ``weighted`` walks (the noise distribution too).
    lr : float, optional
        Initial learning rate of SGD (word2vec's ``alpha``), decayed linearly over the run.
        Default: :data:`COMPILED_LR` (word2vec's 0.025) for the compiled trainer,
        :data:`TORCH_LR` for the torch trainer, whose batched step caps the move of
        repeated rows (``duplicates``), so the rare nodes need a larger rate to train as
        far in one pass.
    trainer : {"auto", "compiled", "torch"}
        "auto" (default): the compiled trainer where it can run (CPU graph, module built,
        not disabled), else the torch trainer; "compiled" raises where it cannot run.
    sharing : {"batch", "walk", "position"}
        Torch trainer: the layout of negatives of :meth:`SkipGram.forward`
        (:mod:`graphemb.skipgram.sharing`). ``"batch"`` (default) draws one block of
        ``walk_negatives`` noise nodes per walk of a step and scores each center against
        a block drawn for another walk (the diagonal of :func:`diagonal_blocks`), weighted
        to the same expected loss; ``"walk"`` scores the centers of a walk against its
        own block; ``"position"`` draws ``negatives`` per center, shared by its pairs.
        (``"pair"``, word2vec's own draws per pair, is the compiled trainer's: summed into
        one synchronous step it is unstable, so the torch trainer does not offer it.)
    walk_negatives : int, optional
        Noise nodes per block with ``sharing="batch"`` or ``"walk"`` (one block per walk);
        default ``negatives * (window + 1)``, what a center draws in word2vec on average.
    matmul_dtype : torch.dtype, None, "auto" or a dtype's name
        Dtype of the batched products of :meth:`SkipGram.sgd_step` (None: the tables',
        float32); "auto": :func:`fast_matmul_dtype` (bfloat16 where the CPU has fast
        bfloat16 units).
    batch_walks : int
        Walks per SGD step of the torch trainer. Small graphs need small batches to take
        enough steps, and so do graphs with hubs: a hub repeated in a step moves by at
        most ``duplicates``' cap, so fewer, larger steps move it less.
    duplicates : str
        How rows repeated within a step of the torch trainer move, see
        :meth:`SkipGram.sgd_step`; default "cap:1.5": the summed gradient, at most 1.5
        times the mean.
    chunk_walks : int
        Walks drawn at once (memory: ``chunk_walks * walk_length`` int64).
    workers : int
        Compiled trainer: threads, each training a share of every chunk of walks on the
        shared tables without locks (word2vec's threads); with 1 the result depends only on
        ``seed``. A chunk runs on one thread instead while one was measured faster (threads
        whose cores share no cache slow each other down, see
        :class:`~graphemb.skipgram.governor.ThreadGovernor`). Torch trainer: processes
        (CPU), each trains its share of every chunk of walks, writing into tables in shared
        memory without locks, as word2vec's threads do.
        Each uses one core. Starting them costs seconds (an interpreter and torch each), and
        writers of one table slow each other's steps (hot rows, shared caches): they pay
        off in long runs only.
    seed : int
        Seeds initialisation, walks and negatives.
    progress : bool
        Show a tqdm progress bar (walks done).
    name : str
        Names of the embedding tables.

    Returns
    -------
    Tensor of float32, shape (N, D)
        The center rows (word2vec's input vectors), in node-id order.

    Raises
    ------
    TrainingDiverged
        A score or row came out non-finite (too high ``lr``); nothing is returned.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a graphemb.graph.Graph, got {type(graph).__name__}")
    walk_length = as_size("walk_length", walk_length, minimum=1)
    num_walks = as_size("num_walks", num_walks, minimum=1)
    epochs = as_size("epochs", epochs, minimum=1)
    passes = as_size("passes", passes, minimum=1)
    negatives = as_size("negatives", negatives, minimum=1)
    batch_walks = as_size("batch_walks", batch_walks, minimum=1)
    chunk_walks = max(as_size("chunk_walks", chunk_walks, minimum=1), batch_walks)
    kernel = _chosen_kernel(graph, trainer)
    if lr is None:
        lr = TORCH_LR if kernel is None else COMPILED_LR
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    _check_sharing(sharing)
    check_duplicates(duplicates)
    matmul_dtype = _checked_matmul_dtype(matmul_dtype)
    workers = as_size("workers", workers, minimum=1)
    per_block = negatives * (window + 1) if walk_negatives is None else walk_negatives
    settings = Settings(
        dimensions=as_size("dimensions", dimensions, minimum=1),
        walk_length=walk_length,
        num_walks=num_walks,
        window=as_size("window", window, minimum=1),
        p=p,
        q=q,
        weighted=weighted,
        negatives=negatives,
        epochs=epochs,
        passes=passes,
        sample=sample,
        lr=float(lr),
        sharing=sharing,
        walk_negatives=as_size("walk_negatives", per_block, minimum=1),
        matmul_dtype=matmul_dtype,
        batch_walks=batch_walks,
        chunk_walks=chunk_walks,
        seed=seed,
        progress=progress,
        name=name,
        duplicates=duplicates,
    )
    if kernel is not None:
        return _train_compiled(kernel, graph, settings, workers)
    if workers == 1:
        return train_process(0, 1, graph, settings)
    if graph.device.type != "cpu":
        raise ValueError(f"workers > 1 trains on CPU graphs, got a graph on {graph.device}")
    if not layout(sharing).fused_step:
        raise ValueError(f"workers > 1 supports sharing='batch' or 'walk', got {sharing!r}")
    return train_in_processes(graph, settings, workers)


def _chosen_kernel(graph: Graph, trainer: str) -> Any:
    """The compiled trainer's function when ``trainer`` picks it and it can run, else None;
    raises ValueError for an unknown ``trainer`` or "compiled" where it cannot run."""
    if trainer not in TRAINERS:
        raise ValueError(f"trainer must be one of {TRAINERS}, got {trainer!r}")
    kernel = compiled_trainer() if graph.device.type == "cpu" else None
    if trainer == "compiled" and kernel is None:
        raise ValueError(
            "trainer='compiled' needs a CPU graph and graphemb_kernels built with "
            f"skipgram_train (GRAPHEMB_DISABLE_KERNELS unset); graph on {graph.device}"
        )
    return None if trainer == "torch" else kernel


def _check_sharing(sharing: str) -> None:
    """Raise ValueError unless ``sharing`` is one of :data:`TRAINER_SHARING`."""
    if sharing in SHARING and not layout(sharing).in_trainer:  # "pair"
        raise ValueError(
            f"sharing={sharing!r} is not a trainer option: word2vec's per-pair negatives with its "
            "one-pair-at-a-time updates are the compiled trainer (trainer='compiled', the "
            "default on CPU); the torch trainer takes 'batch', 'walk' or 'position'"
        )
    if sharing not in TRAINER_SHARING:
        raise ValueError(f"sharing must be one of {TRAINER_SHARING}, got {sharing!r}")


def _checked_matmul_dtype(matmul_dtype: Any) -> torch.dtype | str | None:
    """``matmul_dtype`` of :func:`train_node_embeddings` with a dtype's name resolved."""
    if isinstance(matmul_dtype, str) and matmul_dtype != "auto":
        named = getattr(torch, matmul_dtype, None)
        if not (isinstance(named, torch.dtype) and named.is_floating_point):
            raise ValueError(
                f"matmul_dtype must be a floating torch.dtype, None, 'auto' or a dtype's name "
                f"such as 'bfloat16', got {matmul_dtype!r}"
            )
        return named
    if not (
        matmul_dtype is None or matmul_dtype == "auto" or isinstance(matmul_dtype, torch.dtype)
    ):
        raise ValueError(
            f"matmul_dtype must be a torch.dtype, None or 'auto', got {matmul_dtype!r}"
        )
    return matmul_dtype


def _train_compiled(kernel: Any, graph: Graph, settings: Settings, threads: int) -> torch.Tensor:
    """The compiled Hogwild trainer over every chunk of walks (CPU): returns syn0."""
    walks_of = walker(graph, settings)
    noise, keep = noise_and_keep(graph, settings)
    alias = tuple(t.cpu().contiguous() for t in noise.alias_table)
    keep = keep.cpu().contiguous()
    syn0, syn1 = init_tables(graph.num_nodes, settings.dimensions, settings.seed)
    generator = torch.Generator().manual_seed(settings.seed * 1_000_003)
    order_generator = torch.Generator().manual_seed(settings.seed)
    total = settings.epochs * settings.num_walks * graph.num_nodes * settings.passes
    done = 0
    governor = ThreadGovernor(threads, chunk_count(graph, settings) * settings.passes)
    with progress_bar(total, settings.progress) as shown:
        for index, count, starts in chunks(graph, settings, order_generator):
            walks = walks_of(starts, settings.walk_length - 1, generator=generator)
            for repeat in range(settings.passes):  # SGD passes over the same walks
                chunk_threads = governor.threads()
                started = time.perf_counter()
                products = hogwild_pass(
                    kernel,
                    walks,
                    syn0,
                    syn1,
                    keep,
                    alias,  # type: ignore[arg-type]
                    window=settings.window,
                    negatives=settings.negatives,
                    lr=settings.lr,
                    walks_before=done,
                    total_walks=total,
                    hold_walks=held_walks(settings.walk_length),
                    threads=chunk_threads,
                    seed=chunk_seed(settings.seed, index + repeat * count),
                    chunk=f"walk chunk {index + 1} of {count}",
                )
                governor.record(chunk_threads, products, time.perf_counter() - started)
                done += walks.shape[0]
                shown.update(walks.shape[0])
    check_finite(syn0, settings.lr, "by the end of training")
    return syn0
