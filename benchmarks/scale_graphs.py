"""The generated graphs of ``bench_deepwalk_scale.py``: planted partitions of 10k to 10M
nodes, drawn straight into one edge table and built into CSC arrays in its memory.

A graph of ``N`` nodes and average degree ``degree`` has ``E = N * degree / 2`` undirected
edges among ``B`` blocks of ``S = N / B`` nodes. A node's *pre-id* ``k`` names its block
``k // S`` and its rank ``k % S`` inside it; an edge joins two ends drawn as

* the first end: a block uniform over the ``B`` blocks, then a rank;
* the second: the first end's block with probability ``inside``, else a block uniform over
  all ``B``; then a rank;

a rank uniform over ``[0, S)`` for the ``uniform`` shape, and for ``powerlaw`` the integer
part of a continuous draw with density proportional to ``x ** -EXPONENT`` on ``[1, S + 1)``
(less one): every block has the same expected degrees, falling as ``rank ** -EXPONENT``,
a degree tail of exponent ``1 + 1 / EXPONENT`` (about 2.7) up to about ``S ** EXPONENT``
times the lightest rank's. Node ``k`` gets the id ``(k * MULTIPLIER) mod N`` (a
permutation: the multiplier is a prime that divides no size used here), so that the ids
of a block, and of the heavy ranks, are spread over the tables as a real graph's are.
Labels are the blocks: a node's label is ``k // S``.

Each end is drawn into the table's own memory a block of edges at a time, and
:meth:`graphemb.graph.Graph.from_edge_table_in_place` turns the table into the graph's
``edge_ids``: generating and building the graph allocates only its ``indices`` beside the
table (10M nodes, 100M edges: 3.3 GB in all).
"""

from __future__ import annotations

import torch

from graphemb.graph import Graph

#: Shapes of :func:`planted_graph`.
SHAPES = ("uniform", "powerlaw")

#: Ranks of ``powerlaw`` have density proportional to ``x ** -EXPONENT``.
EXPONENT = 0.6

#: Node ``k``'s id is ``(k * MULTIPLIER) mod N`` (a prime, so a permutation for every N it
#: does not divide).
MULTIPLIER = 2_654_435_761

#: Edges drawn at a time (their float64 and int64 temporaries: 32 MiB each).
_BLOCK = 1 << 22


def node_ids(pre_ids: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """The ids of the nodes of pre-ids ``pre_ids`` (int64)."""
    if num_nodes % MULTIPLIER == 0:
        raise ValueError(f"{num_nodes} nodes: the id permutation needs N not a multiple of it")
    return pre_ids * (MULTIPLIER % num_nodes) % num_nodes


def _ranks(count: int, size: int, shape: str, generator: torch.Generator) -> torch.Tensor:
    """``count`` ranks in ``[0, size)`` of the shape's distribution (int64)."""
    if shape == "uniform":
        return torch.randint(size, (count,), generator=generator)
    u = torch.rand(count, dtype=torch.float64, generator=generator)
    power = 1.0 - EXPONENT  # inverse CDF of x ** -EXPONENT on [1, size + 1)
    x = ((float(size + 1) ** power - 1.0) * u + 1.0) ** (1.0 / power)
    return x.long().sub_(1).clamp_(0, size - 1)


def planted_graph(
    num_nodes: int, degree: float, shape: str, *, blocks: int, inside: float, seed: int
) -> tuple[Graph, int]:
    """The undirected planted-partition graph of the module's docstring.

    Returns
    -------
    graph : Graph
        Built with both directions of every edge (self-loops once).
    edges : int
        Its undirected edges ``E`` (the table's columns).
    """
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
    if num_nodes % blocks:
        raise ValueError(f"{num_nodes} nodes do not split into {blocks} blocks")
    size, count = num_nodes // blocks, int(num_nodes * degree / 2)
    generator = torch.Generator().manual_seed(seed)
    table = torch.empty(2, count, dtype=torch.int64)
    for start in range(0, count, _BLOCK):
        n = min(_BLOCK, count - start)
        first = torch.randint(blocks, (n,), generator=generator)
        moved = torch.rand(n, generator=generator) >= inside
        second = torch.where(moved, torch.randint(blocks, (n,), generator=generator), first)
        for row, block in ((0, first), (1, second)):
            pre = block.mul_(size).add_(_ranks(n, size, shape, generator))
            table[row, start : start + n] = node_ids(pre, num_nodes)
    return Graph.from_edge_table_in_place(table, num_nodes), count


def labels(num_nodes: int, blocks: int) -> torch.Tensor:
    """Every node's block, in node-id order (int64 of shape (N,))."""
    pre = torch.arange(num_nodes)
    out = torch.empty(num_nodes, dtype=torch.int64)
    out[node_ids(pre, num_nodes)] = pre // (num_nodes // blocks)
    return out


def graph_bytes(graph: Graph) -> int:
    """Bytes of the graph's arrays (indptr, indices, edge ids, weights)."""
    arrays = [graph.indptr, graph.indices, graph.edge_ids, graph.edge_weight]
    return sum(a.numel() * a.element_size() for a in arrays if a is not None)
