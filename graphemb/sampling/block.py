"""``Block``: one layer's message-flow graph, in DGL's node-order convention.

A block is a bipartite graph from ``num_src_nodes`` source nodes to ``num_dst_nodes``
destination nodes. As in DGL, the destination nodes come first among the source nodes
(``src_nodes[:num_dst_nodes] == dst_nodes``), so a layer can read the destination nodes'
own representation as ``h[:num_dst_nodes]``.
"""

from __future__ import annotations

import warnings

import torch

from .._csc import allocate_csc, compiled_csc

__all__ = ["Block"]


class Block:
    """A message-flow graph for one GNN layer.

    Parameters
    ----------
    src_nodes : Tensor of int64, shape (S,)
        Global ids of the source nodes; the first ``num_dst_nodes`` are the destinations.
    num_dst_nodes : int
        ``D``, the number of destination nodes.
    edge_index : Tensor of int64, shape (2, E)
        Edges in local ids, sorted by destination: row 0 indexes ``src_nodes``, row 1
        indexes ``dst_nodes``. This is the ``edge_index`` of PyG's bipartite layers:
        ``conv((x_src, x_dst), block.edge_index)``.
    edge_ids : Tensor of int64, shape (E,), optional
        Ids of the sampled edges in the original graph. Blocks from
        :class:`~graphemb.sampling.NeighborSampler` gather them on first read of
        :attr:`edge_ids` (most models never read them).

    Examples
    --------
    >>> import torch
    >>> from graphemb.sampling import Block
    >>> block = Block(torch.tensor([7, 3, 5]), 1, torch.tensor([[1, 2], [0, 0]]))
    >>> block.dst_nodes, block.num_src_nodes, block.num_edges
    (tensor([7]), 3, 2)
    """

    def __init__(
        self,
        src_nodes: torch.Tensor,
        num_dst_nodes: int,
        edge_index: torch.Tensor,
        edge_ids: torch.Tensor | None = None,
    ) -> None:
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
        if not 0 <= num_dst_nodes <= src_nodes.numel():
            raise ValueError(
                f"num_dst_nodes = {num_dst_nodes} must lie in [0, num_src_nodes = "
                f"{src_nodes.numel()}]"
            )
        self.src_nodes = src_nodes
        self.num_dst_nodes = int(num_dst_nodes)
        self.edge_index = edge_index
        self._edge_ids = edge_ids
        # (graph's edge-id table, positions): edge ids gathered on first use
        self._edge_id_source: tuple[torch.Tensor, torch.Tensor] | None = None
        self._adj_t: torch.Tensor | None = None
        self._row_pointers: torch.Tensor | None = None  # of adj_t, where the sampler has them
        # (reduce, dtype) -> transpose of the aggregation matrix: see aggregation_transpose
        self._transposes: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    @classmethod
    def _with_edge_positions(
        cls,
        src_nodes: torch.Tensor,
        num_dst_nodes: int,
        edge_index: torch.Tensor,
        edge_id_table: torch.Tensor,
        positions: torch.Tensor,
        row_pointers: torch.Tensor | None = None,
    ) -> Block:
        """A block whose edge ids are ``edge_id_table[positions]``, gathered only when read
        (most models never read them, and the gather is a pass of random reads).
        ``row_pointers`` (D + 1), if given, are the CSR row pointers of :attr:`adj_t`."""
        block = cls(src_nodes, num_dst_nodes, edge_index)
        block._edge_id_source = (edge_id_table, positions)
        block._row_pointers = row_pointers
        return block

    @property
    def edge_ids(self) -> torch.Tensor | None:
        """Ids of the sampled edges in the original graph, shape (E,), or None."""
        if self._edge_id_source is not None:
            table, positions = self._edge_id_source
            self._edge_ids = table.index_select(0, positions)
            self._edge_id_source = None
        return self._edge_ids

    @edge_ids.setter
    def edge_ids(self, value: torch.Tensor | None) -> None:
        self._edge_ids, self._edge_id_source = value, None

    def _tensors(self) -> list[torch.Tensor]:
        """Every tensor the block holds (for stream bookkeeping), without gathering."""
        held = [self.src_nodes, self.edge_index]
        if self._edge_id_source is not None:
            held.append(self._edge_id_source[1])
        elif self._edge_ids is not None:
            held.append(self._edge_ids)
        return held

    @property
    def dst_nodes(self) -> torch.Tensor:
        """Global ids of the destination nodes, shape (D,)."""
        return self.src_nodes[: self.num_dst_nodes]

    @property
    def num_src_nodes(self) -> int:
        return self.src_nodes.numel()

    @property
    def num_edges(self) -> int:
        return self.edge_index.shape[1]

    @property
    def device(self) -> torch.device:
        return self.src_nodes.device

    def in_degrees(self) -> torch.Tensor:
        """Number of sampled in-edges of every destination node, shape (D,)."""
        return torch.bincount(self.edge_index[1], minlength=self.num_dst_nodes)

    @property
    def adj_t(self) -> torch.Tensor:
        """The transposed adjacency as a sparse CSR tensor of shape (D, S), values 1.

        Row ``d`` holds the sources of destination ``d``. PyG layers that support sparse
        input (``SAGEConv``, ``GCNConv``, ...) aggregate with one fused sparse-dense product
        when given ``adj_t`` instead of ``edge_index`` -- about twice as fast on CPU.
        Built on first use (edges are already sorted by destination) and cached.
        """
        if self._adj_t is None:
            pointers = self._row_pointers
            if pointers is None:
                counts = torch.bincount(self.edge_index[1], minlength=self.num_dst_nodes)
                pointers = _row_pointers(counts)
            self._adj_t = _csr(
                pointers,
                self.edge_index[0],
                torch.ones(self.num_edges, device=self.device),
                (self.num_dst_nodes, self.num_src_nodes),
            )
        return self._adj_t

    def aggregation_transpose(self, reduce: str, dtype: torch.dtype) -> torch.Tensor:
        """The transpose of the block's aggregation matrix, as a sparse CSR tensor (S, D).

        The aggregation matrix (D, S) averages (``reduce="mean"``: values ``1 / in-degree``
        of the destination) or sums (``"sum"``: values 1) the sources of every destination;
        its transpose carries gradients back to the sources. With it ready in CSR form,
        the backward of an aggregation is one fused row-parallel sparse-dense product,
        where autograd of a CSR product would transpose :attr:`adj_t` again in every
        backward. Built on first use per ``(reduce, dtype)`` (one sort of the edges by
        source) and cached.
        """
        key = (reduce, dtype)
        cached = self._transposes.get(key)
        if cached is not None:
            return cached
        if reduce not in ("mean", "sum"):
            raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
        src, dst = self.edge_index[0], self.edge_index[1]
        pointers, dst_by_source = _edges_by_source(src, dst, self.num_src_nodes)
        if reduce == "mean":
            in_degrees = torch.bincount(dst, minlength=self.num_dst_nodes).clamp_(min=1)
            values = in_degrees.to(dtype).reciprocal_().index_select(0, dst_by_source)
        else:
            values = torch.ones(self.num_edges, dtype=dtype, device=self.device)
        transpose = _csr(
            pointers,
            dst_by_source,
            values,
            (self.num_src_nodes, self.num_dst_nodes),
        )
        self._transposes[key] = transpose
        return transpose

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Block:
        """This block on ``device``."""
        device = torch.device(device)
        if device == self.device:
            return self
        return Block(
            self.src_nodes.to(device, non_blocking=non_blocking),
            self.num_dst_nodes,
            self.edge_index.to(device, non_blocking=non_blocking),
            None if self.edge_ids is None else self.edge_ids.to(device, non_blocking=non_blocking),
        )

    def __repr__(self) -> str:
        return (
            f"Block(num_src_nodes={self.num_src_nodes}, num_dst_nodes={self.num_dst_nodes}, "
            f"num_edges={self.num_edges}, device={self.device})"
        )


def _row_pointers(counts: torch.Tensor) -> torch.Tensor:
    """CSR row pointers (``len(counts) + 1``, int64) of rows holding ``counts`` entries."""
    pointers = torch.empty(counts.numel() + 1, dtype=torch.int64, device=counts.device)
    pointers[0] = 0
    torch.cumsum(counts, 0, out=pointers[1:])
    return pointers


def _csr(
    row_pointers: torch.Tensor, columns: torch.Tensor, values: torch.Tensor, size: tuple[int, int]
) -> torch.Tensor:
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            row_pointers,
            columns,
            values,
            size,
            check_invariants=False,  # built sorted, in range
        )


def _edges_by_source(
    src: torch.Tensor, dst: torch.Tensor, num_src_nodes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The edges grouped by source, each source's in their order (a stable sort by source):
    CSR row pointers over the sources, shape (S + 1,), and the destination of every edge in
    that order, shape (E,).

    On CPU, for int64 ids, the compiled counting sort of
    :meth:`graphemb.graph.Graph.from_edges` does it in O(E + S): it groups edges by the node
    they point to, so it gets the edges reversed (destinations are source ids too: a
    block's destinations are its first sources). Elsewhere a stable ``torch.sort`` of the
    sources.
    """
    counting_sort = compiled_csc(src.device)
    if counting_sort is not None and src.dtype == dst.dtype == torch.int64:
        pointers, dst_by_source, _ = counting_sort(dst, src, num_src_nodes, False, allocate_csc)
        return pointers, dst_by_source
    # int32 keys sort several times faster than int64 on CPU (radix passes)
    keys = src.to(torch.int32) if num_src_nodes < 2**31 else src
    by_source, order = torch.sort(keys, stable=True)
    pointers = _row_pointers(torch.bincount(by_source, minlength=num_src_nodes))
    return pointers, dst.index_select(0, order)
