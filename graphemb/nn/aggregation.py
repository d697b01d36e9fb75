"""Mean and sum aggregation over a block's edges: one fused CSR product forward and one
transposed product backward, and the destination nodes' own rows without a full-size zero
gradient.

The forward writes each destination's aggregate and its own row side by side, as one
``(D, 2F)`` tensor: a GraphSAGE layer then multiplies both by its two weight matrices in
one product of width ``2F`` (:meth:`graphemb.nn.GraphSAGE.convolve`), and the gradient of
that product arrives as one tensor of the same layout, which the backward reads in one
pass."""

from __future__ import annotations

from typing import Any

import torch

from .._compiled import float_kernel
from ..distributed.recycling import RecycledBlocks
from ..embedding import NodeEmbedding
from ..sampling.block import Block
from .dropout import Dropout, Mask

__all__ = ["aggregate_embedding_rows", "aggregate_neighbors", "aggregate_with_own_rows"]

# The blocks of the sources' gradients on CPU: a model's layers each hold one until the
# layer below has used it, and the largest (the input rows', tens of MB) is asked for again
# every batch. The aggregates likewise: each layer's is held for its product's backward.
_SOURCE_GRADIENTS = RecycledBlocks(blocks=4)
_AGGREGATES = RecycledBlocks(blocks=4)

# The row-parallel CSR x dense kernel behind torch.sparse.mm(csr, x, reduce) on CPU (torch
# >= 2.0), the one PyG's SAGEConv runs on adj_t. CUDA takes torch's cuSPARSE product.
_cpu_spmm = getattr(torch.ops.aten, "_sparse_mm_reduce_impl", None)


def _spmm(
    matrix: torch.Tensor,
    dense: torch.Tensor,
    reduce: str,
    unit_values: bool = False,
    mask: Mask | None = None,
    with_self: bool = False,
    relu: bool = False,
) -> torch.Tensor:
    """``matrix @ dense`` for a CSR ``matrix``; ``reduce="mean"`` divides every row by its
    number of entries (rows without entries give 0), as ``torch.sparse.mm`` does.
    ``unit_values``: every value of ``matrix`` is 1 (not read then). ``mask``, ``relu``:
    of ``dense`` after that dropout, after a ReLU (compiled kernel only). ``with_self``:
    (R, 2F), each row beside ``dense``'s row of the same index (read the same way)."""
    kernel = float_kernel("csr_aggregate", dense)
    if kernel is not None:  # prefetches the scattered rows of dense (csrc/.../aggregate.cpp)
        values = None if unit_values else matrix.values().to(dense.dtype).contiguous()
        width = dense.shape[1] * (2 if with_self else 1)
        return kernel(
            matrix.crow_indices().contiguous(),
            matrix.col_indices().contiguous(),
            values,
            dense.contiguous(),
            reduce == "mean",
            mask,
            with_self,
            relu,
            out=_AGGREGATES.empty((matrix.shape[0], width), dense.dtype, dense.device),
        )
    if mask is not None or relu:
        raise RuntimeError("a dropout or ReLU inside the aggregation needs the compiled kernels")
    if with_self:
        product = _spmm(matrix, dense, reduce, unit_values)
        return torch.cat([product, dense[: product.shape[0]]], dim=1)
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
    grad_pair: torch.Tensor,
    reduce: str,
    mask: Mask | None,
    relu_input: torch.Tensor | None = None,
) -> torch.Tensor:
    """The gradient of the block's sources from the gradient ``grad_pair`` (D, 2F) of
    :func:`aggregate_with_own_rows`: ``A^T grad`` (S, F) for the block's (D, S) aggregation
    matrix ``A`` and ``grad`` the first F columns, plus the last F columns on the first D
    rows, then through the dropout of ``mask`` and the ReLU of ``relu_input`` (S, F, the
    values before it) if given.

    On CPU the compiled kernel takes ``adj_t`` as it is (csrc/nn/aggregate.cpp: it
    counting-sorts ``A``'s entries by source on its threads, then gathers each source's
    gradient rows as the forward does, reading ``grad_pair`` in one pass). Elsewhere one
    CSR product with the transpose, which the block builds once."""
    width = grad_pair.shape[1] // 2
    kernel = float_kernel("csr_aggregate_transposed", grad_pair)
    if kernel is not None:
        return kernel(
            adj_t.crow_indices().contiguous(),
            adj_t.col_indices().contiguous(),
            grad_pair.contiguous(),
            reduce == "mean",
            block.num_src_nodes,
            None,
            mask,
            out=_SOURCE_GRADIENTS.empty(
                (block.num_src_nodes, width), grad_pair.dtype, grad_pair.device
            ),
            paired=True,
            relu_input=relu_input,
        )
    if mask is not None or relu_input is not None:
        raise RuntimeError("a dropout or ReLU inside the aggregation needs the compiled kernels")
    transpose = block.aggregation_transpose(reduce, grad_pair.dtype)
    out = _spmm(transpose, grad_pair[:, :width].contiguous(), "sum")
    out[: block.num_dst_nodes] += grad_pair[:, width:]
    return out


class _BlockAggregation(torch.autograd.Function):
    """``[A h | h[:D]]`` (D, 2F) with ``A`` the block's (D, S) aggregation matrix.

    Forward is one CSR product on ``adj_t`` that writes each destination's own row beside
    its aggregate (on CPU graphemb's compiled kernel where it is built, else the product
    PyG's ``SAGEConv`` runs and a concatenation); backward is one transposed product
    (:func:`_transposed_product`), instead of autograd transposing (sorting) the matrix,
    with the own rows' gradient added into its first rows instead of slicing's zero-filled
    full-size gradient and a sum.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        h: torch.Tensor,
        adj_t: torch.Tensor,
        block: Block,
        reduce: str,
        mask: Mask | None,
        relu: bool,
    ) -> torch.Tensor:
        ctx.adj_t, ctx.block, ctx.reduce, ctx.mask, ctx.relu = adj_t, block, reduce, mask, relu
        if relu:  # the ReLU's backward reads where h was above 0
            ctx.save_for_backward(h)
        return _spmm(adj_t, h, reduce, unit_values=True, mask=mask, with_self=True, relu=relu)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, grad_pair: torch.Tensor
    ) -> tuple[torch.Tensor, None, None, None, None, None]:
        relu_input = ctx.saved_tensors[0] if ctx.relu else None
        grad = _transposed_product(
            ctx.block, ctx.adj_t, grad_pair, ctx.reduce, ctx.mask, relu_input
        )
        return grad, None, None, None, None, None


def _adjacency(block: Block, dtype: torch.dtype) -> torch.Tensor:
    """The block's (D, S) CSR adjacency ``adj_t`` with values of ``dtype``."""
    adj_t = block.adj_t
    return adj_t if adj_t.dtype == dtype else adj_t.to(dtype)


def aggregate_with_own_rows(
    block: Block,
    h: torch.Tensor,
    reduce: str = "mean",
    mask: Mask | None = None,
    relu: bool = False,
) -> torch.Tensor:
    """Each destination's aggregate of its sources' rows, and its own row beside it.

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
        of ``aggregate_with_own_rows(block, dropout(h))`` without the dropped ``h`` written
        out. Needs the compiled kernels (CPU, float32 or float64).
    relu : bool
        Of ``relu(h)`` (before the dropout): the layer below's activation, applied as the
        rows are read, its backward as their gradient is written. Without the compiled
        kernels, ``torch.relu`` first.

    Returns
    -------
    Tensor of shape (D, 2F)
        Row ``d``: the mean (sum) of ``h`` over the sources of ``d``'s sampled in-edges
        (what PyG's ``SAGEConv`` computes from ``block.adj_t``), then ``h[d]``, both read
        through ``relu`` and ``mask`` where given.

    Examples
    --------
    >>> import torch
    >>> from graphemb.nn.aggregation import aggregate_with_own_rows
    >>> from graphemb.sampling import Block
    >>> block = Block(torch.tensor([5, 9, 11]), 1, torch.tensor([[1, 2], [0, 0]]))
    >>> h = torch.tensor([[1.0], [2.0], [4.0]], requires_grad=True)
    >>> pair = aggregate_with_own_rows(block, h)
    >>> pair.tolist()
    [[3.0, 1.0]]
    >>> pair.sum().backward()
    >>> h.grad.tolist()
    [[1.0], [0.5], [0.5]]
    """
    adj_t = _adjacency(block, h.dtype)
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
    if relu and float_kernel("csr_aggregate", h) is None:
        h, relu = torch.relu(h), False
    if mask is not None or relu:
        h = h.contiguous()  # element i of the mask is element i of h in memory order
    return _BlockAggregation.apply(h, adj_t, block, reduce, mask, relu)


def aggregate_embedding_rows(
    block: Block, embedding: NodeEmbedding, reduce: str, dropout: Dropout
) -> torch.Tensor | None:
    """:func:`aggregate_with_own_rows` of ``dropout(embedding(block.src_nodes))``, each row
    read from the embedding's table as it is aggregated, never copied out; ``None`` where
    that cannot be done: no compiled kernels for the table's device and dtype, or a table
    whose rows this process does not all hold (:meth:`NodeEmbedding.read_in_place`).

    The same floats as the lookup followed by :func:`aggregate_with_own_rows` with
    ``dropout``'s mask, and the same gradient for the rows; the dropout's key is drawn from
    torch's generator as that path draws it. What it saves is the lookup: a pass that
    copies every input row of the batch out of the table, and the memory of the copy.

    Parameters
    ----------
    block : Block
        The first block of a batch: ``S`` source nodes, ``D`` destinations.
    embedding : NodeEmbedding
        The table the source nodes' rows come from.
    reduce : str
        ``"mean"`` or ``"sum"``.
    dropout : Dropout
        The dropout on the rows (identity in eval mode).

    Returns
    -------
    Tensor of shape (D, 2 * embedding_dim), or None
    """
    table = embedding.weight
    kernel = float_kernel("csr_aggregate", table)
    if kernel is None or reduce not in ("mean", "sum"):
        return None
    adj_t = _adjacency(block, table.dtype)
    crow, col = adj_t.crow_indices().contiguous(), adj_t.col_indices().contiguous()
    masks: list[Mask | None] = []  # the one drawn by the read, for its backward

    def read(weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        masks.append(dropout.hashed_mask(weight))
        mean = reduce == "mean"
        out = _AGGREGATES.empty(
            (block.num_dst_nodes, 2 * weight.shape[1]), weight.dtype, weight.device
        )
        return kernel(crow, col, None, weight, mean, masks[0], True, False, ids.contiguous(), out)

    def rows_gradient(grad_pair: torch.Tensor) -> torch.Tensor:
        return _transposed_product(block, adj_t, grad_pair, reduce, masks[0])

    return embedding.read_in_place(block.src_nodes, read, rows_gradient)


def aggregate_neighbors(
    block: Block, h: torch.Tensor, reduce: str = "mean", mask: Mask | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`aggregate_with_own_rows` as two tensors (the same parameters).

    Returns
    -------
    aggregated : Tensor of shape (D, F)
        Row ``d``: the mean (sum) of ``h`` over the sources of ``d``'s sampled in-edges.
    h_dst : Tensor of shape (D, F)
        ``h[:D]`` (dropped by ``mask`` if given), whose gradient is added into ``h``'s
        without a zero-filled copy.

    Both are views of one (D, 2F) tensor.
    """
    pair = aggregate_with_own_rows(block, h, reduce, mask)
    width = h.shape[1]
    return pair[:, :width], pair[:, width:]
