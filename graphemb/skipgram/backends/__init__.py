"""The backends that train a skip-gram run, behind one interface (:class:`SkipGramBackend`),
and the choice between them (:func:`create_backend`).

* :class:`~.compiled.CompiledBackend` -- word2vec's own algorithm in C++: one (context,
  node) pair at a time, in lock-free threads, on CPU graphs.
* :class:`~.batched.TorchBackend` -- the same updates in batched torch operations, in rounds
  in which no row is updated twice; any device (CUDA, and CPUs without the compiled
  kernels).

Both start from the same rows (:func:`initial_tables`), follow the same learning rate
(:class:`~graphemb.skipgram.rate.LearningRate`) and report divergence the same way
(:class:`~graphemb.skipgram.guard.TrainingDiverged`); the run loop
(:func:`graphemb.skipgram.train_node_embeddings`) drives either chunk by chunk.
"""

from __future__ import annotations

from ..._compiled import compiled_module, warn_if_kernels_missing
from ..corpus import Corpus
from ..options import Backend, CompiledOptions, SkipGramOptions, TorchOptions
from .base import INIT_RANGE, SkipGramBackend, compiled_kernel, initial_tables

__all__ = ["INIT_RANGE", "SkipGramBackend", "compiled_kernel", "create_backend", "initial_tables"]


def create_backend(
    choice: Backend,
    corpus: Corpus,
    options: SkipGramOptions,
    *,
    workers: int,
    chunks: int,
    world_size: int = 1,
    compiled_options: CompiledOptions | None = None,
    torch_options: TorchOptions | None = None,
) -> SkipGramBackend:
    """The backend ``choice`` names for the run on ``corpus`` (``AUTO``: compiled on a CPU
    graph where the kernels load, else torch; warns once when they are missing).

    Parameters
    ----------
    workers : int
        CPU threads that train (compiled: lock-free threads; torch: torch's threads).
    chunks : int
        Chunks of walks the run trains, passes included (the compiled backend's thread
        governor plans with it).
    world_size : int
        Ranks of the process group that trains together (more than 1: the torch backend
        on :class:`~graphemb.NodeEmbedding` tables; the compiled backend trains in one
        process).
    """
    on_cpu = corpus.device.type == "cpu"
    if world_size > 1:
        if choice is Backend.COMPILED:
            raise ValueError(
                "backend='compiled' trains in one process; with a process group of "
                f"{world_size} ranks use backend='torch' (or 'auto')"
            )
        from .batched import TorchBackend
        from .rows import EmbeddingRows

        shared = EmbeddingRows(corpus.num_nodes, options.dimensions, options.seed, corpus.device)
        torch_checked = (torch_options or TorchOptions()).checked()
        return TorchBackend(corpus, options, torch_checked, workers, shared)
    kernel = compiled_kernel() if on_cpu else None
    if choice is Backend.COMPILED and kernel is None:
        raise ValueError(
            "backend='compiled' needs a CPU graph and graphemb's compiled kernels "
            f"(GRAPHEMB_DISABLE_KERNELS unset); the graph is on {corpus.device}, "
            f"kernels {'loaded' if compiled_module() is not None else 'missing'}"
        )
    if choice is Backend.AUTO and on_cpu:
        warn_if_kernels_missing()
    if kernel is not None and choice is not Backend.TORCH:
        from .compiled import CompiledBackend

        return CompiledBackend(
            kernel, corpus, options, (compiled_options or CompiledOptions()).checked(),
            workers=workers, chunks=chunks,
        )  # fmt: skip
    from .batched import TorchBackend
    from .rows import LocalRows

    rows = LocalRows.initial(corpus.num_nodes, options.dimensions, options.seed, corpus.device)
    return TorchBackend(corpus, options, (torch_options or TorchOptions()).checked(), workers, rows)
