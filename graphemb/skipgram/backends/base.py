"""What every skip-gram backend shares: the interface the run loop drives
(:class:`SkipGramBackend`), the rows they start from (:func:`initial_tables`), and where the
compiled kernel comes from (:func:`compiled_kernel`)."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Protocol

import torch

from ..._compiled import compiled_module, disabled
from ..._native.skipgram import float24_width
from ..corpus import Chunk
from ..rate import LearningRate

__all__ = ["INIT_RANGE", "SkipGramBackend", "compiled_kernel", "initial_tables"]

INIT_RANGE = 1.0
"""Input rows start uniform in ``[-INIT_RANGE / D, INIT_RANGE / D)`` (:func:`initial_tables`)."""


class SkipGramBackend(Protocol):
    """Trains the input rows (``syn0``) and output rows (``syn1``) of a run, chunk by chunk.

    Used as a context manager around the run (a backend may change process settings for
    its duration, such as torch's thread count).
    """

    name: str

    def __enter__(self) -> SkipGramBackend: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...

    def train_chunk(self, chunk: Chunk, repeat: int, walks_before: int, rate: LearningRate) -> None:
        """Train on ``chunk``'s walks (its ``repeat``-th pass), ``walks_before`` walks of
        the run done before it; raise ``TrainingDiverged`` on a non-finite score."""
        ...

    def input_rows(self) -> torch.Tensor:
        """The input rows (N, D) float32: the embeddings."""
        ...


def initial_tables(
    num_nodes: int, dimensions: int, seed: int, output_dtype: str = "float32"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows every backend starts from: input rows uniform in
    ``[-INIT_RANGE / D, INIT_RANGE / D)``, output rows zero (gensim's start).

    Both tables start near the saddle point at zero, where every row scores every other
    alike; training first breaks that symmetry.

    Returns
    -------
    syn0 : Tensor of float32, shape (N, D), on the CPU
    syn1 : Tensor, on the CPU
        In ``output_dtype`` (:attr:`~graphemb.skipgram.CompiledOptions.output_dtype`):
        float32 or bfloat16 of shape (N, D), or float24 as the kernel packs it, uint8 of
        shape (N, ``float24_width(D)``).
    """
    generator = torch.Generator().manual_seed(seed)
    syn0 = torch.rand(num_nodes, dimensions, generator=generator).sub_(0.5)
    syn0.mul_(2 * INIT_RANGE / dimensions)
    if output_dtype == "float24":
        return syn0, torch.zeros(num_nodes, float24_width(dimensions), dtype=torch.uint8)
    return syn0, torch.zeros(num_nodes, dimensions, dtype=getattr(torch, output_dtype))


def compiled_kernel() -> Any:
    """The compiled trainer (``SkipGramTrainer`` of :mod:`graphemb._native`, prepared once
    per run) when the kernels loaded and ``GRAPHEMB_DISABLE_KERNELS`` is not set, else
    None."""
    module = compiled_module()
    if module is None or disabled():
        return None
    return getattr(module, "SkipGramTrainer", None)
