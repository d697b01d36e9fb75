"""The compiled backend: word2vec's skip-gram with negative sampling in C++, Hogwild.

The kernel (``SkipGramTrainer`` of :mod:`graphemb._native`, ``csrc/skipgram/``) does what
word2vec.c and gensim's ``sg=1`` do: per walk, frequent nodes subsampled, then for every
position a reduced window drawn in ``1 .. window``, and every context's input row trained
against the position's output row (label 1) and ``negatives`` noise nodes (label 0) from
``frequency ** 0.75`` (drawn from the graph's own neighbour lists where it can:
:mod:`.kernel_inputs`), one pair at a time (past a 32 MiB output table,
each fresh draw serves 10 noise nodes by default: ``CompiledOptions.noise_reuse``). The
output table may be held narrower than float32, with float32 arithmetic
(``CompiledOptions.output_dtype``).
Threads take contiguous shares of a chunk's walks and write the shared tables
without locks; a :class:`~.governor.ThreadGovernor` trains a chunk on one thread while that
is faster.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

import torch

from ..._allocator import release_free_heap
from ..corpus import Chunk, Corpus
from ..guard import diverged
from ..options import CompiledOptions, SkipGramOptions
from ..rate import FINAL_RATE, LearningRate
from .base import initial_tables
from .governor import ThreadGovernor
from .kernel_inputs import kernel_inputs

__all__ = ["CompiledBackend", "chunk_seed"]

_MASK64 = (1 << 64) - 1


def chunk_seed(seed: int, chunk: int) -> int:
    """The 64-bit seed of walk chunk ``chunk`` of a run seeded ``seed`` (the kernel's thread
    ``i`` mixes in ``i`` itself)."""
    return ((seed & 0xFFFFFFFF) << 32 ^ chunk) & _MASK64


class CompiledBackend:
    """word2vec's Hogwild trainer on ``workers`` threads (see the module's docstring).

    With one worker the rows depend only on the seed.
    """

    name = "compiled"

    def __init__(
        self,
        kernel: Any,
        corpus: Corpus,
        options: SkipGramOptions,
        compiled_options: CompiledOptions,
        *,
        workers: int,
        chunks: int,
    ) -> None:
        self._kernel = kernel
        self._options = options
        compiled_options = compiled_options.for_table(corpus.num_nodes, options.dimensions)
        self._vector_width = compiled_options.vector_width
        self._sharing = compiled_options.sharing
        self._noise_reuse = compiled_options.noise_reuse
        self._noise_pool = compiled_options.noise_pool(options.dimensions)
        # before the tables, so that its temporaries are freed
        self._inputs = kernel_inputs(corpus, pooled=self._noise_pool > 0)
        # and their pages, and those freed before the run (the graph's reading), given back
        # for the whole run: it holds the tables and a chunk of walks beside the graph
        release_free_heap()
        self._syn0, self._syn1 = initial_tables(
            corpus.num_nodes, options.dimensions, options.seed, compiled_options.output_dtype
        )
        self._governor = ThreadGovernor(workers, chunks)
        self._prepared: tuple[LearningRate, Any] | None = None  # the kernel for a rate

    def __enter__(self) -> CompiledBackend:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    def train_chunk(self, chunk: Chunk, repeat: int, walks_before: int, rate: LearningRate) -> None:
        """One pass of the kernel over the chunk's walks."""
        train = self._trainer(rate)
        threads = self._governor.threads()
        started = time.perf_counter()
        nonfinite, products = train(
            chunk.walks.contiguous(), walks_before, threads,
            chunk_seed(self._options.seed, chunk.index + repeat * chunk.count),
        )  # fmt: skip
        self._governor.record(threads, products, time.perf_counter() - started)
        if nonfinite:
            raise diverged(
                f"in {chunk.name}",
                f"{nonfinite} of {products} scores were not finite at a learning rate of "
                f"{rate.at(walks_before):.4g}",
                rate.lr,
            )

    def _trainer(self, rate: LearningRate) -> Any:
        """The kernel prepared for the tables and ``rate`` (once per run: a run's chunks
        share their rate's schedule)."""
        if self._prepared is None or self._prepared[0] is not rate:
            options, inputs = self._options, self._inputs
            kernel = self._kernel(
                self._syn0, self._syn1, inputs.counts, inputs.noise, options.window,
                options.negatives, rate.lr, FINAL_RATE, rate.total_walks, rate.hold_walks,
                vector_width=self._vector_width, subsample_threshold=inputs.subsample_threshold,
                sharing=self._sharing, noise_pool=self._noise_pool, noise_reuse=self._noise_reuse,
            )  # fmt: skip
            self._prepared = (rate, kernel)
        return self._prepared[1]

    def input_rows(self) -> torch.Tensor:
        return self._syn0
