"""GraphSAGE on PyG's ``SAGEConv``, with a learnable node embedding as (part of) its input."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..sampling.block import Block
from ._pyg import pyg_layer, require_pyg
from .aggregation import aggregate_embedding_rows, aggregate_with_own_rows
from .dropout import Dropout
from .input import EmbeddingInput
from .recycled_linear import linear
from .stack import SAGEStack

require_pyg("GraphSAGE")  # here, a clear error; PyG itself is imported by the first model

__all__ = ["GraphSAGE", "SAGE_AGGREGATORS"]

#: Aggregators of :class:`GraphSAGE` and what PyG's ``SAGEConv`` does for each. ``"pool"``
#: is GraphSAGE's max-pooling aggregator (DGL's ``"pool"``): a linear layer and a ReLU on
#: every neighbour, then the maximum.
SAGE_AGGREGATORS: dict[str, dict[str, Any]] = {
    "mean": {"aggr": "mean"},
    "sum": {"aggr": "sum"},
    "max": {"aggr": "max"},
    "pool": {"aggr": "max", "project": True},
    "lstm": {"aggr": "lstm"},
}
# Aggregators computed as one fused sparse-dense product forward and one backward
# (aggregation.py) instead of a message per edge, on CPU and CUDA alike. PyG has no CUDA
# kernel for max over a sparse tensor, and LSTM needs the edges, so those get edge_index.
_SPARSE_AGGREGATORS = ("mean", "sum")
# Activations the aggregation kernels apply as they read the rows (not written out).
_RELUS = (F.relu, torch.relu)


class GraphSAGE(SAGEStack):
    """GraphSAGE (Hamilton et al., 2017) whose input is node embeddings and/or features.

    ``input -> dropout -> SAGEConv -> activation -> dropout -> ... -> SAGEConv -> logits``,
    one ``torch_geometric.nn.SAGEConv`` per block. The input layer
    (:class:`~graphemb.nn.EmbeddingInput`) reads the rows of ``embedding`` for the source
    nodes of the first block and appends their features. Each layer computes
    ``W_neigh . aggregate(h_src over sampled in-edges) + W_self . h_dst + b`` for the
    destination nodes, which are the first ``num_dst_nodes`` source nodes of the block.

    The embedding is a plain attribute, not a parameter: ``model.parameters()`` (and so
    ``torch.optim`` optimizers and ``DistributedDataParallel``) hold the dense layers only;
    train the embedding with a :mod:`graphemb.optim` optimizer.

    Parameters
    ----------
    embedding : NodeEmbedding or None
        One row per node of the graph (``None`` for a features-only model).
    num_features : int
        Width ``F`` of the node features passed to :meth:`forward` (0: embeddings only).
    hidden_size : int
        Width of the hidden layers.
    num_classes : int
        Width ``C`` of the output (logits).
    num_layers : int
        Number of ``SAGEConv`` layers, i.e. of blocks per mini-batch (the sampler's number
        of fanouts).
    aggregator_type : str
        One of :data:`SAGE_AGGREGATORS`: ``"mean"`` (default), ``"sum"``, ``"max"``,
        ``"pool"`` (max-pooling after a linear layer and ReLU) or ``"lstm"``.
    dropout : float
        Dropout before every ``SAGEConv`` but the first.
    input_dropout : float, optional
        Dropout on the input representations (embedding rows and features). Default:
        ``dropout``.
    activation : callable
        Applied after every layer but the last.

    Examples
    --------
    One full-graph training step on a synthetic community graph, dense and sparse
    optimizers side by side:

    >>> import torch
    >>> from graphemb import NodeEmbedding
    >>> from graphemb.datasets import stochastic_block_model
    >>> from graphemb.graph import Graph
    >>> from graphemb.nn import GraphSAGE
    >>> from graphemb.optim import SparseAdam
    >>> data = stochastic_block_model(300, num_communities=3, seed=0)
    >>> graph = Graph.from_dataset(data)
    >>> emb = NodeEmbedding(data.num_nodes, 8, "sage-demo", init_func=lambda t: t.normal_(0, 0.1))
    >>> model = GraphSAGE(emb, num_features=0, hidden_size=16, num_classes=data.num_classes)
    >>> dense_opt = torch.optim.Adam(model.parameters(), lr=0.01)   # dense layers only
    >>> sparse_opt = SparseAdam([emb], lr=0.05)                    # the embedding rows
    >>> logits = model(graph)                                       # every node, no sampling
    >>> train = data.train_idx
    >>> loss = torch.nn.functional.cross_entropy(logits[train], data.labels[train])
    >>> loss.backward()
    >>> dense_opt.step(); sparse_opt.step()
    >>> logits.shape
    torch.Size([300, 3])
    """

    def sage_layer(self, in_size: int, out_size: int, aggregator_type: str) -> nn.Module:
        if aggregator_type not in SAGE_AGGREGATORS:
            raise ValueError(
                f"aggregator_type must be one of {sorted(SAGE_AGGREGATORS)}, got "
                f"{aggregator_type!r}"
            )
        SAGEConv = pyg_layer("SAGEConv")  # noqa: N806 (a class)
        return SAGEConv(in_size, out_size, **SAGE_AGGREGATORS[aggregator_type])

    @property
    def sparse_adjacency(self) -> bool:
        """Whether the layers read the block's sparse adjacency (else its edges)."""
        return self.aggregator_type in _SPARSE_AGGREGATORS

    def convolve(self, layer: Any, block: Block, h: torch.Tensor) -> torch.Tensor:
        if not self.sparse_adjacency:
            h_dst = h[: block.num_dst_nodes]  # destination nodes come first among the sources
            return layer((h, h_dst), block.edge_index)
        # SAGEConv.forward on a (D, S) adjacency, with its aggregation step swapped for one
        # whose backward is a CSR product too (see aggregation.py): the same parameters
        # and the same output as layer((h, h[:D]), block.adj_t).
        return self._combine(layer, aggregate_with_own_rows(block, h, layer.aggr))

    def convolve_dropped(
        self, layer: Any, block: Any, h: torch.Tensor, dropout: Dropout, activate: bool = False
    ) -> torch.Tensor:
        # With the compiled kernels the aggregation drops the rows of h as it reads them
        # (after a ReLU activation, if that is the model's), and their gradient as it
        # writes it: the same floats as activation, dropout, then convolve.
        mask = dropout.hashed_mask(h) if self.sparse_adjacency else None
        if mask is None:
            return super().convolve_dropped(layer, block, h, dropout, activate)
        relu = activate and self.activation in _RELUS
        if activate and not relu:
            h = self.activation(h)
        pair = aggregate_with_own_rows(block, h, layer.aggr, mask, relu=relu)
        return self._combine(layer, pair)

    def first_layer(self, block: Any, features: torch.Tensor | None) -> torch.Tensor:
        # An input of embedding rows alone: the first aggregation reads them from the
        # table (aggregate_embedding_rows), without the lookup's copy.
        layer, embedding = self.layers[0], self.input.embedding
        if (
            self.sparse_adjacency
            and type(self.input) is EmbeddingInput
            and self.input.num_features == 0
            and embedding is not None
            and isinstance(block, Block)
        ):
            reduce = str(layer.aggr)  # mean or sum: a name, as sparse_adjacency says
            pair = aggregate_embedding_rows(block, embedding, reduce, self.input_dropout)
            if pair is not None:
                return self._combine(layer, pair)
        return super().first_layer(block, features)

    @staticmethod
    def _combine(layer: Any, pair: torch.Tensor) -> torch.Tensor:
        """SAGEConv's output from ``pair`` (D, 2F): the aggregated neighbours, then the
        destinations' own rows."""
        width = pair.shape[1] // 2
        neighbors, root = layer.lin_l, layer.lin_r if layer.root_weight else None
        if (
            root is not None
            and getattr(root, "bias", None) is None
            and not any(nn.parameter.is_lazy(lin.weight) for lin in (neighbors, root))
        ):
            # lin_l(aggregated) + lin_r(own rows) as one product of width 2F: the output
            # written once, and its gradient for both halves in one product backward.
            weight = torch.cat([neighbors.weight, root.weight], dim=1)
            out = linear(pair, weight, neighbors.bias)
        else:
            out = neighbors(pair[:, :width])
            if root is not None:
                out = out + root(pair[:, width:])
        if layer.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out
