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
from typing import TypeVar

import numpy as np
import torch

from .._checks import as_size
from .graphs import EdgeCount, NodeSplits, symmetric_simple_edges

__all__ = [
    "MultiLabelGraph",
    "SyntheticGraph",
    "overlapping_communities",
    "stochastic_block_model",
]

_MAX_NODES = 2**31


@dataclass(frozen=True, eq=False, repr=False)
class _PlantedGraph(EdgeCount):
    """The fields of a generated graph whose labels are its planted communities.

    Attributes
    ----------
    name : str
        The generator's name.
    num_nodes : int
        Number of nodes ``N``.
    num_classes : int
        Number of communities ``C``.
    labels : torch.Tensor
        The communities of every node (shape and dtype: see the subclass).
    src, dst : torch.Tensor
        ``int64 [E]`` directed edge list: every undirected edge in both directions,
        no self loops, no duplicates, sorted by ``(src, dst)``.
    """

    name: str
    num_nodes: int
    num_classes: int
    labels: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, num_nodes={self.num_nodes}, "
            f"num_edges={self.num_edges}, num_classes={self.num_classes}{self._repr_extra()})"
        )

    def _repr_extra(self) -> str:
        return ""


@dataclass(frozen=True, eq=False, repr=False)
class SyntheticGraph(_PlantedGraph, NodeSplits):
    """A generated graph whose node labels are its planted communities, with a node split.

    Field names match :class:`~graphemb.datasets.PlanetoidDataset`, so code written for
    one runs on the other. ``name``, ``num_nodes``, ``num_classes``, ``src``, ``dst`` as in
    every generated graph; ``name`` is ``"sbm"``.

    Attributes
    ----------
    labels : torch.Tensor
        ``int64 [N]`` community of every node, in ``[0, C)``.
    train_idx, val_idx, test_idx : torch.Tensor
        ``int64`` sorted, disjoint node ids; together they cover every node.
    features : None
        Synthetic graphs carry no node features (learn embeddings instead).
    """

    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor
    features: None = None

    def _repr_extra(self) -> str:
        return (
            f", train/val/test={self.train_idx.numel()}/{self.val_idx.numel()}/"
            f"{self.test_idx.numel()}"
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
    heads, tails = _block_edges(rng, labels, num_communities, avg_degree, intra_fraction)
    train_idx, val_idx, test_idx = _random_split(rng, num_nodes, train_fraction, val_fraction)
    return _planted(
        SyntheticGraph, "sbm", labels, num_communities, heads, tails,
        train_idx=train_idx, val_idx=val_idx, test_idx=test_idx,
    )  # fmt: skip


_Planted = TypeVar("_Planted", bound=_PlantedGraph)


def _planted(
    kind: type[_Planted],
    name: str,
    labels: np.ndarray,
    num_communities: int,
    heads: np.ndarray,
    tails: np.ndarray,
    **fields: torch.Tensor,
) -> _Planted:
    """A generated graph of class ``kind``: the drawn edges ``heads -> tails`` made
    symmetric and simple, ``labels`` and the other ``fields`` as its tensors."""
    src, dst = symmetric_simple_edges(heads, tails)
    return kind(
        name=name,
        num_nodes=len(labels),
        num_classes=num_communities,
        labels=torch.from_numpy(labels),
        src=torch.from_numpy(src),
        dst=torch.from_numpy(dst),
        **fields,
    )


def _block_edges(
    rng: np.random.Generator,
    labels: np.ndarray,
    num_communities: int,
    avg_degree: float,
    intra_fraction: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The drawn edges ``(heads, tails)`` of :func:`stochastic_block_model`: a uniform head;
    with probability ``intra_fraction`` a uniform tail in its community, else a uniform
    tail in the others."""
    num_nodes = len(labels)
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
    return heads, members[position]


def _check_arguments(
    num_nodes: int,
    num_communities: int,
    avg_degree: float,
    intra_fraction: float,
    train_fraction: float,
    val_fraction: float,
) -> tuple[int, int]:
    """The sizes as Python ints; ValueError naming the first bad argument."""
    num_nodes, num_communities = _checked_graph_arguments(
        num_nodes, num_communities, avg_degree, intra_fraction
    )
    if not 0.0 <= train_fraction <= 1.0:
        raise ValueError(f"train_fraction must be in [0, 1], got {train_fraction!r}")
    if not 0.0 <= val_fraction <= 1.0 - train_fraction + 1e-9:  # slack for float sums
        raise ValueError(
            f"val_fraction must be in [0, 1 - train_fraction = {1.0 - train_fraction}], "
            f"got {val_fraction!r}"
        )
    return num_nodes, num_communities


def _checked_graph_arguments(
    num_nodes: int, num_communities: int, avg_degree: float, intra_fraction: float
) -> tuple[int, int]:
    """What both generators take: the sizes as Python ints; ValueError naming the first bad
    argument."""
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
    return num_nodes, num_communities


def _random_split(
    rng: np.random.Generator, num_nodes: int, train_fraction: float, val_fraction: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The train, validation and test nodes (sorted) of a random permutation."""
    order = rng.permutation(num_nodes)
    num_train = int(round(train_fraction * num_nodes))
    num_val = min(int(round(val_fraction * num_nodes)), num_nodes - num_train)
    train, val, test = np.split(order.astype(np.int64), [num_train, num_train + num_val])
    return (
        torch.from_numpy(np.sort(train)),
        torch.from_numpy(np.sort(val)),
        torch.from_numpy(np.sort(test)),
    )


@dataclass(frozen=True, eq=False, repr=False)
class MultiLabelGraph(_PlantedGraph):
    """A generated graph whose nodes carry several labels (their communities).

    ``name`` (``"overlapping"``), ``num_nodes``, ``num_classes``, ``src``, ``dst`` as in
    every generated graph.

    Attributes
    ----------
    labels : torch.Tensor
        ``bool [N, C]``: ``labels[i, c]`` when node ``i`` is a member of community ``c``.
        Every node has at least one label.
    """


def overlapping_communities(
    num_nodes: int = 10_000,
    num_communities: int = 40,
    avg_degree: float = 20.0,
    intra_fraction: float = 0.4,
    *,
    degree_exponent: float = 2.5,
    size_exponent: float = 1.0,
    mean_memberships: float = 1.6,
    seed: int = 0,
) -> MultiLabelGraph:
    """A multi-label graph: overlapping communities, power-law degrees, rare labels.

    A degree-corrected stochastic block model with overlapping memberships, in the spirit
    of the social networks of the DeepWalk benchmarks (BlogCatalog, Flickr):

    * community ``c`` has popularity ``(c + 1) ** -size_exponent`` (Zipf): the first
      labels are common, the last ones rare;
    * node ``i`` joins ``1 + Poisson(mean_memberships - 1)`` distinct communities drawn by
      popularity (its labels);
    * node ``i`` has a propensity ``theta_i`` from a Pareto law with tail exponent
      ``degree_exponent`` (degrees follow the same power law);
    * ``round(num_nodes * avg_degree / 2)`` edges: with probability ``intra_fraction`` a
      community is drawn by its total propensity and both ends inside it by ``theta``;
      otherwise both ends anywhere by ``theta`` (background noise). Then symmetrised,
      self loops and duplicates removed (hubs lose a few repeated edges).

    All randomness comes from ``numpy.random.default_rng(seed)``; vectorised (a million
    nodes in seconds).

    Parameters
    ----------
    num_nodes : int
        Number of nodes ``N`` (>= 1).
    num_communities : int
        Number of labels ``C``, ``1 <= C <= N``.
    avg_degree : float
        Target mean number of neighbours (>= 0).
    intra_fraction : float
        Fraction of edges drawn inside a community, in ``[0, 1]``.
    degree_exponent : float
        Tail exponent of the degree distribution (> 1; 2 to 3 is typical of social
        networks).
    size_exponent : float
        Zipf exponent of community popularity (>= 0; 0 gives equal sizes).
    mean_memberships : float
        Mean number of labels per node (>= 1).
    seed : int
        Seed of everything.

    Returns
    -------
    MultiLabelGraph
        ``labels`` ``bool [N, C]``, edges ``src, dst`` ``int64 [E]``.

    Examples
    --------
    >>> g = overlapping_communities(2_000, 20, seed=0)
    >>> g.labels.shape, bool(g.labels.any(1).all())
    (torch.Size([2000, 20]), True)
    >>> counts = g.labels.sum(0)
    >>> bool(counts[0] > 5 * counts[-1])                    # common and rare labels
    True
    """
    num_nodes, num_communities = _checked_graph_arguments(
        num_nodes, num_communities, avg_degree, intra_fraction
    )
    _check_overlap_arguments(num_communities, degree_exponent, size_exponent, mean_memberships)
    rng = np.random.default_rng(seed)
    labels = _memberships(rng, num_nodes, num_communities, size_exponent, mean_memberships)
    # Pareto propensities: P(theta > x) = x ** -(degree_exponent - 1), x >= 1.
    theta = rng.random(num_nodes) ** (-1.0 / (degree_exponent - 1.0))
    heads, tails = _degree_corrected_edges(rng, labels, theta, avg_degree, intra_fraction)
    return _planted(MultiLabelGraph, "overlapping", labels, num_communities, heads, tails)


def _check_overlap_arguments(
    num_communities: int, degree_exponent: float, size_exponent: float, mean_memberships: float
) -> None:
    """ValueError naming the first bad one of :func:`overlapping_communities`' own arguments."""
    if not degree_exponent > 1.0:
        raise ValueError(f"degree_exponent must be > 1, got {degree_exponent!r}")
    if not size_exponent >= 0.0:
        raise ValueError(f"size_exponent must be >= 0, got {size_exponent!r}")
    if not 1.0 <= mean_memberships <= num_communities:
        raise ValueError(
            f"mean_memberships must be in [1, num_communities={num_communities}], "
            f"got {mean_memberships!r}"
        )


def _memberships(
    rng: np.random.Generator,
    num_nodes: int,
    num_communities: int,
    size_exponent: float,
    mean_memberships: float,
) -> np.ndarray:
    """``bool [N, C]`` labels: 1 + Poisson extra communities per node, drawn by (Zipf)
    popularity. Repeats collapse, so a node has at least one and at most C labels."""
    popularity = np.arange(1, num_communities + 1, dtype=np.float64) ** -size_exponent
    popularity /= popularity.sum()
    per_node = 1 + rng.poisson(mean_memberships - 1.0, size=num_nodes)
    per_node = np.minimum(per_node, num_communities)
    member_node = np.repeat(np.arange(num_nodes, dtype=np.int64), per_node)
    member_community = rng.choice(num_communities, size=member_node.size, p=popularity)
    labels = np.zeros((num_nodes, num_communities), dtype=bool)
    labels[member_node, member_community] = True
    return labels


def _degree_corrected_edges(
    rng: np.random.Generator,
    labels: np.ndarray,
    theta: np.ndarray,
    avg_degree: float,
    intra_fraction: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The drawn edges ``(heads, tails)`` of :func:`overlapping_communities`: with
    probability ``intra_fraction`` both ends inside a community drawn by its total
    propensity, else both anywhere; every end drawn by the propensities ``theta``."""
    num_nodes, num_communities = labels.shape
    # Memberships grouped by community, with cumulative propensity: drawing a uniform
    # number in community c's span of the cumulative sum picks a member by theta.
    member_node, member_community = np.nonzero(labels)
    order = np.argsort(member_community, kind="stable")
    member_node, member_community = member_node[order], member_community[order]
    weight = theta[member_node]
    cumulative = np.cumsum(weight)
    end = cumulative[np.searchsorted(member_community, np.arange(num_communities), "right") - 1]
    start = end - np.bincount(member_community, weights=weight, minlength=num_communities)

    num_draws = int(round(num_nodes * avg_degree / 2))
    inside = rng.random(num_draws) < intra_fraction
    num_inside = int(inside.sum())
    community = rng.choice(num_communities, size=num_inside, p=(end - start) / (end - start).sum())

    def inside_ends() -> np.ndarray:
        u = start[community] + rng.random(num_inside) * (end - start)[community]
        slot = np.searchsorted(cumulative, u, side="right").clip(max=cumulative.size - 1)
        return member_node[slot].astype(np.int64)

    node_cumulative = np.cumsum(theta)

    def anywhere_ends(count: int) -> np.ndarray:
        u = rng.random(count) * node_cumulative[-1]
        slot = np.searchsorted(node_cumulative, u, side="right").clip(max=num_nodes - 1)
        return slot.astype(np.int64)

    num_outside = num_draws - num_inside
    heads = np.concatenate([inside_ends(), anywhere_ends(num_outside)])
    tails = np.concatenate([inside_ends(), anywhere_ends(num_outside)])
    return heads, tails
