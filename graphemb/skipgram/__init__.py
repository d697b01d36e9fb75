"""Skip-gram with negative sampling (SGNS) over random walks: DeepWalk and node2vec.

The pieces, each usable alone, from the bottom up:

* :mod:`~graphemb.skipgram.windows` -- which walk positions pair up: every
  ``(center, context)`` pair at most ``window`` steps apart (:func:`context_pairs`,
  :data:`~graphemb.sampling.walks.PAD` skipped), word2vec's dynamic window
  (:func:`dynamic_radii`) and its subsampling of frequent nodes
  (:func:`keep_probabilities`, :func:`subsample_walks`);
* :class:`NegativeSampler` (:mod:`graphemb.sampling.negatives`) -- noise nodes drawn with
  probability proportional to ``degree ** 0.75``;
* :mod:`~graphemb.skipgram.sharing` -- how the centers of a batch share their noise nodes,
  one object per layout: ``"pair"`` (word2vec's ``K`` per pair), ``"batch"`` (one block
  per walk, each center scored against another walk's block, :func:`diagonal_blocks`),
  ``"walk"`` (a walk's own block), ``"position"`` (``K`` per center);
* :class:`SkipGram` (:mod:`~graphemb.skipgram.model`) -- a ``center`` and a ``context``
  :class:`~graphemb.NodeEmbedding` and the loss

  .. math::

      \\mathcal{L} = -\\frac{1}{P} \\sum_{(c, o)} \\Big[\\log\\sigma(u_c \\cdot v_o)
      + \\sum_{k=1}^{K} \\log\\sigma(-u_c \\cdot v_{n_k})\\Big]

  over the ``P`` positive pairs of a batch of walks; any :mod:`graphemb.optim` optimizer
  trains the tables, in one process or on N ranks (shared memory or partitioned);
* :mod:`~graphemb.skipgram.step` -- word2vec's SGD step written straight into the tables
  (:meth:`SkipGram.sgd_step`: no autograd, no optimizer, products optionally in bfloat16);
* :func:`train_node_embeddings` (:mod:`~graphemb.skipgram.trainer`) -- the whole DeepWalk /
  node2vec pipeline. On CPU it runs word2vec's own algorithm compiled
  (:mod:`~graphemb.skipgram.compiled`: sequential per-pair updates in lock-free threads,
  one thread for a chunk of walks while :mod:`~graphemb.skipgram.governor` measures one
  faster); elsewhere the torch trainer: walks drawn chunk by chunk, batched steps
  (:func:`train_step`) at a learning rate decaying linearly over the run
  (:func:`learning_rate`), optionally in several processes writing into shared-memory
  tables (:mod:`~graphemb.skipgram.workers`).

How the layouts and defaults compare in quality and speed is measured in the README's
skip-gram section and ``benchmarks/results/``.

Example
-------
>>> import torch
>>> from graphemb.graph import Graph
>>> from graphemb.optim import SparseAdam
>>> from graphemb.sampling.walks import RandomWalker
>>> from graphemb.skipgram import NegativeSampler, SkipGram
>>> ring = Graph.from_edges(torch.arange(6), (torch.arange(6) + 1) % 6)
>>> walker, sampler = RandomWalker(ring), NegativeSampler.from_graph(ring)
>>> model = SkipGram(ring.num_nodes, 8, window=2, name="doc-ring")
>>> opt = SparseAdam(model.embeddings, lr=0.05)
>>> walks = walker(torch.arange(6), walk_length=5)                  # (6, 6)
>>> loss = model(walks, sampler((6, 6, 4, 3)))    # 3 negatives per pair, 4 offsets
>>> loss.backward()
>>> opt.step()
>>> model.num_pairs(walks, window=2)                                 # 6 walks x 18 pairs
108
"""

from ..sampling.negatives import NegativeSampler
from .compiled import TrainingDiverged, learning_rate
from .model import SkipGram
from .schedule import train_step
from .sharing import SHARING, TRAINER_SHARING, Sharing
from .step import check_duplicates, fast_matmul_dtype
from .trainer import COMPILED_LR, TORCH_LR, TRAINERS, train_node_embeddings
from .windows import (
    context_pairs,
    diagonal_blocks,
    dynamic_radii,
    keep_probabilities,
    pair_offsets,
    subsample_walks,
)

__all__ = [
    "COMPILED_LR",
    "SHARING",
    "TORCH_LR",
    "TRAINERS",
    "TRAINER_SHARING",
    "NegativeSampler",
    "Sharing",
    "SkipGram",
    "TrainingDiverged",
    "check_duplicates",
    "context_pairs",
    "diagonal_blocks",
    "dynamic_radii",
    "fast_matmul_dtype",
    "keep_probabilities",
    "learning_rate",
    "pair_offsets",
    "subsample_walks",
    "train_node_embeddings",
    "train_step",
]
