"""Graphs already in memory: networkx graphs and PyTorch Geometric ``Data``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .labels import NodeLabels
from .loaded_graph import LoadedGraph, graph_from_edge_ids

__all__ = ["from_networkx", "from_pyg"]


def from_networkx(nx_graph: Any, *, weight: str | None = "weight") -> LoadedGraph:
    """A :class:`LoadedGraph` from a networkx graph with any node names.

    Parameters
    ----------
    nx_graph : networkx.Graph, DiGraph, MultiGraph or MultiDiGraph
        Node ``i`` is the ``i``-th node of ``nx_graph.nodes`` (isolated ones included). An
        undirected graph gives both directions of every edge (a self-loop once), parallel
        edges are kept.
    weight : str or None
        Edge attribute holding the weight (missing on an edge: 1). None, or no edge
        having it: no weights.

    Returns
    -------
    LoadedGraph
        ``node_names`` the networkx nodes (as str unless all are integers).
    """
    if not hasattr(nx_graph, "is_directed") or not hasattr(nx_graph, "nodes"):
        raise TypeError(f"expected a networkx graph, got {type(nx_graph).__name__}")
    nodes = list(nx_graph.nodes)
    ids = {node: i for i, node in enumerate(nodes)}
    edges = list(nx_graph.edges(data=weight if weight is not None else False))
    src = np.array([ids[e[0]] for e in edges], dtype=np.int64)
    dst = np.array([ids[e[1]] for e in edges], dtype=np.int64)
    weights = None
    if weight is not None and any(e[2] is not None for e in edges):
        weights = np.array([1.0 if e[2] is None else e[2] for e in edges], dtype=np.float64)
    graph, weight_tensor = graph_from_edge_ids(
        src, dst, len(nodes), directed=nx_graph.is_directed(), weights=weights
    )
    return LoadedGraph(graph, _names(nodes), weight_tensor)


def from_pyg(data: Any, *, directed: bool = True) -> LoadedGraph:
    """A :class:`LoadedGraph` from a PyTorch Geometric ``Data`` object.

    Parameters
    ----------
    data : torch_geometric.data.Data
        ``edge_index`` (2, E); optional ``x`` (N, F) features, ``y`` labels ((N,) class
        ids, negative for unlabelled, or an (N, C) 0/1 matrix), ``edge_weight`` (E,) or
        else a one-dimensional ``edge_attr`` (E,): the edge weights.
    directed : bool
        True (default): the edges as stored (PyG stores both directions of an undirected
        graph). False: every edge also gets its reverse.

    Returns
    -------
    LoadedGraph
        Node names ``0 .. N-1``; ``features`` from ``x``, ``labels`` from ``y``.
    """
    edge_index = getattr(data, "edge_index", None)
    if (
        not isinstance(edge_index, torch.Tensor)
        or edge_index.dim() != 2
        or edge_index.shape[0] != 2
    ):
        shape = None if edge_index is None else tuple(getattr(edge_index, "shape", ()))
        raise ValueError(f"data.edge_index must be a tensor of shape (2, E), got {shape}")
    count = int(data.num_nodes)
    weight = getattr(data, "edge_weight", None)
    attr = getattr(data, "edge_attr", None)
    if weight is None and isinstance(attr, torch.Tensor) and attr.dim() == 1:
        weight = attr
    graph, weights = graph_from_edge_ids(
        edge_index[0].cpu(),
        edge_index[1].cpu(),
        count,
        directed=directed,
        weights=None if weight is None else weight.cpu(),
    )
    labels = None
    y = getattr(data, "y", None)
    if y is not None:
        y = y.cpu()
        labels = NodeLabels.from_indicator(y) if y.dim() == 2 else NodeLabels.from_classes(y)
    x = getattr(data, "x", None)
    return LoadedGraph(
        graph, np.arange(count, dtype=np.int64), weights, labels, None if x is None else x.cpu()
    )


def _names(nodes: list[Any]) -> np.ndarray:
    if nodes and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in nodes):
        return np.array(nodes, dtype=np.int64)
    return np.array([str(n) for n in nodes], dtype=str)
