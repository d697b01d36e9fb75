"""graphemb: learnable node embeddings for graph neural networks.

* :class:`NodeEmbedding` -- a large learnable table, one row per node, updated sparsely;
  in one process, in shared memory across the processes of a machine, or partitioned
  across ranks.
* :mod:`graphemb.optim` -- sparse Adam, Adagrad, row-wise Adagrad and SGD.
* :class:`Partition` -- which rank owns which row.

Importing graphemb never imports DGL; the DGL adapters live in :mod:`graphemb.nn`.
"""

from .coordination import CoordinationError
from .embedding import NodeEmbedding
from .partition import Partition

__version__ = "0.1.0"

__all__ = ["NodeEmbedding", "Partition", "CoordinationError", "optim", "__version__"]


def __getattr__(name):
    # `graphemb.optim` without an explicit import, like `torch.optim`.
    if name == "optim":
        import importlib

        return importlib.import_module(".optim", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
