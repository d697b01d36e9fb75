"""GraphSAGE with a learnable node embedding as (part of) its input."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dgl
import torch
import torch.nn.functional as F
from dgl.nn import SAGEConv
from torch import nn

from ..embedding import NodeEmbedding
from ..nn.stack import BlockGNN
from .input import EmbeddingInput

__all__ = ["GraphSAGE"]


class GraphSAGE(BlockGNN):
    """GraphSAGE (Hamilton et al., 2017) whose input is node embeddings and/or features.

    ``input -> dropout -> SAGEConv -> activation -> dropout -> ... -> SAGEConv -> logits``,
    one ``dgl.nn.SAGEConv`` per block: :class:`graphemb.nn.BlockGNN` on DGL blocks. The input
    layer (:class:`EmbeddingInput`) reads the
    rows of ``embedding`` for the input nodes of the first block
    (``blocks[0].srcdata[dgl.NID]``) and appends their features.

    The embedding is a plain attribute, not a parameter: ``model.parameters()`` (and so
    ``torch.optim`` optimizers and ``DistributedDataParallel``) hold the dense layers only;
    train the embedding with a :mod:`graphemb.optim` optimizer.

    Parameters
    ----------
    embedding, num_features, hidden_size, num_classes, num_layers
        As in :class:`graphemb.nn.GraphSAGE`; the ``num_features`` node features are read
        from ``blocks[0].srcdata[feature_key]``.
    aggregator_type : str
        ``"mean"``, ``"gcn"``, ``"pool"`` or ``"lstm"`` (see ``dgl.nn.SAGEConv``).
    dropout, input_dropout, activation
        As in :class:`graphemb.nn.GraphSAGE`.
    feature_key : str
        Key of the node features in ``srcdata``.

    Examples
    --------
    >>> import dgl, torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.datasets import stochastic_block_model
    >>> from graphemb.dgl import GraphSAGE, to_dgl_graph
    >>> from graphemb.optim import SparseAdam
    >>> data = stochastic_block_model(300, num_communities=3, seed=0)
    >>> graph = to_dgl_graph(data)
    >>> emb = NodeEmbedding(data.num_nodes, 8, "sage-demo", init_func=lambda t: t.normal_(0, 0.1))
    >>> model = GraphSAGE(emb, num_features=0, hidden_size=16, num_classes=data.num_classes)
    >>> dense_opt = torch.optim.Adam(model.parameters(), lr=0.01)   # dense layers only
    >>> sparse_opt = SparseAdam([emb], lr=0.05)                    # the embedding rows
    >>> loader = dgl.dataloading.DataLoader(
    ...     graph, data.train_idx, dgl.dataloading.NeighborSampler([5, 5]), batch_size=16)
    >>> for input_nodes, output_nodes, blocks in loader:
    ...     logits = model(blocks)                                 # (len(output_nodes), 3)
    ...     loss = torch.nn.functional.cross_entropy(logits, blocks[-1].dstdata["label"])
    ...     loss.backward()
    ...     dense_opt.step(); dense_opt.zero_grad(); sparse_opt.step()
    >>> model(graph).shape                                          # whole graph, no sampling
    torch.Size([300, 3])
    """

    def __init__(
        self,
        embedding: NodeEmbedding | None,
        num_features: int,
        hidden_size: int,
        num_classes: int,
        num_layers: int = 2,
        *,
        aggregator_type: str = "mean",
        dropout: float = 0.5,
        input_dropout: float | None = None,
        activation: Callable[[torch.Tensor], torch.Tensor] = F.relu,
        feature_key: str = "feat",
    ) -> None:
        super().__init__(
            embedding,
            num_features,
            dropout=dropout,
            input_dropout=input_dropout,
            activation=activation,
            input_layer=EmbeddingInput(embedding, num_features, feature_key=feature_key),
        )
        sizes = self.layer_widths(hidden_size, num_classes, num_layers)
        self.layers = nn.ModuleList(
            SAGEConv(sizes[i], sizes[i + 1], aggregator_type) for i in range(num_layers)
        )

    def layer_blocks(self, blocks: Sequence[dgl.DGLGraph] | dgl.DGLGraph) -> list[Any]:
        """``blocks`` (a whole graph: once per layer), checked against the layer count."""
        if isinstance(blocks, dgl.DGLGraph):
            return [blocks] * self.num_layers
        if len(blocks) != self.num_layers:
            raise ValueError(
                f"GraphSAGE has {self.num_layers} layers but got {len(blocks)} blocks: "
                f"give the sampler {self.num_layers} fanouts"
            )
        return list(blocks)

    def convolve(self, layer: nn.Module, block: Any, h: torch.Tensor) -> torch.Tensor:
        return layer(block, h)

    def forward(  # type: ignore[override]
        self,
        blocks: Sequence[dgl.DGLGraph] | dgl.DGLGraph,
        features: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits of the output nodes of the last block.

        Parameters
        ----------
        blocks : list of DGLGraph, or one DGLGraph
            ``num_layers`` blocks from a DGL sampler (``blocks[0]`` holds the input nodes,
            ``blocks[-1]`` the seed nodes); or a whole graph, which every layer then uses
            (full-neighbourhood inference on graphs small enough for it).
        features : Tensor of shape (blocks[0].num_src_nodes(), F), optional
            Input-node features. Default: ``blocks[0].srcdata[feature_key]``.

        Returns
        -------
        Tensor of shape (blocks[-1].num_dst_nodes(), num_classes).
        """
        return super().forward(blocks, features)  # type: ignore[arg-type]
