"""Skip-gram with negative sampling (SGNS) over random walks: DeepWalk and node2vec.

:func:`train_node_embeddings` is the one entry point: walks drawn chunk by chunk from the
graph (:mod:`~graphemb.skipgram.corpus`), trained by word2vec's algorithm on one of two
backends (:mod:`~graphemb.skipgram.backends`) under one learning-rate schedule
(:mod:`~graphemb.skipgram.rate`) and one guard against diverged rows
(:mod:`~graphemb.skipgram.guard`).

What a run does is one :class:`SkipGramOptions`, the same for every backend; a
:class:`Backend` names who trains: the compiled kernel (word2vec's own per-pair updates in
C++ threads, on CPU graphs) or torch (the same updates in batched rounds, on any device).
What only one backend takes lives in its own options (:class:`CompiledOptions`,
:class:`TorchOptions`). How the backends compare with gensim, in quality and time:
``benchmarks/results/deepwalk_quality.md``.

Example
-------
>>> import torch
>>> from graphemb.graph import Graph
>>> ring = Graph.from_edges(torch.arange(6), (torch.arange(6) + 1) % 6, undirected=True)
>>> rows = train_node_embeddings(ring, SkipGramOptions(dimensions=8, walk_length=5))
>>> rows.shape
torch.Size([6, 8])
"""

from ..sampling.negatives import NegativeSampler
from ..sampling.subsampling import keep_probabilities
from .guard import MAX_ROW_NORM, TrainingDiverged
from .options import Backend, CompiledOptions, SkipGramOptions, TorchOptions
from .rate import FINAL_RATE, HOLD_TOKENS, LearningRate
from .run import train_node_embeddings
from .windows import dynamic_radii, pair_rounds, subsample_walks

__all__ = [
    "FINAL_RATE",
    "HOLD_TOKENS",
    "MAX_ROW_NORM",
    "Backend",
    "CompiledOptions",
    "LearningRate",
    "NegativeSampler",
    "SkipGramOptions",
    "TorchOptions",
    "TrainingDiverged",
    "dynamic_radii",
    "keep_probabilities",
    "pair_rounds",
    "subsample_walks",
    "train_node_embeddings",
]
