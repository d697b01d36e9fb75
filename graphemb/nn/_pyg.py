"""PyTorch Geometric, imported when a model first needs one of its layers.

``import graphemb.nn`` stays as fast as ``import graphemb``: PyG's own import takes seconds
(it loads ``torch._dynamo``), and the input layer, the block stack and the DGL adapters
built on them do not need it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["pyg_layer"]


def pyg_layer(name: str) -> Any:
    """The class ``torch_geometric.nn.<name>``, or an ``ImportError`` saying how to get PyG."""
    try:
        module = importlib.import_module("torch_geometric.nn")
    except Exception as error:  # ImportError, or an error inside a broken installation
        raise ImportError(
            f"graphemb.nn needs PyTorch Geometric for its {name} layers, which could not be "
            f"imported ({type(error).__name__}: {error}). Install it with `pip install "
            "torch_geometric` (or `pip install 'graphemb[pyg]'`): plain torch, no compiled "
            "extension needed. The rest of graphemb works without it."
        ) from error
    return getattr(module, name)
