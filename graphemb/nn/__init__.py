"""GNN models whose input layer reads :class:`graphemb.NodeEmbedding` rows, on PyG layers.

* :class:`EmbeddingInput` -- the input layer: embedding rows of a block's source nodes,
  optionally concatenated with their node features.
* :class:`GraphSAGE` -- :class:`EmbeddingInput` followed by ``torch_geometric.nn.SAGEConv``
  layers (fed the block's sparse ``adj_t`` where the aggregator allows).
* :class:`GAT` -- the same with ``torch_geometric.nn.GATConv`` layers.
* :func:`full_block` -- a whole :class:`~graphemb.graph.Graph` as one block.

The models read graphemb's own blocks (:class:`graphemb.sampling.Block`, from
:class:`graphemb.sampling.NeighborSampler`), or a whole :class:`~graphemb.graph.Graph`
for full-neighbourhood inference, on CPU and CUDA, with any current torch. Their layers
need PyTorch Geometric (``pip install torch_geometric``: plain torch, no compiled
extension; ``from graphemb.nn import GraphSAGE`` says so when it is missing), imported when
the first :class:`GraphSAGE` or :class:`GAT` is built: importing this package costs no
more than ``import graphemb``. :class:`EmbeddingInput`, :class:`BlockGNN` and
:class:`SAGEStack` (the GraphSAGE constructor) need no PyG; :mod:`graphemb.dgl` builds its
DGL models on them.

Examples: :class:`GraphSAGE` (training on a whole graph), :class:`EmbeddingInput` (one
block), :class:`GAT`.
"""

from typing import TYPE_CHECKING, Any

from .blocks import as_blocks, full_block
from .dropout import Dropout
from .input import EmbeddingInput
from .stack import BlockGNN, SAGEStack

if TYPE_CHECKING:
    from .gat import GAT
    from .sage import SAGE_AGGREGATORS, GraphSAGE

# The PyG models' modules, imported on first use: graphemb.dgl builds on this package's
# input layer and block stack without PyG.
_PYG_MODELS = {"GAT": ".gat", "GraphSAGE": ".sage", "SAGE_AGGREGATORS": ".sage"}


def __getattr__(name: str) -> Any:
    if name in _PYG_MODELS:
        import importlib

        value = getattr(importlib.import_module(_PYG_MODELS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BlockGNN",
    "Dropout",
    "EmbeddingInput",
    "GAT",
    "GraphSAGE",
    "SAGE_AGGREGATORS",
    "SAGEStack",
    "as_blocks",
    "full_block",
]
