"""Mean and sum aggregation over a block's edges: one fused CSR product forward and one
transposed product backward, and the destination nodes' own rows without a full-size zero
gradient."""

from __future__ import annotations

from typing import Any

import torch

from .._compiled import float_kernel
from ..distributed.recycling import RecycledBlocks
from ..sampling.block import Block
from .dropout import Mask

__all__ = ["aggregate_neighbors"]

# The blocks of the sources' gradients on CPU: a model's layers each hold one until the
# layer below has used it, and the largest (the input rows', tens of MB) is asked for again
# every batch.
_SOURCE_GRADIENTS = RecycledBlocks(blocks=4)

# The row-parallel CSR x dense kernel behind torch.sparse.mm(csr, x, reduce) on CPU (torch
# >= 2.0), the one PyG's SAGEConv runs on adj_t. CUDA takes torch's cuSPARSE product.
_cpu_spmm = getattr(torch.ops.aten, "_sparse_mm_reduce_impl", None)


def _spmm(
    matrix: torch.Tensor,
    dense: torch.Tensor,
    reduce: str,
    unit_values: bool = False,
    mask: Mask | None = None,
) -> torch.Tensor:
    """``matrix @ dense`` for a CSR ``matrix``; ``reduce="mean"`` divides every row by its
    number of entries (rows without entries give 0), as ``torch.sparse.mm`` does.
    ``unit_values``: every value of ``matrix`` is 1 (not read then). ``mask``: of
    ``dense`` after that dropout (compiled kernel only)."""
    kernel = float_kernel("csr_aggregate", dense)
    if kernel is not None:  # prefetches the scattered rows of dense (csrc/.../aggregate.cpp)
        values = None if unit_values else matrix.values().to(dense.dtype).contiguous()
        return kernel(
            matrix.crow_indices().contiguous(),
            matrix.col_indices().contiguous(),
            values,
            dense.contiguous(),
            reduce == "mean",
            mask,
        )
    if mask is not None:
        raise RuntimeError("a dropout mask inside the aggregation needs the compiled kernels")
    if dense.device.type == "cpu" and _cpu_spmm is not None:
        return _cpu_spmm(matrix, dense, reduce)[0]
    out = torch.sparse.mm(matrix, dense)
    if reduce == "mean":
        counts = matrix.crow_indices().diff().clamp_(min=1).unsqueeze(1)
        out = out / counts.to(out.dtype)
    return out


def _transposed_product(
    block: Block,
    adj_t: torch.Tensor,
    grad: torch.Tensor,
    reduce: str,
    grad_dst: torch.Tensor | None,
    mask: Mask | None = None,
) -> torch.Tensor:
    """The gradient of the block's sources: ``A^T grad`` (S, F) for the block's (D, S)
    aggregation matrix ``A``, plus ``grad_dst`` (D, F) on the first D rows if given, then
    through the dropout of ``mask`` if given.

    On CPU the compiled kernel takes ``adj_t`` as it is (csrc/nn/aggregate.cpp: it
    counting-sorts ``A``'s entries by source on its threads, then gathers each source's
    gradient rows as the forward does). Elsewhere one CSR product with the transpose,
    which the block builds once."""
    kernel = float_kernel("csr_aggregate_transposed", grad)
    if kernel is not None:
        addend = None if grad_dst is None else grad_dst.contiguous()
        shape = (block.num_src_nodes, grad.shape[1])
        return kernel(
            adj_t.crow_indices().contiguous(),
            adj_t.col_indices().contiguous(),
            grad,
            reduce == "mean",
            block.num_src_nodes,
            addend,
            mask,
            out=_SOURCE_GRADIENTS.empty(shape, grad.dtype, grad.device),
        )
    if mask is not None:
        raise RuntimeError("a dropout mask inside the aggregation needs the compiled kernels")
    out = _spmm(block.aggregation_transpose(reduce, grad.dtype), grad, "sum")
    if grad_dst is not None:
        out[: block.num_dst_nodes] += grad_dst
    return out


class _BlockAggregation(torch.autograd.Function):
    """``(A h, h[:D])`` with ``A`` the block's (D, S) aggregation matrix.

    Forward is one CSR product on ``adj_t`` (on CPU graphemb's compiled kernel where it is
    built, else the one PyG's ``SAGEConv`` runs); backward is one transposed product
    (:func:`_transposed_product`), instead of autograd transposing (sorting) the matrix.
    The gradient of ``h[:D]`` is added into the first rows of that product, instead of
    slicing's zero-filled full-size gradient and a sum.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, h: torch.Tensor, adj_t: torch.Tensor, block: Block, reduce: str, mask: Mask | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ctx.adj_t, ctx.block, ctx.reduce, ctx.mask = adj_t, block, reduce, mask
        aggregated = _spmm(adj_t, h, reduce, unit_values=True, mask=mask)
        h_dst = h.narrow(0, 0, block.num_dst_nodes)
        if mask is not None:  # the dropout of the first D rows: a prefix of h, the same hash
            h_dst = _dropped(h_dst, mask)
        return aggregated, h_dst

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, grad_aggregated: torch.Tensor | None, grad_dst: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, None, None, None, None]:
        block, mask = ctx.block, ctx.mask
        if grad_aggregated is not None:
            grad = _transposed_product(
                block, ctx.adj_t, grad_aggregated.contiguous(), ctx.reduce, grad_dst, mask
            )
        elif grad_dst is not None:
            grad = grad_dst.new_zeros((block.num_src_nodes, grad_dst.shape[1]))
            grad[: block.num_dst_nodes] = grad_dst if mask is None else _dropped(grad_dst, mask)
        else:
            grad = None
        return grad, None, None, None, None


def _dropped(x: torch.Tensor, mask: Mask) -> torch.Tensor:
    """``x`` (its first element the first of the masked tensor) through ``mask``'s dropout."""
    kernel = float_kernel("dropout_masked_scale", x)
    assert kernel is not None  # a mask is drawn only where the kernels run
    return kernel(x.contiguous(), *mask)


def aggregate_neighbors(
    block: Block, h: torch.Tensor, reduce: str = "mean", mask: Mask | None = None
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
    mask : tuple of (int, float, int), optional
        A dropout on ``h`` first (:meth:`graphemb.nn.Dropout.hashed_mask`), applied to the
        rows as the kernels read them and to their gradient as it is written: the floats
        of ``aggregate_neighbors(block, dropout(h))`` without the dropped ``h`` written
        out. Needs the compiled kernels (CPU, float32 or float64).

    Returns
    -------
    aggregated : Tensor of shape (D, F)
        Row ``d``: the mean (sum) of ``h`` over the sources of ``d``'s sampled in-edges;
        what PyG's ``SAGEConv`` computes from ``block.adj_t``.
    h_dst : Tensor of shape (D, F)
        ``h[:D]`` (a view; dropped by ``mask`` if given), whose gradient is added into
        ``h``'s without a zero-filled copy.

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
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
    if mask is not None:
        h = h.contiguous()  # element i of the mask is element i of h in memory order
    aggregated, h_dst = _BlockAggregation.apply(h, adj_t, block, reduce, mask)
    return aggregated, h_dst
