"""What the models accept as their message-flow graphs: sampled blocks, or a whole graph."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..graph import Graph
from ..sampling.block import Block

__all__ = ["full_block", "as_blocks"]


def full_block(graph: Graph) -> Block:
    """The whole graph as one block: every node is a source and a destination.

    Parameters
    ----------
    graph : Graph
        ``N`` nodes, ``E`` edges.

    Returns
    -------
    Block
        ``src_nodes = arange(N)`` (so ``dst_nodes`` too), the ``E`` edges in local ids, which
        here are the global ids, sorted by destination (the graph's CSC order), on
        ``graph.device``.

    Examples
    --------
    >>> import torch
    >>> from graphemb.graph import Graph
    >>> from graphemb.nn import full_block
    >>> block = full_block(Graph.from_edges(torch.tensor([0, 1]), torch.tensor([2, 2]), 3))
    >>> block.num_src_nodes, block.num_dst_nodes, block.edge_index.tolist()
    (3, 3, [[0, 1], [2, 2]])
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"expected a graphemb Graph, got {type(graph).__name__}")
    src, dst = graph.edges()  # grouped by destination: the order Block wants
    nodes = torch.arange(graph.num_nodes, device=graph.device)
    return Block(nodes, graph.num_nodes, torch.stack([src, dst]), graph.edge_ids)


def as_blocks(blocks: Sequence[Block] | Graph, num_layers: int) -> list[Block]:
    """``num_layers`` blocks, checked: sampled ones as given, or a whole graph for every layer.

    Parameters
    ----------
    blocks : sequence of Block, or Graph
        One block per layer, ``blocks[0]`` the outermost (its source nodes are the input
        nodes), ``blocks[-1]`` the innermost (its destination nodes are the seeds), each
        block's source nodes being the previous block's destination nodes; or a whole
        :class:`~graphemb.graph.Graph` (full-neighbourhood inference over every node).
    num_layers : int
        How many layers the model has.

    Returns
    -------
    list of Block, of length ``num_layers``.
    """
    if isinstance(blocks, Graph):
        return [full_block(blocks)] * num_layers
    if isinstance(blocks, Block) or not isinstance(blocks, Sequence):
        raise TypeError(
            "expected a list of graphemb Blocks (one per layer) or a Graph, got "
            f"{type(blocks).__name__}"
        )
    blocks = list(blocks)
    for index, block in enumerate(blocks):
        if not isinstance(block, Block):
            raise TypeError(f"blocks[{index}] is a {type(block).__name__}, not a graphemb Block")
    if len(blocks) != num_layers:
        raise ValueError(
            f"the model has {num_layers} layers but got {len(blocks)} blocks: give the sampler "
            f"{num_layers} fanouts"
        )
    for index in range(1, num_layers):
        # Sizes only: comparing the ids themselves would cost a device sync per layer.
        if blocks[index].num_src_nodes != blocks[index - 1].num_dst_nodes:
            raise ValueError(
                f"blocks do not chain: blocks[{index}] has {blocks[index].num_src_nodes} source "
                f"nodes but blocks[{index - 1}] has {blocks[index - 1].num_dst_nodes} destination "
                "nodes (each block's sources are the previous block's destinations)"
            )
    return blocks
