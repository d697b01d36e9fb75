"""The input layer of a GNN: embedding rows (and features) of a block's source nodes.

Framework-neutral at its core (:meth:`EmbeddingInput.rows_of`: node ids and their feature
rows in, representations out); :meth:`EmbeddingInput.forward` reads graphemb's blocks and
:class:`graphemb.dgl.EmbeddingInput` reads DGL's with the same core.
"""

from __future__ import annotations

import torch
from torch import nn

from ..embedding import NodeEmbedding
from ..sampling.block import Block

__all__ = ["EmbeddingInput"]


class EmbeddingInput(nn.Module):
    """Rows of a :class:`~graphemb.NodeEmbedding` for a block's source nodes, optionally
    followed by their node features.

    The embedding is a plain attribute, not a submodule or parameter: ``parameters()``,
    ``state_dict()``, dense optimizers and ``DistributedDataParallel`` never see it, and a
    sparse optimizer from :mod:`graphemb.optim` trains it.

    Parameters
    ----------
    embedding : NodeEmbedding or None
        Table with one row per node of the graph; ``None`` for features only.
    num_features : int
        Width ``F`` of the node features to append (0 for none).

    Attributes
    ----------
    out_size : int
        ``embedding_dim + F``: the width of the output.

    Examples
    --------
    The input of a block's three source nodes: each node's embedding row, then its three
    features.

    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.nn import EmbeddingInput
    >>> from graphemb.sampling import Block
    >>> emb = NodeEmbedding(10, 4, "input-demo", init_func=lambda t: t.normal_())
    >>> layer = EmbeddingInput(emb, num_features=3)
    >>> block = Block(torch.tensor([3, 1, 2]), 1, torch.tensor([[1, 2], [0, 0]]))
    >>> features = torch.ones(10, 3)              # the features of all 10 nodes
    >>> layer(block, features).shape              # 3 source nodes: 4 + 3 columns
    torch.Size([3, 7])
    """

    def __init__(self, embedding: NodeEmbedding | None, num_features: int = 0) -> None:
        super().__init__()
        _check_arguments(embedding, num_features)
        # Neither a Module nor a Parameter: nn.Module keeps it as a plain attribute, out of
        # parameters() and state_dict().
        self.embedding = embedding
        self.num_features = num_features
        self.out_size = (0 if embedding is None else embedding.embedding_dim) + num_features

    def forward(self, block: Block, features: torch.Tensor | None = None) -> torch.Tensor:
        """Input representations of ``block``'s source nodes.

        Parameters
        ----------
        block : Block
            The first block of a sampled mini-batch (see :func:`~graphemb.nn.full_block`
            for a whole graph).
        features : Tensor of shape (N, F), optional
            Features of *every* node of the graph, indexed here by ``block.src_nodes``;
            needed when ``num_features > 0``, ignored otherwise. May stay on another device
            than the block (a large table in CPU memory): only the rows of the source nodes
            are moved to ``block.device``.

        Returns
        -------
        Tensor of shape (num_src_nodes, out_size), on ``block.device``.
            Embedding rows first (they require grad while autograd records, so the sparse
            optimizer receives their gradient), then features. The dtype is the features'
            (without features, the table's).
        """
        ids = block.src_nodes
        rows = self._feature_rows(ids, features) if self.num_features else None
        return self.rows_of(ids, rows, block.device)

    def rows_of(
        self, ids: torch.Tensor, feature_rows: torch.Tensor | None, device: torch.device
    ) -> torch.Tensor:
        """Input representations of the nodes ``ids``, whatever graph library holds them.

        Parameters
        ----------
        ids : Tensor of int64, shape (S,)
            Global ids of the nodes.
        feature_rows : Tensor of shape (S, F), or None
            Their features (``None`` when ``num_features == 0``); moved to ``device``.
        device : torch.device
            Where the result lives.

        Returns
        -------
        Tensor of shape (S, out_size)
            As :meth:`forward`.
        """
        parts = []
        if self.embedding is not None:
            # With a partitioned embedding this lookup is collective: every rank makes it,
            # also with an empty block.
            parts.append(self.embedding(ids, device=device))
        if feature_rows is not None:
            feature_rows = feature_rows.to(device)
            # The result takes the features' dtype (rows of a float16/bfloat16 table are cast).
            parts = [part.to(feature_rows.dtype) for part in parts] + [feature_rows]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def _feature_rows(self, ids: torch.Tensor, features: torch.Tensor | None) -> torch.Tensor:
        if features is None:
            raise ValueError(
                f"this model reads {self.num_features} features per node: pass the feature "
                "table of all nodes, shape (num_nodes, num_features), as `features`"
            )
        if not isinstance(features, torch.Tensor) or not features.is_floating_point():
            kind = features.dtype if isinstance(features, torch.Tensor) else type(features).__name__
            raise TypeError(f"features must be a floating-point tensor, got {kind}")
        if features.dim() != 2 or features.shape[1] != self.num_features:
            raise ValueError(
                f"features must have shape (num_nodes, {self.num_features}), got "
                f"{tuple(features.shape)}"
            )
        if self.embedding is not None and features.shape[0] != self.embedding.num_embeddings:
            raise ValueError(
                f"features has {features.shape[0]} rows but the embedding has "
                f"{self.embedding.num_embeddings}: both need one row per node"
            )
        return features[ids.to(features.device)]

    def extra_repr(self) -> str:
        emb = (
            "None"
            if self.embedding is None
            else f"{self.embedding.name!r} ({self.embedding.embedding_dim})"
        )
        return f"embedding={emb}, num_features={self.num_features}, out_size={self.out_size}"


def _check_arguments(embedding: object, num_features: object) -> None:
    """An optional :class:`~graphemb.NodeEmbedding` and a feature width ``>= 0``, not both
    absent."""
    if embedding is not None and not isinstance(embedding, NodeEmbedding):
        raise TypeError(
            f"embedding must be a graphemb.NodeEmbedding or None, got {type(embedding).__name__}"
        )
    if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 0:
        raise ValueError(f"num_features must be an int >= 0, got {num_features!r}")
    if embedding is None and num_features == 0:
        raise ValueError("EmbeddingInput needs an embedding, features (num_features > 0), or both")
