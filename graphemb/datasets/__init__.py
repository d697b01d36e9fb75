"""Datasets: Cora/CiteSeer with the public Planetoid split, and synthetic community graphs.

Both return objects with the same field names (``num_nodes``, ``num_classes``,
``labels``, ``src``, ``dst``, ``train_idx``, ``val_idx``, ``test_idx``, ``features``),
so examples run on either.

Example
-------
>>> from graphemb.datasets import load_planetoid, stochastic_block_model
>>> graph = stochastic_block_model(10_000, num_communities=8, seed=0)
>>> graph.labels.shape, graph.features is None
(torch.Size([10000]), True)
>>> cora = load_planetoid("cora")   # reads $GRAPHEMB_PLANETOID_DIR or the cache  # doctest: +SKIP
>>> cora.num_nodes, cora.num_edges  # doctest: +SKIP
(2708, 10556)
"""

from graphemb.datasets.planetoid import (
    CACHE_DIR_ENV,
    DEFAULT_PLANETOID_URL,
    PLANETOID_DIR_ENV,
    PLANETOID_NAMES,
    PLANETOID_URL_ENV,
    PlanetoidDataset,
    load_planetoid,
)
from graphemb.datasets.synthetic import SyntheticGraph, stochastic_block_model

__all__ = [
    "CACHE_DIR_ENV",
    "DEFAULT_PLANETOID_URL",
    "PLANETOID_DIR_ENV",
    "PLANETOID_NAMES",
    "PLANETOID_URL_ENV",
    "PlanetoidDataset",
    "SyntheticGraph",
    "load_planetoid",
    "stochastic_block_model",
]
