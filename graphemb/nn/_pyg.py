"""PyTorch Geometric, imported when a model first needs one of its layers.

``import graphemb.nn`` stays as fast as ``import graphemb``: PyG's own import takes seconds
(it loads ``torch._dynamo``), and the input layer, the block stack and the DGL adapters
built on them do not need it. The modules of the PyG models check at import that PyG is
installed (:func:`require_pyg`, without importing it) and import it when a model is built
(:func:`pyg_layer`).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__all__ = ["pyg_layer", "require_pyg"]


def _missing(feature: str, reason: str) -> ImportError:
    return ImportError(
        f"graphemb.nn needs PyTorch Geometric for {feature}, which could not be imported "
        f"({reason}). Install it with `pip install torch_geometric` (or `pip install "
        "'graphemb[pyg]'`): plain torch, no compiled extension needed. The rest of graphemb "
        "works without it."
    )


def require_pyg(feature: str) -> None:
    """An ``ImportError`` naming ``feature`` unless PyG is installed; PyG is not imported."""
    try:
        found = importlib.util.find_spec("torch_geometric") is not None
    except (ImportError, ValueError) as error:  # a broken installation
        raise _missing(feature, f"{type(error).__name__}: {error}") from error
    if not found:
        raise _missing(feature, "No module named 'torch_geometric'")


def pyg_layer(name: str) -> Any:
    """The class ``torch_geometric.nn.<name>``, or an ``ImportError`` saying how to get PyG."""
    try:
        module = importlib.import_module("torch_geometric.nn")
    except Exception as error:  # ImportError, or an error inside a broken installation
        raise _missing(f"its {name} layers", f"{type(error).__name__}: {error}") from error
    return getattr(module, name)
