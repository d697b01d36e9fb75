"""The graphs of ``bench_deepwalk_quality.py``: named shapes and their labels.

A name is ``kind[:arg[:arg...]]``; every generator takes the seed of the run, so each seed
is a new draw of the same shape. ``PANEL`` lists the default panel: sizes from 500 to 100k
nodes, average degree from 2 to 100, a hub adjacent to 80 % of the nodes, weighted edges,
hundreds of components, binary, many-class and multi-label labels.

========================  =======================================================
name                      shape
========================  =======================================================
``cora``, ``citeseer``    Planetoid citation graphs, their classes
``overlapping[:N[:C]]``   multi-label, overlapping communities, power-law degrees
                          (:func:`graphemb.datasets.synthetic.overlapping_communities`)
``sbm:N:C:degree:intra``  stochastic block model, ``intra`` of the edges inside a class
``dense[:N[:C[:degree]]]``  block model with 30 % of edges inside (1000, 42, 32)
``hub[:N[:C[:share]]]``   block model (4000, 20, degree 10) plus node 0 joined to
                          ``share`` (0.7) of the nodes
``weighted:N:C:degree``   block model with 20 % of edges inside a class but those
                          edges 8x heavier on average (walks follow the weights)
``components:K:C``        ``K`` connected random graphs of 5 to 100 nodes; the label
                          of a node is its component's index modulo ``C``
========================  =======================================================
"""

from __future__ import annotations

import numpy as np
import torch

from graphemb.datasets.synthetic import overlapping_communities, stochastic_block_model
from graphemb.graph import Graph

#: The default panel of ``--graphs panel``.
PANEL = (
    "sbm:500:5:4:0.8",
    "sbm:20000:2:2:0.9",
    "dense",
    "sbm:2000:10:100:0.3",
    "hub:4000:20:0.8",
    "weighted:3000:15:20",
    "components:300:20",
    "overlapping",
    "cora",
    "sbm:100000:50:10:0.5",
)


def load(name: str, seed: int) -> tuple[Graph, np.ndarray]:
    """The graph ``name`` drawn with ``seed`` and its labels as a 0/1 matrix (N, C)."""
    kind, *parts = name.split(":")
    numbers = [float(p) for p in parts]
    if kind in ("cora", "citeseer"):
        from graphemb.datasets import load_planetoid

        data = load_planetoid(kind)
        graph = Graph.from_edges(data.src, data.dst, num_nodes=data.num_nodes)
        return graph, _one_hot(data.labels)
    if kind == "overlapping":
        nodes, classes = _defaults(numbers, 10_000, 40)
        data = overlapping_communities(int(nodes), int(classes), seed=seed)
        graph = Graph.from_edges(data.src, data.dst, num_nodes=data.num_nodes)
        return graph, data.labels.numpy()
    if kind in ("sbm", "dense"):
        nodes, classes, degree, intra = _defaults(numbers, 1000, 42, 32.0, 0.3)
        data = stochastic_block_model(int(nodes), int(classes), degree, intra, seed=seed)
        return Graph.from_edges(data.src, data.dst, num_nodes=int(nodes)), _one_hot(data.labels)
    if kind == "hub":
        return _hub_graph(*_defaults(numbers, 4000, 20, 0.7), seed=seed)
    if kind == "weighted":
        return _weighted_graph(*_defaults(numbers, 3000, 15, 20.0), seed=seed)
    if kind == "components":
        count, classes = _defaults(numbers, 300, 20)
        return _components_graph(int(count), int(classes), seed=seed)
    raise SystemExit(f"unknown graph {name!r} (see benchmarks/deepwalk_panel.py)")


def _defaults(given: list[float], *defaults: float) -> list[float]:
    return given + list(defaults[len(given) :])


def _one_hot(labels: torch.Tensor) -> np.ndarray:
    return np.eye(int(labels.max()) + 1, dtype=bool)[labels.numpy()]


def _hub_graph(nodes: float, classes: float, share: float, seed: int) -> tuple[Graph, np.ndarray]:
    data = stochastic_block_model(int(nodes), int(classes), 10.0, 0.7, seed=seed)
    rng = np.random.default_rng(seed)
    spokes = torch.from_numpy(rng.permutation(np.arange(1, int(nodes)))[: int(share * nodes)])
    hub = torch.zeros_like(spokes)
    src, dst = torch.cat([data.src, hub, spokes]), torch.cat([data.dst, spokes, hub])
    return Graph.from_edges(src, dst, num_nodes=int(nodes)), _one_hot(data.labels)


def _weighted_graph(
    nodes: float, classes: float, degree: float, seed: int
) -> tuple[Graph, np.ndarray]:
    """Few edges inside a class, but heavy ones: the classes show only through weights."""
    data = stochastic_block_model(int(nodes), int(classes), degree, 0.2, seed=seed)
    # One weight per undirected edge (both directions alike), from the pair's own hash.
    low, high = torch.minimum(data.src, data.dst), torch.maximum(data.src, data.dst)
    uniform = ((low * 1_000_003 + high) * 2_654_435_761 % 2**32).double() / 2**32
    inside = data.labels[data.src] == data.labels[data.dst]
    weight = torch.where(inside, 4.0 + 8.0 * uniform, 0.1 + 1.9 * uniform)
    graph = Graph.from_edges(data.src, data.dst, num_nodes=int(nodes), edge_weight=weight)
    return graph, _one_hot(data.labels)


def _components_graph(count: int, classes: int, seed: int) -> tuple[Graph, np.ndarray]:
    """``count`` components: each a ring (connected) plus random chords, 5 to 100 nodes."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 101, size=count)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    src, dst = [], []
    for start, size in zip(starts, sizes, strict=True):
        ring = np.arange(size)
        chords = rng.integers(0, size, size=(2, 2 * size))
        src += [ring + start, chords[0] + start]
        dst += [(ring + 1) % size + start, chords[1] + start]
    a, b = torch.from_numpy(np.concatenate(src)), torch.from_numpy(np.concatenate(dst))
    keep = a != b
    graph = Graph.from_edges(a[keep], b[keep], num_nodes=int(sizes.sum()), undirected=True)
    labels = torch.from_numpy(np.repeat(np.arange(count) % classes, sizes))
    return graph, _one_hot(labels)
