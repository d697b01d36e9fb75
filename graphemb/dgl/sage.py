"""GraphSAGE with a learnable node embedding as (part of) its input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dgl
import torch
from dgl.nn import SAGEConv
from torch import nn

from ..nn.stack import SAGEStack, with_keywords
from .input import EmbeddingInput

__all__ = ["GraphSAGE"]


class GraphSAGE(SAGEStack):
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
        As in :class:`graphemb.nn.GraphSAGE` (the same constructor,
        :class:`graphemb.nn.SAGEStack`); the ``num_features`` node features are read from
        ``blocks[0].srcdata[feature_key]``.
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

    def __init__(self, *args: Any, feature_key: str = "feat", **options: Any) -> None:
        super().__init__(*args, **options)
        # the same input layer, reading DGL blocks (node ids and features in srcdata)
        self.input = EmbeddingInput(self.embedding, self.num_features, feature_key=feature_key)

    def sage_layer(self, in_size: int, out_size: int, aggregator_type: str) -> nn.Module:
        return SAGEConv(in_size, out_size, aggregator_type)

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


with_keywords(GraphSAGE.__init__, SAGEStack.__init__, feature_key="feat")
