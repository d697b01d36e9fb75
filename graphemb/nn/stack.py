"""What every model of :mod:`graphemb.nn` and :mod:`graphemb.dgl` shares: an input layer
reading embedding rows, then one message-passing layer per block, with dropout and an
activation between layers."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_positive_int, check_probability
from ..embedding import NodeEmbedding
from ..graph import Graph
from ..sampling.block import Block
from .blocks import as_blocks
from .dropout import Dropout
from .input import EmbeddingInput

__all__ = ["BlockGNN", "SAGEStack"]


class BlockGNN(nn.Module):
    """``input -> dropout -> layer -> activation -> dropout -> ... -> layer``, one layer per
    block: the constructor every model shares. Subclasses take their own options, build
    :attr:`layers` from :attr:`widths` and say how one layer reads one block
    (:meth:`convolve`).

    Parameters
    ----------
    embedding : NodeEmbedding or None
        One row per node of the graph (``None`` for a features-only model).
    num_features : int
        Width ``F`` of the node features (0: embeddings only).
    hidden_size : int
        Width of the hidden layers.
    num_classes : int
        Width ``C`` of the output (logits).
    num_layers : int
        Number of layers, i.e. of blocks per mini-batch (the sampler's number of fanouts).
    dropout : float
        Dropout before every layer but the first.
    input_dropout : float, optional
        Dropout on the input representations (embedding rows and features). Default:
        ``dropout``.
    activation : callable
        Applied after every layer but the last.
    input_layer : EmbeddingInput, optional
        The input layer (a subclass reading another library's blocks). Default:
        ``EmbeddingInput(embedding, num_features)``.
    """

    layers: nn.ModuleList

    def __init__(
        self,
        embedding: NodeEmbedding | None,
        num_features: int,
        hidden_size: int,
        num_classes: int,
        num_layers: int = 2,
        *,
        dropout: float = 0.5,
        input_dropout: float | None = None,
        activation: Callable[[torch.Tensor], torch.Tensor] = F.relu,
        input_layer: EmbeddingInput | None = None,
    ) -> None:
        super().__init__()
        check_positive_int("hidden_size", hidden_size)
        check_positive_int("num_classes", num_classes)
        check_positive_int("num_layers", num_layers)
        dropout = check_probability("dropout", dropout)
        input_dropout = dropout if input_dropout is None else input_dropout
        input_dropout = check_probability("input_dropout", input_dropout)
        if not callable(activation):
            raise TypeError(f"activation must be callable, got {type(activation).__name__}")
        self.input = EmbeddingInput(embedding, num_features) if input_layer is None else input_layer
        # no stored mask with the compiled kernels, torch's dropout without (dropout.py)
        self.input_dropout = Dropout(input_dropout)
        self.dropout = Dropout(dropout)
        self.activation = activation
        self.hidden_size = hidden_size
        #: Widths of the ``num_layers + 1`` representations: the input layer's output,
        #: ``hidden_size`` between layers, ``num_classes`` out.
        self.widths = [self.input.out_size] + [hidden_size] * (num_layers - 1) + [num_classes]

    @property
    def embedding(self) -> NodeEmbedding | None:
        """The :class:`~graphemb.NodeEmbedding` read by the input layer."""
        return self.input.embedding

    @property
    def num_features(self) -> int:
        """Width ``F`` of the node features read beside the embedding (0: none)."""
        return self.input.num_features

    @property
    def num_layers(self) -> int:
        """Number of layers: the blocks a mini-batch must bring."""
        return len(self.layers)

    def convolve(self, layer: nn.Module, block: Any, h: torch.Tensor) -> torch.Tensor:
        """Apply ``layer`` to ``block``: ``h`` holds the source nodes' representations
        (shape (num_src_nodes, in)); returns the destination nodes' (num_dst_nodes, out)."""
        raise NotImplementedError

    def convolve_dropped(
        self,
        layer: nn.Module,
        block: Any,
        h: torch.Tensor,
        dropout: Dropout,
        activate: bool = False,
    ) -> torch.Tensor:
        """:meth:`convolve` on ``dropout(h)``, or on ``dropout(activation(h))`` with
        ``activate`` (every layer but the first). A model whose layer can apply them as it
        reads ``h`` overrides this (neither the activated nor the dropped ``h`` written
        out), with the same result."""
        if activate:
            h = self.activation(h)
        return self.convolve(layer, block, dropout(h))

    def layer_blocks(self, blocks: Any) -> list[Any]:
        """One block per layer from :meth:`forward`'s argument, checked
        (:func:`~graphemb.nn.as_blocks` for graphemb's blocks and graphs)."""
        return as_blocks(blocks, self.num_layers)

    def forward(
        self, blocks: Sequence[Block] | Graph, features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Outputs (logits) of the destination nodes of the last block.

        Parameters
        ----------
        blocks : list of Block, or Graph
            ``num_layers`` blocks from a sampler (``blocks[0]`` holds the input nodes,
            ``blocks[-1]`` the seeds); or a whole :class:`~graphemb.graph.Graph`, which every
            layer then reads in full (full-neighbourhood inference over all nodes, for graphs
            whose ``num_nodes x hidden_size`` activations fit in memory).
        features : Tensor of shape (N, F), optional
            Node features of all ``N`` nodes (indexed by ``blocks[0].src_nodes``); needed
            when ``num_features > 0``.

        Returns
        -------
        Tensor of shape (blocks[-1].num_dst_nodes, out_size), on the blocks' device; with a
        Graph, (N, out_size).
        """
        blocks = self.layer_blocks(blocks)
        h = self.first_layer(blocks[0], features)
        for layer, block in zip(self.layers[1:], blocks[1:], strict=True):
            h = self.convolve_dropped(layer, block, h, self.dropout, activate=True)
        return h

    def first_layer(self, block: Any, features: torch.Tensor | None) -> torch.Tensor:
        """The first layer's output on ``block``: :meth:`convolve_dropped` on the input
        layer's rows after the input dropout. A model whose first layer can read the
        embedding's rows where they lie overrides this, with the same result."""
        h = self.input(block, features)
        return self.convolve_dropped(self.layers[0], block, h, self.input_dropout)


class SAGEStack(BlockGNN):
    """GraphSAGE for every library: :class:`BlockGNN` with one GraphSAGE layer per block.
    Subclasses build one layer (:meth:`sage_layer`) and say how it reads a block
    (:meth:`~BlockGNN.convolve`).

    Parameters
    ----------
    *args, **options
        As in :class:`BlockGNN`.
    aggregator_type : str
        How a layer aggregates the neighbours; the names :meth:`sage_layer` accepts.
    """

    def __init__(self, *args: Any, aggregator_type: str = "mean", **options: Any) -> None:
        super().__init__(*args, **options)
        self.aggregator_type = aggregator_type
        sizes = self.widths
        self.layers = nn.ModuleList(
            self.sage_layer(sizes[i], sizes[i + 1], aggregator_type) for i in range(len(sizes) - 1)
        )

    def sage_layer(self, in_size: int, out_size: int, aggregator_type: str) -> nn.Module:
        """One GraphSAGE layer from ``in_size`` to ``out_size`` features; ``ValueError``
        naming ``aggregator_type`` when the library has no such aggregator."""
        raise NotImplementedError


def with_keywords(init: Callable[..., None], base: Callable[..., None], **keywords: Any) -> None:
    """Give ``init`` (a subclass's ``__init__(self, *args, <keywords>, **options)`` that
    passes ``*args, **options`` on to ``base``) the signature it really has: ``base``'s
    parameters plus ``keywords`` (name: default) -- what ``help()``, ``inspect`` and
    editors show."""
    parameters = list(inspect.signature(base).parameters.values())
    extra = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=type(default).__name__
        )
        for name, default in keywords.items()
    ]
    init.__signature__ = inspect.Signature(parameters + extra)  # type: ignore[attr-defined]


with_keywords(SAGEStack.__init__, BlockGNN.__init__, aggregator_type="mean")
