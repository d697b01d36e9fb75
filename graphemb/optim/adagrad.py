"""Sparse Adagrad, with torch's formula."""

from __future__ import annotations

from collections.abc import Iterable

from ..embedding import NodeEmbedding
from . import functional as F
from . import kernels
from .optimizer import SparseOptimizer, check_number

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
    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.optim import SparseAdagrad
    >>> emb = NodeEmbedding(10, 4, "adagrad-demo")
    >>> opt = SparseAdagrad([emb], lr=0.1)
    >>> emb(torch.tensor([1, 2])).sum().backward()
    >>> opt.step()
    >>> emb.weight[1]   # first step moves each element by -lr * sign(g)
    tensor([-0.1000, -0.1000, -0.1000, -0.1000])
    """

    def __init__(
        self, params: Iterable[NodeEmbedding] | Iterable[dict], lr: float, eps: float = 1e-10
    ) -> None:
        super().__init__(params, {"lr": lr, "eps": eps})

    def _check_group(self, group):
        check_number("learning rate (lr)", group["lr"], 0.0)
        check_number("epsilon (eps)", group["eps"], 0.0)

    def _state_layout(self, embedding):
        return {"sum": ((embedding.embedding_dim,), embedding._compute_dtype)}

    def _update_rows(self, weight, grad, state, group, scratch):
        F.adagrad_rows_(
            weight, grad, state["sum"], lr=float(group["lr"]), eps=float(group["eps"]),
            scratch=scratch,
        )

    def _fused_update(self, embedding, index, order, grads, divisor, group):
        kernels.module().adagrad_(
            embedding.weight, self.state[embedding]["sum"], index, order, grads, divisor,
            float(group["lr"]), float(group["eps"]),
        )
