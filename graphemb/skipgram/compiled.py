"""The compiled Hogwild skip-gram trainer (``graphemb_kernels.skipgram_train``) and
:class:`TrainingDiverged`.

``graphemb_kernels.skipgram_train`` does what word2vec's skip-gram with negative sampling
does (word2vec.c, gensim's ``sg=1``): per walk, frequent nodes subsampled, then for every
position a reduced window drawn uniformly in ``1 .. window``, and every context's input
row (``syn0``) trained at once against the position's output row (``syn1``, label 1) and
``K`` noise nodes (label 0) from the unigram ** 0.75 alias table, the input row's change
accumulated and added after its ``K + 1`` targets. Threads take contiguous shares of the
walks and write the shared float32 tables without locks. The learning rate decays
linearly with the walks done over the whole run, held for each block of
:data:`HOLD_TOKENS` tokens as word2vec holds it (:func:`hogwild_pass` is called chunk by
chunk with the count of walks before it). See ``csrc/graphemb_kernels/skipgram.cpp``.

:func:`graphemb.skipgram.train_node_embeddings` uses it on CPU graphs when the module is
built and ``GRAPHEMB_DISABLE_KERNELS`` is not set.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .._compiled import compiled_module, disabled

__all__ = [
    "FINAL_RATE",
    "HOLD_TOKENS",
    "INIT_RANGE",
    "TrainingDiverged",
    "chunk_seed",
    "compiled_trainer",
    "hogwild_pass",
    "held_walks",
    "init_tables",
    "learning_rate",
]

_MASK64 = (1 << 64) - 1

#: Input rows start uniform in ``[-INIT_RANGE / D, INIT_RANGE / D)`` (:func:`init_tables`).
INIT_RANGE = 1.0

#: The last learning rate of a run as a share of the first: gensim's (``alpha`` 0.025 down to
#: ``min_alpha`` 0.0001). word2vec.c ends at ``lr * 1e-4``: 0.4 % less learning over a run,
#: to which a small dense graph's result is sensitive (``benchmarks/results/deepwalk_quality.md``).
FINAL_RATE = 1.0 / 250.0

#: Tokens for which the compiled trainer holds its learning rate (:func:`held_walks`).
HOLD_TOKENS = 10_000


class TrainingDiverged(ValueError):
    """Training produced a non-finite score or embedding row (the learning rate is too
    high for the graph, or the initial rows too large): the run stops rather than return
    or write NaN."""


def compiled_trainer() -> Any:
    """``graphemb_kernels.skipgram_train`` when the module has it and
    ``GRAPHEMB_DISABLE_KERNELS`` is not set, else None."""
    module = compiled_module()
    if module is None or disabled():
        return None
    return getattr(module, "skipgram_train", None)


def learning_rate(lr: float, done: int, total: int, hold: int = 1) -> float:
    """The rate after ``done`` of ``total`` walks, decaying linearly from ``lr`` to
    ``lr * FINAL_RATE`` and held for blocks of ``hold`` walks:
    ``lr * max(1 - (1 - FINAL_RATE) * p, FINAL_RATE)``, ``p = (done // hold) * hold / total``.

    ``hold=1`` lowers the rate every walk (the torch trainer calls it once per step of
    walks, which holds it for the step); the compiled trainer holds it for
    :func:`held_walks` walks, as word2vec does for 10,000 tokens.
    """
    progress = (done // hold) * hold / total
    return lr * max(1.0 - (1.0 - FINAL_RATE) * progress, FINAL_RATE)


def held_walks(walk_length: int) -> int:
    """Walks of ``walk_length`` tokens for which the compiled trainer holds its rate:
    ``max(1, HOLD_TOKENS // walk_length)``.

    word2vec.c recomputes the rate every 10,000 words a thread trains and gensim once per
    job of ``batch_words=10000`` words. Holding it instead of lowering it after every walk
    is part of word2vec's algorithm, not a detail: over a run the held rate is higher by
    up to one block's decay, about 1 % more learning, to which a small dense graph's
    result is sensitive.
    """
    if walk_length < 1:
        raise ValueError(f"walk_length must be >= 1, got {walk_length}")
    return max(1, HOLD_TOKENS // walk_length)


def chunk_seed(seed: int, chunk: int) -> int:
    """The 64-bit seed the kernel gets for walk chunk ``chunk`` of a run seeded ``seed``
    (thread ``i`` of the call mixes in ``i`` itself)."""
    return ((seed & 0xFFFFFFFF) << 32 ^ chunk) & _MASK64


def init_tables(num_nodes: int, dimensions: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The initial tables: input rows uniform in ``[-INIT_RANGE / D, INIT_RANGE / D)``,
    output rows zero.

    gensim's start (word2vec.c draws from ``±0.5 / D``). Both tables start near the saddle
    point at zero, where every row scores every other alike; training first breaks that
    symmetry. The range sets how soon: larger rows leave the saddle sooner but end further
    from the optimum on strongly clustered graphs. With word2vec's own update and rate
    schedule this is gensim's algorithm from gensim's start (the two are compared in
    ``benchmarks/results/deepwalk_quality.md``).

    Returns
    -------
    syn0, syn1 : Tensor of float32, shape (N, D)
    """
    generator = torch.Generator().manual_seed(seed)
    syn0 = torch.rand(num_nodes, dimensions, generator=generator).sub_(0.5)
    syn0.mul_(2 * INIT_RANGE / dimensions)
    return syn0, torch.zeros(num_nodes, dimensions)


def hogwild_pass(
    kernel: Any,
    walks: torch.Tensor,
    syn0: torch.Tensor,
    syn1: torch.Tensor,
    keep: torch.Tensor,
    alias: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    *,
    window: int,
    negatives: int,
    lr: float,
    walks_before: int,
    total_walks: int,
    hold_walks: int,
    threads: int,
    seed: int,
    chunk: str = "",
    vector_width: int = 0,
) -> int:
    """Train ``syn0`` and ``syn1`` in place on one chunk of walks.

    Parameters
    ----------
    kernel : callable
        :func:`compiled_trainer`'s function.
    walks : Tensor of int64, shape (W, T)
        Node ids, :data:`graphemb.sampling.walks.PAD` after a walk's end.
    syn0, syn1 : Tensor of float32, shape (N, D)
        Input and output rows, contiguous, on CPU.
    keep : Tensor of float64, shape (N,)
        Subsampling keep probabilities (:func:`graphemb.skipgram.keep_probabilities`).
    alias : (nodes, keep, alias_nodes)
        The noise distribution's alias table
        (:attr:`graphemb.skipgram.NegativeSampler.alias_table`).
    window, negatives : int
        Largest context distance, noise nodes per (context, node) pair.
    lr : float
        Initial learning rate of the whole run.
    walks_before, total_walks : int
        Walks trained before this chunk, and in the whole run (the rate's decay).
    hold_walks : int
        The rate is held for blocks of this many walks of the run (:func:`held_walks`
        of the walk length; 1 lowers it every walk).
    threads : int
        Hogwild threads.
    seed : int
        The chunk's seed (:func:`chunk_seed`).
    chunk : str
        How error messages name this chunk (e.g. "walk chunk 3 of 12").
    vector_width : {0, 4, 8}
        Floats per vector operation of the kernel's loop: 0 the widest this CPU runs (8
        with AVX2 and FMA), 4 or 8 that one (both loops give word2vec's result; the choice
        is for tests).

    Returns
    -------
    int
        The (context, target) products computed.

    Raises
    ------
    TrainingDiverged
        A score came out non-finite (the rows then hold inf or NaN).
    """
    nodes, coins, aliases = alias
    nonfinite, products = kernel(
        walks.contiguous(),
        syn0,
        syn1,
        keep,
        nodes,
        coins,
        aliases,
        window,
        negatives,
        float(lr),
        FINAL_RATE,
        walks_before,
        total_walks,
        hold_walks,
        threads,
        seed & _MASK64,
        vector_width,
    )
    if nonfinite:
        rate = learning_rate(lr, walks_before, total_walks, hold_walks)
        raise TrainingDiverged(
            f"skip-gram training diverged in {chunk or 'a walk chunk'}: {nonfinite} of "
            f"{products} scores were not finite at a learning rate of {rate:.4g} (initial lr "
            f"{lr:g}); lower lr"
        )
    return int(products)


def check_finite(rows: torch.Tensor, lr: float, where: str) -> None:
    """Raise :class:`TrainingDiverged` when ``rows`` holds inf or NaN.

    Checked a block of rows at a time: ``torch.isfinite`` of a whole table makes
    temporaries of the table's size (float and bool), which would be the run's peak.
    """
    blocks = rows.reshape(rows.shape[0], -1).split(_CHECK_ROWS) if rows.dim() else (rows,)
    for index, block in enumerate(blocks):
        finite = torch.isfinite(block)
        if bool(finite.all()):
            continue
        bad = (
            int((~finite).any(dim=-1).nonzero()[0]) + index * _CHECK_ROWS if rows.dim() > 1 else -1
        )
        raise TrainingDiverged(
            f"skip-gram training diverged {where}: embedding row {bad} is not finite "
            f"(initial lr {lr:g}); lower lr"
        )


#: Rows :func:`check_finite` tests at a time (8 MiB of float32 rows of 128).
_CHECK_ROWS = 1 << 14


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
