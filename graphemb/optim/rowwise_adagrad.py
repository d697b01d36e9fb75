"""Sparse row-wise Adagrad: one accumulator per row (FBGEMM, PyTorch-BigGraph)."""

from __future__ import annotations

from .adagrad import SparseAdagrad

__all__ = ["SparseRowWiseAdagrad"]


class SparseRowWiseAdagrad(SparseAdagrad):
    """Adagrad with one accumulator per row, the mean of ``g*g`` over the row:
    ``s += mean(g*g)``; ``w -= lr * g / (sqrt(s) + eps)``.

    The state is ``dim`` times smaller than Adagrad's (shape ``(num_embeddings,)``), the
    usual choice for very large tables (FBGEMM's ``EXACT_ROWWISE_ADAGRAD``,
    PyTorch-BigGraph).

    Parameters
    ----------
    params, lr, eps
        As in :class:`~graphemb.optim.SparseAdagrad`.

    Examples
    --------
    One step on row 4 with the gradient ``(3, 4)``: both elements share the accumulator
    ``s = (9 + 16) / 2``.

    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.optim import SparseRowWiseAdagrad
    >>> emb = NodeEmbedding(10, 2, "rowwise-demo")
    >>> opt = SparseRowWiseAdagrad([emb], lr=0.1)
    >>> (emb(torch.tensor([4])) * torch.tensor([3.0, 4.0])).sum().backward()
    >>> opt.step()                    # s = (9 + 16) / 2 = 12.5
    >>> emb.weight[4]                 # -0.1 * g / sqrt(12.5)
    tensor([-0.0849, -0.1131])
    >>> opt.state[emb]["sum"].shape   # one accumulator per row
    torch.Size([10])
    """

    formula = "rowwise_adagrad"
