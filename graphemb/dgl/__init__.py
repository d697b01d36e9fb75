"""DGL adapters: GNN models on DGL blocks whose input layer reads :class:`graphemb.NodeEmbedding`
rows.

* :class:`EmbeddingInput` -- the input layer: embedding rows of the input nodes of the
  first DGL block, optionally concatenated with node features.
* :class:`GraphSAGE` -- :class:`EmbeddingInput` followed by ``dgl.nn.SAGEConv`` layers, for
  ``dgl.dataloading.NeighborSampler`` + ``dgl.dataloading.DataLoader`` pipelines.
* :func:`to_dgl_graph` -- a ``DGLGraph`` from a :mod:`graphemb.datasets` dataset.

This subpackage needs DGL (the "dgl stack": torch 2.2.1 + DGL 2.1.0, pinned by
``requirements/dgl-stack.txt``); ``import graphemb`` never imports it. Without DGL, use
:mod:`graphemb.nn` (the same models on PyG layers and graphemb's own
:class:`~graphemb.graph.Graph` and samplers, on any current torch); a ``DGLGraph`` converts
with :meth:`graphemb.graph.Graph.from_dgl`.

Examples: :class:`GraphSAGE` (a DGL ``DataLoader`` pipeline, and a whole graph).
"""

import os as _os

# graphemb is a torch library: DGL's PyTorch backend is the only one that can work with it.
# Choosing it here also spares users DGL's "backend not selected" warning.
_os.environ.setdefault("DGLBACKEND", "pytorch")

try:
    import dgl as _dgl  # noqa: F401
except Exception as _error:  # ImportError, or OSError when DGL's native libraries do not load
    raise ImportError(
        "graphemb.dgl needs DGL, which could not be imported "
        f"({type(_error).__name__}: {_error}). DGL 2.1 runs with torch <= 2.2.1 only: use the "
        "dgl stack (`make envs`, then .venv/dgl/bin/python), or install it with "
        "`pip install -c requirements/dgl-stack.txt -e '.[dgl]'` (torch==2.2.1, dgl==2.1.0). "
        "The rest of graphemb works without DGL; graphemb.nn has the same models on PyG layers."
    ) from _error

from .graph import to_dgl_graph
from .input import EmbeddingInput
from .sage import GraphSAGE

__all__ = ["EmbeddingInput", "GraphSAGE", "to_dgl_graph"]
