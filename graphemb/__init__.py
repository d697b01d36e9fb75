"""graphemb: learnable node embeddings for graph neural networks.

* :class:`NodeEmbedding` -- a large learnable table, one row per node, updated sparsely;
  in one process, in shared memory across the processes of a machine, or partitioned
  across ranks.
* :mod:`graphemb.optim` -- sparse Adam, Adagrad, row-wise Adagrad and SGD.
* :func:`save` / :func:`load` -- checkpoints that move between world sizes, partitions and
  devices.
* :class:`Partition` -- which rank owns which row.

Importing graphemb never imports DGL; the DGL adapters live in :mod:`graphemb.nn`.
"""

from . import optim
from .checkpoint import load, save
from .coordination import CoordinationError
from .embedding import NodeEmbedding
from .partition import Partition

__version__ = "0.1.0"

__all__ = [
    "NodeEmbedding",
    "Partition",
    "CoordinationError",
    "save",
    "load",
    "optim",
    "__version__",
]
