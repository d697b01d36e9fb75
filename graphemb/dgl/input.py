"""The input layer of a sampled GNN: embedding rows (and features) of the input nodes."""

from __future__ import annotations

import dgl
import torch

from ..embedding import NodeEmbedding
from ..nn.input import EmbeddingInput as _EmbeddingInput

__all__ = ["EmbeddingInput", "input_node_ids"]


def input_node_ids(block: dgl.DGLGraph) -> torch.Tensor:
    """Global ids of the source (input) nodes of ``block``.

    Parameters
    ----------
    block : DGLGraph
        A message-flow graph from a DGL sampler (its ``srcdata[dgl.NID]`` holds the ids in
        the original graph), or a whole graph (no ``dgl.NID``: node ``i`` is node ``i``).

    Returns
    -------
    Tensor of int64, shape (num_src_nodes,), on ``block.device``.
    """
    if dgl.NID in block.srcdata:
        return block.srcdata[dgl.NID]
    return torch.arange(block.num_src_nodes(), device=block.device)


class EmbeddingInput(_EmbeddingInput):
    """:class:`graphemb.nn.EmbeddingInput` reading DGL blocks: rows of a
    :class:`~graphemb.NodeEmbedding` for a block's input nodes (``srcdata[dgl.NID]``),
    optionally followed by node features from ``srcdata``.

    Parameters
    ----------
    embedding, num_features
        As for :class:`graphemb.nn.EmbeddingInput`.
    feature_key : str
        Where features are found when ``forward`` gets none: ``block.srcdata[feature_key]``
        (DGL's samplers slice the graph's ``ndata`` into the blocks).

    Examples
    --------
    >>> import dgl, torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.dgl import EmbeddingInput
    >>> emb = NodeEmbedding(10, 4, "input-demo", init_func=lambda t: t.normal_())
    >>> layer = EmbeddingInput(emb, num_features=3)
    >>> block = dgl.to_block(dgl.graph(([1, 2], [3, 3]), num_nodes=10), dst_nodes=[3])
    >>> block.srcdata["feat"] = torch.ones(block.num_src_nodes(), 3)
    >>> layer(block).shape                      # 3 input nodes (3, 1, 2): 4 + 3 columns
    torch.Size([3, 7])
    """

    def __init__(
        self,
        embedding: NodeEmbedding | None,
        num_features: int = 0,
        *,
        feature_key: str = "feat",
    ) -> None:
        super().__init__(embedding, num_features)
        self.feature_key = feature_key

    def forward(  # type: ignore[override]
        self, block: dgl.DGLGraph, features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Input representations of ``block``'s source nodes.

        Parameters
        ----------
        block : DGLGraph
            The first block of a sampled mini-batch (or a whole graph).
        features : Tensor of shape (num_src_nodes, F), optional
            Features of the source nodes. Default: ``block.srcdata[feature_key]``. Ignored
            when ``num_features == 0``.

        Returns
        -------
        Tensor of shape (num_src_nodes, out_size), on ``block.device``.
            As :meth:`graphemb.nn.EmbeddingInput.forward`'s.
        """
        if self.num_features and features is None:
            if self.feature_key not in block.srcdata:
                raise KeyError(
                    f"EmbeddingInput expects {self.num_features} features per node in "
                    f"block.srcdata[{self.feature_key!r}] (set "
                    f"graph.ndata[{self.feature_key!r}] before sampling) or passed as "
                    "`features`"
                )
            features = block.srcdata[self.feature_key]
        if not self.num_features:
            return self.rows_of(input_node_ids(block), None, block.device)
        if features is None or features.shape != (block.num_src_nodes(), self.num_features):
            raise ValueError(
                f"features must have shape ({block.num_src_nodes()}, {self.num_features}), "
                f"got {None if features is None else tuple(features.shape)}"
            )
        return self.rows_of(input_node_ids(block), features, block.device)
