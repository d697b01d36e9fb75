"""Synthetic graphs with planted communities, for tests and scaling benchmarks.

Example
-------
>>> from graphemb.datasets import stochastic_block_model
>>> g = stochastic_block_model(1_000, num_communities=4, avg_degree=8.0, seed=0)
>>> g.num_nodes, g.num_classes, g.labels.shape
(1000, 4, torch.Size([1000]))
>>> bool((g.src != g.dst).all())
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._checks import as_size
from .graphs import NodeSplits, symmetric_simple_edges

__all__ = ["SyntheticGraph", "stochastic_block_model"]

_MAX_NODES = 2**31


@dataclass(frozen=True, eq=False, repr=False)
class SyntheticGraph(NodeSplits):
    """A generated graph whose node labels are its planted communities.

    Field names match :class:`~graphemb.datasets.PlanetoidDataset`, so code written for
    one runs on the other.

    Attributes
    ----------
    name : str
        ``"sbm"``.
    num_nodes : int
        Number of nodes ``N``.
    num_classes : int
        Number of communities ``C``; ``labels`` take values in ``[0, C)``.
    labels : torch.Tensor
        ``int64 [N]`` community of every node.
    src, dst : torch.Tensor
        ``int64 [E]`` directed edge list: every undirected edge in both directions,
        no self loops, no duplicates, sorted by ``(src, dst)``.
    train_idx, val_idx, test_idx : torch.Tensor
        ``int64`` sorted, disjoint node ids; together they cover every node.
    features : None
        Synthetic graphs carry no node features (learn embeddings instead).
    """

    name: str
    num_nodes: int
    num_classes: int
    labels: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor
    features: None = None

    def __repr__(self) -> str:
        return (
            f"SyntheticGraph(name={self.name!r}, num_nodes={self.num_nodes}, "
            f"num_edges={self.num_edges}, num_classes={self.num_classes}, train/val/test="
            f"{self.train_idx.numel()}/{self.val_idx.numel()}/{self.test_idx.numel()})"
        )


def stochastic_block_model(
    num_nodes: int,
    num_communities: int,
    avg_degree: float = 10.0,
    intra_fraction: float = 0.8,
    *,
    seed: int = 0,
    train_fraction: float = 0.1,
    val_fraction: float = 0.1,
) -> SyntheticGraph:
    """Generate a graph with planted communities, vectorised (millions of nodes in seconds).

    Nodes are split into ``num_communities`` communities of equal size (sizes differ by
    at most one; membership is random). ``round(num_nodes * avg_degree / 2)`` edges are
    drawn: each has a uniformly random source node; with probability ``intra_fraction``
    its other end is uniform inside the source's community, otherwise uniform among the
    nodes of all *other* communities. The edges are then symmetrised and self loops
    and duplicate edges removed, so the realised average degree is slightly below
    ``avg_degree``, by a relative ``O(avg_degree * num_communities / num_nodes)``.

    All randomness comes from ``numpy.random.default_rng(seed)`` (PCG64), never from
    torch or global state: the same arguments give the identical graph on every run,
    and the same graph under numpy 1.26 and 2.x (checked) whatever the torch version.

    Parameters
    ----------
    num_nodes : int
        Number of nodes ``N`` (>= 1; sizes may be numpy integers or 0-d integer tensors).
    num_communities : int
        Number of communities ``C``, ``1 <= C <= N``. With ``C == 1`` every edge is
        inside the single community.
    avg_degree : float
        Target mean number of neighbours per node (>= 0).
    intra_fraction : float
        Expected fraction of edges inside a community, in ``[0, 1]``. Values well
        above ``1 / C`` give assortative (homophilous) graphs.
    seed : int
        Seed for communities, edges and splits.
    train_fraction, val_fraction : float
        Fractions of nodes in the train and validation splits (rounded to whole
        nodes); the remaining nodes form the test split.

    Returns
    -------
    SyntheticGraph
        ``labels`` ``int64 [N]``, edge list ``src, dst`` ``int64 [E]``, and the splits.

    Raises
    ------
    ValueError
        An argument is out of range (the message names it and its value).

    Examples
    --------
    >>> g = stochastic_block_model(10_000, 5, avg_degree=10.0, intra_fraction=0.9, seed=1)
    >>> same = (g.labels[g.src] == g.labels[g.dst]).double().mean().item()
    >>> abs(same - 0.9) < 0.01
    True
    """
    num_nodes, num_communities = _check_arguments(
        num_nodes, num_communities, avg_degree, intra_fraction, train_fraction, val_fraction
    )
    rng = np.random.default_rng(seed)

    # Balanced, randomly placed communities. int64 throughout, also where numpy's
    # default integer is 32-bit: edge keys are (src << 32) | dst.
    labels = rng.permutation(num_nodes).astype(np.int64) % num_communities
    # Nodes grouped by community: community c is members[offsets[c] : offsets[c] + sizes[c]].
    members = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=num_communities)
    offsets = np.cumsum(sizes) - sizes

    num_draws = int(round(num_nodes * avg_degree / 2))
    heads = rng.integers(0, num_nodes, size=num_draws, dtype=np.int64)
    head_community = labels[heads]
    head_size = sizes[head_community]
    head_offset = offsets[head_community]
    inside = rng.random(num_draws) < intra_fraction
    if num_communities == 1:
        inside[:] = True  # there is no other community to connect to

    # Inside: a uniform slot of the own community's block. Outside: a uniform slot among
    # the num_nodes - size other slots, i.e. skip over the own block.
    high = np.where(inside, head_size, num_nodes - head_size)
    slot = rng.integers(0, high, dtype=np.int64)
    outside_position = np.where(slot < head_offset, slot, slot + head_size)
    position = np.where(inside, head_offset + slot, outside_position)
    tails = members[position]

    src, dst = symmetric_simple_edges(heads, tails)
    train_idx, val_idx, test_idx = _random_split(rng, num_nodes, train_fraction, val_fraction)
    return SyntheticGraph(
        name="sbm",
        num_nodes=num_nodes,
        num_classes=num_communities,
        labels=torch.from_numpy(labels),
        src=torch.from_numpy(src),
        dst=torch.from_numpy(dst),
        train_idx=torch.from_numpy(train_idx),
        val_idx=torch.from_numpy(val_idx),
        test_idx=torch.from_numpy(test_idx),
    )


def _check_arguments(
    num_nodes: int,
    num_communities: int,
    avg_degree: float,
    intra_fraction: float,
    train_fraction: float,
    val_fraction: float,
) -> tuple[int, int]:
    """The sizes as Python ints; ValueError naming the first bad argument."""
    num_nodes = as_size("num_nodes", num_nodes, minimum=1)
    if num_nodes > _MAX_NODES:
        # Edges are deduplicated through the int64 key (src << 32) | dst.
        raise ValueError(f"num_nodes must be at most 2**31, got {num_nodes!r}")
    num_communities = as_size("num_communities", num_communities, minimum=1)
    if num_communities > num_nodes:
        raise ValueError(
            f"num_communities must be an integer in [1, num_nodes={num_nodes}], "
            f"got {num_communities!r}"
        )
    if not avg_degree >= 0:  # also rejects NaN
        raise ValueError(f"avg_degree must be >= 0, got {avg_degree!r}")
    if not 0.0 <= intra_fraction <= 1.0:
        raise ValueError(f"intra_fraction must be in [0, 1], got {intra_fraction!r}")
    if not 0.0 <= train_fraction <= 1.0:
        raise ValueError(f"train_fraction must be in [0, 1], got {train_fraction!r}")
    if not 0.0 <= val_fraction <= 1.0 - train_fraction + 1e-9:  # slack for float sums
        raise ValueError(
            f"val_fraction must be in [0, 1 - train_fraction = {1.0 - train_fraction}], "
            f"got {val_fraction!r}"
        )
    return num_nodes, num_communities


def _random_split(
    rng: np.random.Generator, num_nodes: int, train_fraction: float, val_fraction: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = rng.permutation(num_nodes)
    num_train = int(round(train_fraction * num_nodes))
    num_val = min(int(round(val_fraction * num_nodes)), num_nodes - num_train)
    train, val, test = np.split(order.astype(np.int64), [num_train, num_train + num_val])
    return np.sort(train), np.sort(val), np.sort(test)
