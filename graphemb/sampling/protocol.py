"""What a mini-batch sampler is: the interface :class:`~graphemb.sampling.SeedLoader` calls.

:class:`~graphemb.sampling.NeighborSampler` implements it; any object with the same
``sample_blocks`` (a layer-wise sampler, a full-neighbourhood one) can be handed to the
loader in its place.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from ..graph import Graph
from .block import Block

__all__ = ["Batch", "BlockSampler"]

Batch = tuple[torch.Tensor, torch.Tensor, list[Block]]
"""``(input_nodes, output_nodes, blocks)``: the nodes whose rows the first block reads (N_in,),
the seeds (N_out,), and the blocks, input layer first."""


@runtime_checkable
class BlockSampler(Protocol):
    """Samples the blocks of one mini-batch.

    ``sample_blocks(graph, seeds, generator)`` returns :data:`Batch`: ``input_nodes``
    (int64, the source nodes of ``blocks[0]``), ``output_nodes`` (int64, ``seeds`` in
    order) and ``blocks``, ``blocks[i].dst_nodes`` being ``blocks[i + 1].src_nodes``'
    first entries. All randomness comes from ``generator`` (or torch's default generator
    of the graph's device), so a seeded generator reproduces the batch.

    Examples
    --------
    >>> from graphemb.sampling import BlockSampler, NeighborSampler
    >>> isinstance(NeighborSampler([5, 5]), BlockSampler)
    True
    """

    def sample_blocks(
        self, graph: Graph, seeds: torch.Tensor, generator: torch.Generator | None = None
    ) -> Batch: ...
