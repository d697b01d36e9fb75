"""Sparse Adam with a step count per row ("lazy" Adam)."""

from __future__ import annotations

from collections.abc import Iterable

from ..embedding import NodeEmbedding
from .optimizer import SparseOptimizer

__all__ = ["SparseAdam"]


class SparseAdam(SparseOptimizer):
    """Adam on the rows that were looked up, with a step count per row.

    Rows absent from a step keep their moments and their step count, and a row updated for
    the t-th time gets the bias correction of step t. When every row is hit at every step
    this is exactly :class:`torch.optim.Adam`.

    State per row: ``exp_avg`` and ``exp_avg_sq`` (shape ``(num_embeddings, dim)``) and
    ``step`` (int64, shape ``(num_embeddings,)``).

    Parameters
    ----------
    params, lr, eps
        As in :class:`~graphemb.optim.SparseAdagrad`.
    betas : (float, float)
        Decay rates of the moments, each in [0, 1).

    Examples
    --------
    Rows 6 and 7 looked up at the first step, row 7 alone at the second: with a constant
    gradient each bias-corrected step moves a row by ``-lr * sign(g)``, so row 7 has moved
    twice as far, and row 5, never looked up, has not counted a step.

    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.optim import SparseAdam
    >>> emb = NodeEmbedding(10, 3, "adam-demo")
    >>> opt = SparseAdam([emb], lr=0.01)
    >>> for ids in ([6, 7], [7]):
    ...     emb(torch.tensor(ids)).sum().backward()
    ...     opt.step()
    >>> emb.weight[[6, 7]]
    tensor([[-0.0100, -0.0100, -0.0100],
            [-0.0200, -0.0200, -0.0200]])
    >>> opt.state[emb]["step"][[5, 6, 7]]
    tensor([0, 1, 2])
    """

    formula = "adam"

    def __init__(
        self,
        params: Iterable[NodeEmbedding] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})
