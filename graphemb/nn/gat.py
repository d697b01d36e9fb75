"""GAT on PyG's ``GATConv``, with a learnable node embedding as (part of) its input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_positive_int, check_probability
from ..sampling.block import Block
from ._pyg import pyg_layer, require_pyg
from .stack import BlockGNN

require_pyg("GAT")  # here, a clear error; PyG itself is imported by the first model

__all__ = ["GAT"]


class GAT(BlockGNN):
    """Graph attention network (Velickovic et al., 2018) whose input is node embeddings
    and/or features.

    ``input -> dropout -> GATConv -> activation -> dropout -> ... -> GATConv -> logits``, one
    ``torch_geometric.nn.GATConv`` per block. Hidden layers concatenate ``heads`` attention
    heads of ``hidden_size // heads`` channels; the last layer averages ``output_heads``
    heads of ``num_classes`` channels. Every destination node also attends to itself (a
    self-loop is added per destination node: its own representation is the source node of
    the same local id, since destination nodes come first among the source nodes).

    Attention needs one message per edge, so the layers read ``block.edge_index``.

    Parameters
    ----------
    embedding, num_features, num_classes, num_layers
        As in :class:`~graphemb.nn.GraphSAGE` (the constructor of
        :class:`~graphemb.nn.BlockGNN`).
    hidden_size : int
        Width of the hidden layers (all heads together); a multiple of ``heads``.
    heads : int
        Attention heads of the hidden layers.
    output_heads : int
        Attention heads of the last layer, averaged.
    dropout, input_dropout
        As in :class:`~graphemb.nn.GraphSAGE`.
    attention_dropout : float
        Dropout on the attention coefficients.
    activation : callable
        Applied after every layer but the last (default: ELU, as in the paper).

    Examples
    --------
    A ring of four nodes read through their embedding rows alone, four attention heads in
    the hidden layers:

    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.graph import Graph
    >>> from graphemb.nn import GAT
    >>> graph = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]))
    >>> emb = NodeEmbedding(4, 8, "gat-demo", init_func=lambda t: t.normal_())
    >>> model = GAT(emb, num_features=0, hidden_size=16, num_classes=3, heads=4)
    >>> model(graph).shape
    torch.Size([4, 3])
    """

    def __init__(
        self,
        *args: Any,
        heads: int = 8,
        output_heads: int = 1,
        attention_dropout: float = 0.0,
        activation: Callable[[torch.Tensor], torch.Tensor] = F.elu,
        **options: Any,
    ) -> None:
        super().__init__(*args, activation=activation, **options)
        width, hidden_size, num_classes = self.widths[0], self.hidden_size, self.widths[-1]
        check_positive_int("heads", heads)
        check_positive_int("output_heads", output_heads)
        attention_dropout = check_probability("attention_dropout", attention_dropout)
        if hidden_size % heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be a multiple of heads ({heads}): the "
                "heads' outputs are concatenated"
            )
        GATConv = pyg_layer("GATConv")  # noqa: N806 (a class)
        layers: list[nn.Module] = []
        for _ in range(len(self.widths) - 2):
            layers.append(GATConv(width, hidden_size // heads, heads, dropout=attention_dropout))
            width = hidden_size
        layers.append(
            GATConv(width, num_classes, output_heads, concat=False, dropout=attention_dropout)
        )
        self.layers = nn.ModuleList(layers)

    def convolve(self, layer: nn.Module, block: Block, h: torch.Tensor) -> torch.Tensor:
        # GATConv adds the self-loops d -> d for d < num_dst_nodes (after removing any sampled
        # ones): local source d is destination d.
        return layer((h, h[: block.num_dst_nodes]), block.edge_index)
