"""``LoadedGraph``: what a graph reader returns, and its construction from edge arrays."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .._checks import check_edge_weight, edge_weight_problem
from ..graph import Graph
from .errors import GraphFileError
from .labels import NodeLabels

__all__ = ["LoadedGraph", "graph_from_edge_ids", "refuse_bad_weights"]


@dataclass(frozen=True)
class LoadedGraph:
    """A graph read from a file or converted from another library, with its node names.

    Attributes
    ----------
    graph : Graph
        Nodes ``0 .. N-1``. An undirected input holds both directions of every edge.
    node_names : numpy array, shape (N,)
        ``node_names[i]`` is the original name of node ``i`` (int64 or str), for output
        such as :func:`graphemb.io.write_embeddings`.
    weights : Tensor of float64, shape (E,), optional
        Weight of each edge, indexed by edge id (``graph.edge_ids``); None when the input
        has none. ``graph.edge_weight`` holds the same weights in the graph's storage
        order (what weighted walks read).
    labels : NodeLabels, optional
        Node labels where the format carries them (``.mat`` ``group``, PyG ``y``).
    features : Tensor, shape (N, F), optional
        Node features where the format carries them (PyG ``x``).
    notes : tuple of str
        How the file was read, where the user may want to know (a line read as a header,
        self loops kept or dropped, duplicate edges merged); one line each, naming the file.
    """

    graph: Graph
    node_names: np.ndarray
    weights: torch.Tensor | None = None
    labels: NodeLabels | None = None
    features: torch.Tensor | None = None
    notes: tuple[str, ...] = ()

    @property
    def num_nodes(self) -> int:
        """Number of nodes ``N``: the rows of ``node_names``."""
        return self.graph.num_nodes

    @property
    def num_edges(self) -> int:
        """Number of stored (directed) edges ``E`` of ``graph``.

        An undirected file's edge is stored both ways and counts twice.
        """
        return self.graph.num_edges

    def __repr__(self) -> str:
        extras = [
            name
            for name, value in (
                ("weights", self.weights),
                ("labels", self.labels),
                ("features", self.features),
            )
            if value is not None
        ]
        return (
            f"LoadedGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}"
            + "".join(f", +{e}" for e in extras)
            + ")"
        )


def graph_from_edge_ids(
    src: np.ndarray | torch.Tensor,
    dst: np.ndarray | torch.Tensor,
    num_nodes: int,
    *,
    directed: bool,
    weights: np.ndarray | torch.Tensor | None = None,
    edge_table: torch.Tensor | None = None,
) -> tuple[Graph, torch.Tensor | None]:
    """The graph of edges ``src[i] -> dst[i]`` and its edge weights.

    Parameters
    ----------
    src, dst : int64 arrays or tensors, shape (E,)
        Node ids in ``[0, num_nodes)``.
    num_nodes : int
    directed : bool
        If False, every edge also gets its reverse (edge id ``E + j`` for the ``j``-th
        non-loop edge); a self-loop is stored once, as networkx's ``to_directed`` does.
    weights : float array or tensor, shape (E,), optional
        Finite and ``>= 0`` (else a ``ValueError`` naming the first bad one); the graph
        carries them as its ``edge_weight``.
    edge_table : Tensor of int64, shape (2, E), optional
        The memory that ``src`` and ``dst`` are the rows of, which the graph may take
        (overwriting it: see :meth:`Graph.from_edge_table_in_place`); used when undirected.

    Returns
    -------
    graph : Graph
    weights : Tensor of float64, shape (graph.num_edges,), or None
        Indexed by edge id.
    """
    src_t = torch.as_tensor(src, dtype=torch.int64)
    dst_t = torch.as_tensor(dst, dtype=torch.int64)
    weight_t = None
    if weights is not None:
        weight_t = check_edge_weight(torch.as_tensor(weights), src_t.numel()).to(torch.float64)
    if weight_t is not None and not directed:
        # The reverses' weights, taken before the build (which may overwrite the edges).
        loops = src_t == dst_t
        weight_t = torch.cat([weight_t, weight_t[~loops] if bool(loops.any()) else weight_t])
    if edge_table is not None and not directed:
        graph = Graph.from_edge_table_in_place(edge_table, num_nodes)
    else:
        graph = Graph.from_edges(src_t, dst_t, num_nodes, undirected=not directed)
    if weight_t is not None:  # checked above; by edge id -> storage order
        graph.edge_weight = weight_t[graph.edge_ids]
    return graph, weight_t


def refuse_bad_weights(
    path: str | os.PathLike[str],
    weights: np.ndarray | torch.Tensor | None,
    locate: Callable[[int], tuple[str, int | None]],
) -> None:
    """Raise :class:`GraphFileError` on the first NaN, infinite or negative weight, or
    when every weight is 0 (no weighted walk could take a step).

    Parameters
    ----------
    path : str or PathLike
        Named in the error.
    weights : float array or tensor, shape (E,), or None
        Weights in file order; None: nothing to check.
    locate : callable
        ``locate(i)`` gives the error's prefix and line for the ``i``-th weight: ``("",
        line)`` for text files, ``("entry (row, col): ", None)`` for matrices. Called only
        for a bad weight.
    """
    if weights is None:
        return
    tensor = torch.as_tensor(weights)
    problem = edge_weight_problem(tensor)
    if problem is not None:
        prefix, line = locate(problem[0])
        raise GraphFileError(path, prefix + problem[1], line)
    if tensor.numel() and not bool((tensor > 0).any()):
        raise GraphFileError(path, "every edge weight is 0: walks would have nowhere to go")
