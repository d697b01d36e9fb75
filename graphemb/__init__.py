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

Importing graphemb before the first tensor is created turns on huge pages under torch's
large CPU allocations (``THP_MEM_ALLOC_ENABLE=1``, see :mod:`graphemb._allocator`) unless
the variable is set already.
"""

from ._allocator import default_huge_page_allocations

default_huge_page_allocations()  # before anything below imports torch

from . import optim  # noqa: E402
from .checkpoint import load, save  # noqa: E402
from .distributed import CoordinationError  # noqa: E402
from .embedding import NodeEmbedding  # noqa: E402
from .graph import Graph  # noqa: E402
from .storage import Partition  # noqa: E402

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
