"""graphemb: learnable node embeddings for graph neural networks.

* :class:`NodeEmbedding` -- a large learnable table, one row per node, updated sparsely;
  in one process, in shared memory across the processes of a machine, or partitioned
  across ranks.
* :mod:`graphemb.optim` -- sparse Adam, Adagrad, row-wise Adagrad and SGD.
* :func:`save` / :func:`load` -- checkpoints that move between world sizes, partitions and
  devices.
* :class:`Partition` -- which rank owns which row.
* :class:`Graph` and :mod:`graphemb.sampling` -- graphs, neighbour sampling into blocks,
  seed loaders and random walks, in pure torch on CPU and CUDA.
* :mod:`graphemb.nn` -- GNN models on PyG layers whose input is a ``NodeEmbedding``;
  :mod:`graphemb.skipgram` -- DeepWalk / node2vec training.

Importing graphemb imports neither PyG nor DGL: PyG models live in :mod:`graphemb.nn`,
DGL adapters in :mod:`graphemb.dgl`.
"""

from . import optim
from .checkpoint import load, save
from .distributed import CoordinationError
from .embedding import NodeEmbedding
from .graph import Graph
from .storage import Partition

__version__ = "0.1.0"

__all__ = [
    "NodeEmbedding",
    "Graph",
    "Partition",
    "CoordinationError",
    "save",
    "load",
    "optim",
    "__version__",
]
