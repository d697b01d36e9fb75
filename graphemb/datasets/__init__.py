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

from graphemb.datasets import planetoid
from graphemb.datasets.planetoid import *  # noqa: F403  (its names are listed once, there)
from graphemb.datasets.synthetic import SyntheticGraph, stochastic_block_model

__all__ = [*planetoid.__all__, "SyntheticGraph", "stochastic_block_model"]
