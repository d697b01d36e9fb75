"""``Graph``: a directed graph in compressed sparse column form, on CPU or one GPU.

Column ``v`` of the adjacency lists the *in*-neighbours of ``v`` (the sources of the edges
that end at ``v``): exactly what neighbour sampling for message passing reads, since a node
aggregates messages from its in-neighbours. Pure torch: every method runs on CPU and CUDA
tensors alike, with no compiled extension.

Example
-------
>>> import torch
>>> from graphemb.graph import Graph
>>> g = Graph.from_edges(torch.tensor([0, 0, 1, 2]), torch.tensor([1, 2, 2, 0]), num_nodes=3)
>>> g
Graph(num_nodes=3, num_edges=4, device=cpu)
>>> g.in_degrees()
tensor([1, 1, 2])
>>> g.in_neighbors(2)
tensor([0, 1])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._adjacency import OutAdjacency, build_out_adjacency
from ._checks import as_size, check_edge_weight, check_node_id_vector, check_node_ids
from ._compiled import compiled_module
from ._csc import allocate_csc, compiled_csc, csc_by_sort
from .distributed.huge_pages import advise_huge_pages

__all__ = ["Graph"]


class Graph:
    """A directed graph stored as CSC arrays: in-neighbours per node.

    Prefer the constructors :meth:`from_edges`, :meth:`from_dataset`, :meth:`from_scipy`,
    :meth:`from_networkx` and :meth:`from_dgl`.

    Parameters
    ----------
    indptr : Tensor of int64, shape (N + 1,)
        ``indices[indptr[v]:indptr[v + 1]]`` are the in-neighbours of node ``v``.
    indices : Tensor of int64, shape (E,)
        Source node of each edge, grouped by destination.
    edge_ids : Tensor of int64, shape (E,), optional
        Id of each stored edge in the edge list the graph was built from (its position
        there). Default: ``arange(E)``.
    edge_weight : Tensor of floats, shape (E,), optional
        Weight of each stored edge (aligned with ``indices``), finite and ``>= 0``;
        integers become float64. None (default): an unweighted graph, no memory spent.

    Attributes
    ----------
    indptr, indices, edge_ids : Tensor
        As above, all on :attr:`device`.
    edge_weight : Tensor or None
        As above, on :attr:`device`. Every transform keeps it aligned with the edges.
    symmetric : bool
        Built undirected (``from_edges(undirected=True)``): every edge has its reverse, of
        the same weight, so a node's out-neighbours are its in-neighbours and walks read
        the CSC arrays instead of building :meth:`csr`. False unless a constructor knows.
    """

    def __init__(
        self,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        edge_ids: torch.Tensor | None = None,
        edge_weight: torch.Tensor | None = None,
    ) -> None:
        for name, tensor in (("indptr", indptr), ("indices", indices), ("edge_ids", edge_ids)):
            if tensor is None:
                continue
            check_node_id_vector(name, tensor)
        if indptr.numel() == 0 or int(indptr[0]) != 0 or int(indptr[-1]) != indices.numel():
            raise ValueError(
                f"indptr must start at 0 and end at len(indices) = {indices.numel()}, got "
                f"{indptr[:1].tolist()} ... {indptr[-1:].tolist()}"
            )
        if indptr.numel() > 1 and bool((indptr[1:] < indptr[:-1]).any()):
            raise ValueError("indptr must be non-decreasing")
        num_nodes = indptr.numel() - 1
        check_node_ids(indices, num_nodes, "indices")
        if edge_ids is not None and edge_ids.numel() != indices.numel():
            raise ValueError(
                f"edge_ids has {edge_ids.numel()} entries but there are {indices.numel()} edges"
            )
        device = indices.device
        self.indptr = indptr.to(device=device, dtype=torch.int64)
        self.indices = indices.to(dtype=torch.int64)
        self.edge_ids = (
            torch.arange(indices.numel(), device=device)
            if edge_ids is None
            else edge_ids.to(device=device, dtype=torch.int64)
        )
        self.edge_weight = (
            None
            if edge_weight is None
            else check_edge_weight(edge_weight, indices.numel()).to(device)
        )
        self.symmetric = False
        self._csr: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._csr_weight: torch.Tensor | None = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_edges(
        cls,
        src: Any,
        dst: Any,
        num_nodes: int | None = None,
        device: torch.device | str | None = None,
        *,
        undirected: bool = False,
        edge_weight: Any = None,
    ) -> Graph:
        """A graph with the edges ``src[i] -> dst[i]``.

        Parameters
        ----------
        src, dst : Tensor, numpy array or sequence of integers, shape (E,)
            Endpoints of the directed edges; duplicates and self-loops are kept as given.
        num_nodes : int, optional
            Number of nodes ``N``; ids must lie in ``[0, N)``. Default: the largest id + 1.
        device : torch.device or str, optional
            Where the graph lives. Default: the device of ``src`` (CPU for non-tensors).
        undirected : bool
            Also store every edge reversed: edge ``E + k`` is ``dst[j] -> src[j]`` for the
            ``k``-th edge ``j`` that is not a self-loop (a self-loop is stored once, as
            networkx's ``to_directed`` does). No doubled copy of ``src`` and ``dst`` is
            made.
        edge_weight : Tensor, numpy array or sequence of numbers, shape (E,), optional
            Weight of edge ``i`` (finite, ``>= 0``); a reversed edge gets its edge's weight.

        Returns
        -------
        Graph
            Edge ``i`` of the input has edge id ``i``; each column lists its edges in
            increasing edge id (the order of a stable sort by destination).
        """
        src = _as_id_tensor("src", src)
        dst = _as_id_tensor("dst", dst)
        if src.shape != dst.shape:
            raise ValueError(
                f"src and dst must have the same length, got {src.numel()} and {dst.numel()}"
            )
        device = src.device if device is None else torch.device(device)
        src, dst = src.to(device), dst.to(device)
        if edge_weight is not None:
            edge_weight = check_edge_weight(edge_weight, src.numel()).to(device)
            if undirected:  # stored edge E + k reverses the k-th edge that is not a loop
                edge_weight = torch.cat([edge_weight, edge_weight[src != dst]])
        if num_nodes is None:
            num_nodes = int(torch.maximum(src.max(), dst.max())) + 1 if src.numel() else 0
        num_nodes = as_size("num_nodes", num_nodes)
        counting_sort = compiled_csc(device)
        if counting_sort is not None:
            # The kernel checks every id (IndexError on a bad one, before any allocation);
            # the checks below then raise the usual message.
            try:
                indptr, indices, edge_ids = counting_sort(
                    src, dst, num_nodes, undirected, allocate_csc
                )
            except IndexError:
                check_node_ids(src, num_nodes, "src")
                check_node_ids(dst, num_nodes, "dst")
                raise
        else:
            check_node_ids(src, num_nodes, "src")
            check_node_ids(dst, num_nodes, "dst")
            num_stored = src.numel() + (int((src != dst).sum()) if undirected else 0)
            indices, edge_ids = allocate_csc(num_stored, device)
            indptr = csc_by_sort(src, dst, num_nodes, indices, edge_ids)
        graph = cls(
            indptr, indices, edge_ids, None if edge_weight is None else edge_weight[edge_ids]
        )
        graph.symmetric = undirected
        return graph

    @classmethod
    def from_edge_table_in_place(cls, edges: torch.Tensor, num_nodes: int) -> Graph:
        """The undirected graph of the edges ``edges[0, i] - edges[1, i]``, built in their
        memory: as :meth:`from_edges` with ``undirected=True``, but the table becomes the
        graph's ``edge_ids`` (the 2E stored edges fill the 2E entries, less one per
        self-loop), so the build allocates only ``indices``.

        Parameters
        ----------
        edges : Tensor of int64, shape (2, E), contiguous, on the CPU
            Overwritten: do not use it afterwards. Where the compiled counting sort is not
            available, it is left as it is and the graph has memory of its own.
        num_nodes : int

        Returns
        -------
        Graph
        """
        counting_sort = compiled_csc(edges.device)
        module = compiled_module()
        if (
            counting_sort is None
            or not getattr(module, "CSC_EDGE_IDS_MAY_HOLD_EDGES", False)
            or edges.dtype != torch.int64
            or edges.dim() != 2
            or edges.shape[0] != 2
            or not edges.is_contiguous()
        ):
            return cls.from_edges(edges[0], edges[1], num_nodes, undirected=True)
        num_nodes = as_size("num_nodes", num_nodes)
        memory = edges.view(-1)

        def allocate(num_stored: int) -> tuple[torch.Tensor, torch.Tensor]:
            # Indices on ordinary pages, advised for 2 MiB pages once written (below): a
            # first touch of fresh 2 MiB pages cost ~1.1 s/GB against ~0.3 s/GB, for
            # gathers ~10% faster (10M random reads of 40M indices: 0.137 s, not 0.150 s).
            return torch.empty(num_stored, dtype=torch.int64), memory[:num_stored]

        try:
            indptr, indices, edge_ids = counting_sort(edges[0], edges[1], num_nodes, True, allocate)
        except IndexError:  # raised before anything is written
            check_node_ids(edges[0], num_nodes, "src")
            check_node_ids(edges[1], num_nodes, "dst")
            raise
        # khugepaged then moves them to 2 MiB pages in the background (here 16 MB a 10 s)
        advise_huge_pages(indices)
        graph = cls(indptr, indices, edge_ids)
        graph.symmetric = True
        return graph

    @classmethod
    def from_dataset(cls, dataset: Any, device: torch.device | str | None = None) -> Graph:
        """The graph of a :mod:`graphemb.datasets` dataset (fields ``src``, ``dst``,
        ``num_nodes``; its ``edge_weight``, where it has one, weighs the edges)."""
        weight = getattr(dataset, "edge_weight", None)
        return cls.from_edges(
            dataset.src, dataset.dst, dataset.num_nodes, device, edge_weight=weight
        )

    @classmethod
    def from_scipy(cls, matrix: Any, device: torch.device | str | None = None) -> Graph:
        """A graph from a square scipy sparse adjacency matrix: ``matrix[u, v] != 0`` is an
        edge ``u -> v`` (stored zeros count as edges, as in DGL). The values are the edge
        weights, unless every one is 1 (then the graph is unweighted)."""
        if not hasattr(matrix, "tocoo") or len(getattr(matrix, "shape", ())) != 2:
            raise TypeError(f"expected a scipy sparse matrix, got {type(matrix).__name__}")
        rows, cols = matrix.shape
        if rows != cols:
            raise ValueError(f"an adjacency matrix must be square, got shape {matrix.shape}")
        coo = matrix.tocoo()
        src = torch.from_numpy(np.asarray(coo.row, dtype=np.int64))
        dst = torch.from_numpy(np.asarray(coo.col, dtype=np.int64))
        values = np.asarray(coo.data, dtype=np.float64)
        weight = None if bool((values == 1).all()) else values
        return cls.from_edges(src, dst, rows, device, edge_weight=weight)

    @classmethod
    def from_networkx(cls, nx_graph: Any, device: torch.device | str | None = None) -> Graph:
        """A graph from a networkx graph whose nodes are ``0 .. N-1``.

        An undirected networkx graph gives both directions of every edge and one edge
        ``v -> v`` per self-loop, as ``networkx``'s ``to_directed()``, DGL and PyG do.
        Parallel edges of multigraphs are kept. The edges' ``"weight"`` attribute (1 where
        missing) weighs them if any edge has one.
        """
        nodes = list(nx_graph.nodes)
        if sorted(nodes) != list(range(len(nodes))):
            raise ValueError(
                "networkx nodes must be the integers 0..N-1; relabel them first "
                "(networkx.convert_node_labels_to_integers)"
            )
        edges = list(nx_graph.edges(data="weight"))
        pairs = torch.tensor([e[:2] for e in edges], dtype=torch.int64).reshape(-1, 2)
        weight = None
        if any(e[2] is not None for e in edges):
            weight = [1.0 if e[2] is None else float(e[2]) for e in edges]
        return cls.from_edges(
            pairs[:, 0],
            pairs[:, 1],
            len(nodes),
            device,
            undirected=not nx_graph.is_directed(),
            edge_weight=None if weight is None else torch.tensor(weight, dtype=torch.float64),
        )

    @classmethod
    def from_dgl(cls, dgl_graph: Any, device: torch.device | str | None = None) -> Graph:
        """A graph from a homogeneous ``DGLGraph`` (edge ids are DGL's); its edge data
        ``"w"`` or else ``"weight"``, shape (E,) or (E, 1), weighs the edges."""
        if not hasattr(dgl_graph, "edges") or not hasattr(dgl_graph, "num_nodes"):
            raise TypeError(f"expected a DGLGraph, got {type(dgl_graph).__name__}")
        src, dst = dgl_graph.edges(order="eid")
        edata = getattr(dgl_graph, "edata", {})
        weight = next((edata[k] for k in ("w", "weight") if k in edata), None)
        if weight is not None and weight.dim() == 2 and weight.shape[1] == 1:
            weight = weight[:, 0]
        return cls.from_edges(src, dst, dgl_graph.num_nodes(), device, edge_weight=weight)

    # ------------------------------------------------------------------ properties
    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()

    @property
    def device(self) -> torch.device:
        return self.indices.device

    def in_degrees(self, nodes: torch.Tensor | None = None) -> torch.Tensor:
        """Number of in-edges of ``nodes`` (default: every node), int64."""
        degrees = self.indptr[1:] - self.indptr[:-1]
        return degrees if nodes is None else degrees[nodes]

    def weighted_in_degrees(self) -> torch.Tensor:
        """Sum of the weights of each node's in-edges, float64 of shape (N,); the in-degrees
        where the graph has no edge weights."""
        if self.edge_weight is None:
            return self.in_degrees().to(torch.float64)
        _, destinations = self.edges()
        sums = torch.zeros(self.num_nodes, dtype=torch.float64, device=self.device)
        return sums.index_add_(0, destinations, self.edge_weight.to(torch.float64))

    def out_degrees(self, nodes: torch.Tensor | None = None) -> torch.Tensor:
        """Number of out-edges of ``nodes`` (default: every node), int64."""
        degrees = torch.bincount(self.indices, minlength=self.num_nodes)
        return degrees if nodes is None else degrees[nodes]

    def in_neighbors(self, node: int) -> torch.Tensor:
        """Sources of the edges into ``node`` (with repeats for parallel edges)."""
        node = as_size("node", node)
        if node >= self.num_nodes:
            raise ValueError(f"node {node} out of range [0, {self.num_nodes})")
        return self.indices[self.indptr[node] : self.indptr[node + 1]]

    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)`` of every edge, in storage order (grouped by destination)."""
        dst = torch.repeat_interleave(
            torch.arange(self.num_nodes, device=self.device), self.in_degrees()
        )
        return self.indices, dst

    def csr(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Out-neighbours per node: ``(indptr, indices, edge_ids)`` of the CSR arrays.

        ``indices[indptr[u]:indptr[u + 1]]`` are the destinations of the edges leaving
        ``u``. Built on first use and cached (random walks follow out-edges).
        """
        if self._csr is None:
            reverse = self.reverse()
            self._csr = (reverse.indptr, reverse.indices, reverse.edge_ids)
            self._csr_weight = reverse.edge_weight
        return self._csr

    def csr_edge_weight(self) -> torch.Tensor | None:
        """:attr:`edge_weight` in the order of :meth:`csr`'s edges (None if unweighted)."""
        self.csr()
        return self._csr_weight

    def out_adjacency(self, *, sorted_rows: bool = False, weighted: bool = False) -> OutAdjacency:
        """Out-neighbours per node in the form random walks read them
        (:class:`~graphemb._adjacency.OutAdjacency`): every row sorted if ``sorted_rows``,
        and with ``weighted`` the prefix sums of the edge weights. A symmetric graph's own
        arrays serve as its CSR (no copy)."""
        if weighted and self.edge_weight is None:
            raise ValueError("weighted=True needs a graph with edge weights (edge_weight is None)")
        if self.symmetric:  # out-neighbours are the in-neighbours
            indptr, indices, weight = self.indptr, self.indices, self.edge_weight
        else:
            indptr, indices, _ = self.csr()
            weight = self.csr_edge_weight()
        return build_out_adjacency(
            indptr, indices, weight if weighted else None, sort_rows=sorted_rows
        )

    # ------------------------------------------------------------------ transforms
    def to(self, device: torch.device | str) -> Graph:
        """This graph on ``device`` (``self`` if it is there already)."""
        device = torch.device(device)
        if device == self.device:
            return self
        weight = None if self.edge_weight is None else self.edge_weight.to(device)
        moved = Graph(
            self.indptr.to(device), self.indices.to(device), self.edge_ids.to(device), weight
        )
        moved.symmetric = self.symmetric
        return moved

    def reverse(self) -> Graph:
        """The graph with every edge turned around (edge ids and weights kept)."""
        src, dst = self.edges()
        reverse = Graph.from_edges(dst, src, self.num_nodes)
        if self.edge_weight is not None:  # reverse.edge_ids: positions in this storage
            reverse.edge_weight = self.edge_weight[reverse.edge_ids]
        reverse.edge_ids = self.edge_ids[reverse.edge_ids]
        return reverse

    def add_reverse_edges(self) -> Graph:
        """Every edge plus its reverse (edge ids renumbered: ``i`` and ``E + i``; the
        reverse has its edge's weight)."""
        src, dst, weight = self._edges_by_id()
        return Graph.from_edges(
            torch.cat([src, dst]),
            torch.cat([dst, src]),
            self.num_nodes,
            edge_weight=None if weight is None else torch.cat([weight, weight]),
        )

    def remove_self_loops(self) -> Graph:
        """The graph without edges ``v -> v`` (edge ids renumbered)."""
        src, dst, weight = self._edges_by_id()
        keep = src != dst
        return Graph.from_edges(
            src[keep],
            dst[keep],
            self.num_nodes,
            edge_weight=None if weight is None else weight[keep],
        )

    def add_self_loops(self) -> Graph:
        """Exactly one edge ``v -> v`` per node: existing self-loops are removed first. In
        a weighted graph the new loops weigh 1."""
        src, dst, weight = self.remove_self_loops()._edges_by_id()
        loops = torch.arange(self.num_nodes, device=self.device)
        if weight is not None:
            weight = torch.cat([weight, weight.new_ones(self.num_nodes)])
        return Graph.from_edges(
            torch.cat([src, loops]), torch.cat([dst, loops]), self.num_nodes, edge_weight=weight
        )

    def _edges_by_id(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(src, dst, edge_weight)`` ordered by edge id (weight None if unweighted)."""
        src, dst = self.edges()
        order = torch.argsort(self.edge_ids)
        weight = None if self.edge_weight is None else self.edge_weight[order]
        return src[order], dst[order], weight

    def __repr__(self) -> str:
        weighted = "" if self.edge_weight is None else ", weighted"
        return (
            f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{weighted}, "
            f"device={self.device})"
        )


def _as_id_tensor(name: str, values: Any) -> torch.Tensor:
    if not isinstance(values, torch.Tensor):
        array = np.asarray(values)
        if array.dtype.kind not in "iu" and array.size:
            raise TypeError(f"{name} must hold integer node ids, got dtype {array.dtype}")
        if array.ndim != 1:
            raise ValueError(f"{name} must be 1-dimensional, got shape {array.shape}")
        values = torch.from_numpy(array.astype(np.int64, copy=False))
    return check_node_id_vector(name, values).to(torch.int64)
