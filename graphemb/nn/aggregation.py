"""Mean and sum aggregation over a block's edges: one fused CSR product forward and one
backward, and the destination nodes' own rows without a full-size zero gradient."""

from __future__ import annotations

from typing import Any

import torch

from .._compiled import float_kernel
from ..sampling.block import Block

__all__ = ["aggregate_neighbors"]

# The row-parallel CSR x dense kernel behind torch.sparse.mm(csr, x, reduce) on CPU (torch
# >= 2.0), the one PyG's SAGEConv runs on adj_t. CUDA takes torch's cuSPARSE product.
_cpu_spmm = getattr(torch.ops.aten, "_sparse_mm_reduce_impl", None)


def _spmm(
    matrix: torch.Tensor, dense: torch.Tensor, reduce: str, unit_values: bool = False
) -> torch.Tensor:
    """``matrix @ dense`` for a CSR ``matrix``; ``reduce="mean"`` divides every row by its
    number of entries (rows without entries give 0), as ``torch.sparse.mm`` does.
    ``unit_values``: every value of ``matrix`` is 1 (not read then)."""
    kernel = float_kernel("csr_aggregate", dense)
    if kernel is not None:  # prefetches the scattered rows of dense (csrc/.../aggregate.cpp)
        values = None if unit_values else matrix.values().to(dense.dtype).contiguous()
        return kernel(
            matrix.crow_indices().contiguous(),
            matrix.col_indices().contiguous(),
            values,
            dense.contiguous(),
            reduce == "mean",
        )
    if dense.device.type == "cpu" and _cpu_spmm is not None:
        return _cpu_spmm(matrix, dense, reduce)[0]
    out = torch.sparse.mm(matrix, dense)
    if reduce == "mean":
        counts = matrix.crow_indices().diff().clamp_(min=1).unsqueeze(1)
        out = out / counts.to(out.dtype)
    return out


class _BlockAggregation(torch.autograd.Function):
    """``(A h, h[:D])`` with ``A`` the block's (D, S) aggregation matrix.

    Forward is one CSR product on ``adj_t`` (on CPU graphemb's compiled kernel where it is
    built, else the one PyG's ``SAGEConv`` runs); backward is one CSR product with the transpose,
    which the block builds once, instead of autograd transposing (sorting) the matrix.
    The gradient of ``h[:D]`` is added into the first rows of that product in place,
    instead of slicing's zero-filled full-size gradient and a sum.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        h: torch.Tensor,
        adj_t: torch.Tensor,
        transpose: torch.Tensor,
        num_dst: int,
        reduce: str,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ctx.transpose, ctx.num_dst, ctx.num_src = transpose, num_dst, h.shape[0]
        return _spmm(adj_t, h, reduce, unit_values=True), h.narrow(0, 0, num_dst)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, grad_aggregated: torch.Tensor | None, grad_dst: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, None, None, None, None]:
        if grad_aggregated is not None:
            grad = _spmm(ctx.transpose, grad_aggregated.contiguous(), "sum")
            if grad_dst is not None:
                grad[: ctx.num_dst] += grad_dst
        elif grad_dst is not None:
            grad = grad_dst.new_zeros((ctx.num_src, grad_dst.shape[1]))
            grad[: ctx.num_dst] = grad_dst
        else:
            grad = None
        return grad, None, None, None, None


def aggregate_neighbors(
    block: Block, h: torch.Tensor, reduce: str = "mean"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Aggregate the source nodes' rows over the block's edges; the destinations' own rows.

    Parameters
    ----------
    block : Block
        ``S`` source nodes, ``D`` destination nodes (the first ``D`` sources).
    h : Tensor of shape (S, F)
        Representations of the source nodes.
    reduce : str
        ``"mean"`` (destinations without in-edges get 0) or ``"sum"``.

    Returns
    -------
    aggregated : Tensor of shape (D, F)
        Row ``d``: the mean (sum) of ``h`` over the sources of ``d``'s sampled in-edges;
        what PyG's ``SAGEConv`` computes from ``block.adj_t``.
    h_dst : Tensor of shape (D, F)
        ``h[:D]`` (a view), whose gradient is added into ``h``'s without a zero-filled copy.

    Examples
    --------
    >>> import torch
    >>> from graphemb.nn.aggregation import aggregate_neighbors
    >>> from graphemb.sampling import Block
    >>> block = Block(torch.tensor([5, 9, 11]), 1, torch.tensor([[1, 2], [0, 0]]))
    >>> h = torch.tensor([[1.0], [2.0], [4.0]], requires_grad=True)
    >>> aggregated, h_dst = aggregate_neighbors(block, h)
    >>> aggregated.tolist(), h_dst.tolist()
    ([[3.0]], [[1.0]])
    >>> (aggregated + h_dst).sum().backward()
    >>> h.grad.tolist()
    [[1.0], [0.5], [0.5]]
    """
    adj_t = block.adj_t
    if adj_t.dtype != h.dtype:
        adj_t = adj_t.to(h.dtype)
    transpose = block.aggregation_transpose(reduce, h.dtype)
    aggregated, h_dst = _BlockAggregation.apply(h, adj_t, transpose, block.num_dst_nodes, reduce)
    return aggregated, h_dst
