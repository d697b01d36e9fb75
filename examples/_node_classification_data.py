"""The data of ``examples/node_classification.py``: a built-in dataset (Planetoid, a
synthetic community graph) or the user's graph file with labels, features and a random
split, as a :class:`NodeData` on one device."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import torch

from graphemb.datasets import load_planetoid, stochastic_block_model
from graphemb.graph import Graph


@dataclass
class NodeData:
    """A graph with what the training reads beside it, all on one device."""

    graph: Graph
    features: torch.Tensor | None  # float32 (N, F); None: no features
    labels: torch.Tensor  # int64 (N,), or (N, C) 0/1 for multi-label data
    splits: dict[str, torch.Tensor]  # "train", "val", "test": int64 node ids
    num_classes: int

    @property
    def multi_label(self) -> bool:
        return self.labels.dim() == 2

    @property
    def num_features(self) -> int:
        return 0 if self.features is None else int(self.features.shape[1])

    def to(self, device: torch.device) -> NodeData:
        return NodeData(
            self.graph.to(device),
            None if self.features is None else self.features.to(device),
            self.labels.to(device),
            {name: ids.to(device) for name, ids in self.splits.items()},
            self.num_classes,
        )


def load_data(args: argparse.Namespace, device: torch.device) -> NodeData:
    """The dataset of ``args`` as a :class:`NodeData` on ``device``."""
    if getattr(args, "graph", None) is not None:
        return load_graph_file(args).to(device)
    if args.dataset == "sbm":
        dataset: Any = stochastic_block_model(
            args.sbm_nodes, num_communities=args.sbm_communities, seed=args.seed
        )
        features = None
    else:
        dataset = load_planetoid(args.dataset)
        features = None if args.no_features else dataset.row_normalized_features()
    data = NodeData(
        Graph.from_dataset(dataset),
        features,
        dataset.labels,
        {"train": dataset.train_idx, "val": dataset.val_idx, "test": dataset.test_idx},
        dataset.num_classes,
    )
    return data.to(device)


def load_graph_file(args: argparse.Namespace) -> NodeData:
    """``--graph`` with its labels, features and a random split of the labelled nodes.

    Raises ValueError (or OSError) with the file, line and problem for bad input.
    """
    from graphemb.io import read_graph, read_labels, read_node_features

    loaded = read_graph(args.graph, args.graph_format, directed=args.directed)
    if args.labels is not None:
        labels = read_labels(args.labels, loaded.node_names)
    elif loaded.labels is not None:
        labels = loaded.labels
    else:
        raise ValueError(f"{args.graph} carries no labels: give them with --labels FILE")
    features = None
    if args.features is not None:
        features = read_node_features(args.features, loaded.node_names)
    fractions = [float(f) for f in args.split.split(",")]
    if len(fractions) != 2 or min(fractions) <= 0 or sum(fractions) >= 1:
        raise ValueError(f"--split needs two positive fractions summing to < 1, got {args.split}")
    labelled = labels.nodes
    order = labelled[
        torch.randperm(len(labelled), generator=torch.Generator().manual_seed(args.seed))
    ]
    num_train = int(round(fractions[0] * len(order)))
    num_val = int(round(fractions[1] * len(order)))
    splits = {
        "train": order[:num_train],
        "val": order[num_train : num_train + num_val],
        "test": order[num_train + num_val :],
    }
    empty = [name for name, ids in splits.items() if not len(ids)]
    if empty:
        raise ValueError(
            f"--split {args.split} of {len(order)} labelled nodes leaves no {empty[0]} node"
        )
    return NodeData(loaded.graph, features, labels.values, splits, labels.num_classes)
