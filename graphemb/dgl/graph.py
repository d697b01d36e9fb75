"""A ``DGLGraph`` from a :mod:`graphemb.datasets` dataset."""

from __future__ import annotations

from typing import Any

import dgl
import torch

__all__ = ["to_dgl_graph"]


def to_dgl_graph(
    dataset: Any,
    *,
    normalize_features: bool = True,
    add_self_loops: bool = False,
) -> dgl.DGLGraph:
    """Build a ``DGLGraph`` with the dataset's edges, features, labels and split masks.

    Works with any object with the fields of :mod:`graphemb.datasets` datasets
    (:class:`~graphemb.datasets.PlanetoidDataset`, :class:`~graphemb.datasets.SyntheticGraph`).

    Parameters
    ----------
    dataset : object
        With ``src``, ``dst`` (int64, shape (E,)), ``num_nodes`` ``N``, ``labels`` (int64,
        shape (N,)), ``train_idx``, ``val_idx``, ``test_idx`` and ``features`` (float,
        shape (N, F), or ``None``).
    normalize_features : bool
        Scale every feature row to sum to 1 (the GCN/Planetoid preprocessing); all-zero
        rows stay zero.
    add_self_loops : bool
        Add an edge ``v -> v`` to every node (GCN-style aggregators want them; SAGEConv's
        mean aggregator keeps the node itself apart and does not).

    Returns
    -------
    DGLGraph
        ``N`` nodes, the dataset's directed edges, and ``ndata``: ``"label"`` (int64, (N,)),
        ``"train_mask"``, ``"val_mask"``, ``"test_mask"`` (bool, (N,)) and, when the
        dataset has features, ``"feat"`` (float32, (N, F)).

    Examples
    --------
    >>> from graphemb.datasets import stochastic_block_model
    >>> from graphemb.dgl import to_dgl_graph
    >>> g = to_dgl_graph(stochastic_block_model(100, num_communities=2, seed=0))
    >>> g.num_nodes(), sorted(g.ndata.keys())
    (100, ['label', 'test_mask', 'train_mask', 'val_mask'])
    """
    num_nodes = int(dataset.num_nodes)
    graph = dgl.graph((dataset.src, dataset.dst), num_nodes=num_nodes, idtype=torch.int64)
    if add_self_loops:
        graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
    graph.ndata["label"] = torch.as_tensor(dataset.labels, dtype=torch.int64)
    for split in ("train", "val", "test"):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[torch.as_tensor(getattr(dataset, f"{split}_idx"), dtype=torch.int64)] = True
        graph.ndata[f"{split}_mask"] = mask
    features = getattr(dataset, "features", None)
    if features is not None:
        features = torch.as_tensor(features, dtype=torch.float32)
        if normalize_features:
            features = features / features.sum(dim=1, keepdim=True).clamp_min(1e-12)
        graph.ndata["feat"] = features
    return graph
