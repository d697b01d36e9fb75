"""Sparse Adagrad, with torch's formula."""

from __future__ import annotations

from collections.abc import Iterable

from ..embedding import NodeEmbedding
from .optimizer import SparseOptimizer

__all__ = ["SparseAdagrad"]


class SparseAdagrad(SparseOptimizer):
    """Adagrad on the rows that were looked up, as :class:`torch.optim.Adagrad`:
    ``s += g*g``; ``w -= lr * g / (sqrt(s) + eps)``.

    State: ``sum``, one accumulator per element, shape ``(num_embeddings, dim)``.

    Parameters
    ----------
    params : list of NodeEmbedding, or list of param-group dicts
    lr : float
        Learning rate, >= 0.
    eps : float
        Added to the denominator, >= 0.

    Examples
    --------
    Two steps with the same gradient: the first moves each element by ``-lr * sign(g)``,
    the second by ``1 / sqrt(2)`` of that, as the squared gradients accumulate.

    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.optim import SparseAdagrad
    >>> emb = NodeEmbedding(10, 4, "adagrad-demo")
    >>> opt = SparseAdagrad([emb], lr=0.1)
    >>> for _ in range(2):
    ...     emb(torch.tensor([1, 2])).sum().backward()
    ...     opt.step()
    >>> emb.weight[1]   # -0.1 - 0.1 / sqrt(2)
    tensor([-0.1707, -0.1707, -0.1707, -0.1707])
    """

    formula = "adagrad"

    def __init__(
        self, params: Iterable[NodeEmbedding] | Iterable[dict], lr: float, eps: float = 1e-10
    ) -> None:
        super().__init__(params, {"lr": lr, "eps": eps})
