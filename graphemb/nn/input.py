"""The input layer of a GNN: embedding rows (and features) of a block's source nodes."""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_input_arguments
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
        check_input_arguments(embedding, num_features)
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
        parts = []
        if self.embedding is not None:
            # With a partitioned embedding this lookup is collective: every rank makes it,
            # also with an empty block.
            parts.append(self.embedding(ids, device=block.device))
        if self.num_features:
            rows = self._feature_rows(ids, features).to(block.device)
            # The result takes the features' dtype (rows of a float16/bfloat16 table are cast).
            parts = [part.to(rows.dtype) for part in parts] + [rows]
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
