"""Sparse optimizers for :class:`graphemb.NodeEmbedding`.

All of them update only the rows looked up since the last step, sum the gradients of
duplicate ids (torch's convention; DGL's optimizers average them), and, with a process
group, exchange gradient rows so that the owner of each row applies the global-mean
gradient. See :class:`~graphemb.optim.optimizer.SparseOptimizer` for the exact semantics.

======================  =====================================  ==============================
optimizer               state per row                          matches
======================  =====================================  ==============================
SparseSGD               --                                     torch.optim.SGD
SparseAdagrad           sum (dim)                              torch.optim.Adagrad
SparseRowWiseAdagrad    sum (1)                                FBGEMM row-wise Adagrad
SparseAdam              exp_avg, exp_avg_sq (dim), step (1)    torch.optim.Adam, per-row step
======================  =====================================  ==============================
"""

from . import functional
from .adagrad import SparseAdagrad
from .adam import SparseAdam
from .optimizer import SparseOptimizer
from .rowwise_adagrad import SparseRowWiseAdagrad
from .sgd import SparseSGD

__all__ = [
    "SparseOptimizer",
    "SparseAdam",
    "SparseAdagrad",
    "SparseRowWiseAdagrad",
    "SparseSGD",
    "functional",
]
