"""Sparse SGD."""

from __future__ import annotations

from collections.abc import Iterable

from ..embedding import NodeEmbedding
from .optimizer import SparseOptimizer

__all__ = ["SparseSGD"]


class SparseSGD(SparseOptimizer):
    """Plain SGD on the rows that were looked up: ``w -= lr * g``.

    Parameters
    ----------
    params : list of NodeEmbedding, or list of param-group dicts
    lr : float
        Learning rate, >= 0.

    Examples
    --------
    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.optim import SparseSGD
    >>> emb = NodeEmbedding(10, 4, "sgd-demo", init_func=lambda t: t.fill_(1.0))
    >>> opt = SparseSGD([emb], lr=0.5)
    >>> emb(torch.tensor([3, 3])).sum().backward()   # duplicate ids: gradients add up
    >>> opt.step()
    >>> emb.weight[3]
    tensor([0., 0., 0., 0.])
    """

    formula = "sgd"

    def __init__(self, params: Iterable[NodeEmbedding] | Iterable[dict], lr: float) -> None:
        super().__init__(params, {"lr": lr})
