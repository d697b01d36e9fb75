"""The compiled kernels as one module: every function of the library's Python bindings,
under the names graphemb's code calls (``graphemb._compiled.compiled_module()`` returns
this module when the library loaded)."""

from __future__ import annotations

from .graph import csc_from_edges, parse_integer_edges
from .layers import csr_aggregate, csr_aggregate_transposed, dropout_masked_scale
from .library import library
from .optimizer import formulas, fused_update, sort_rows
from .sampling import random_order, random_walks, sample_blocks, sample_layer
from .skipgram import SkipGramTrainer
from .tables import gather_rows

__all__ = [
    "API_VERSION",
    "CSC_EDGE_IDS_MAY_HOLD_EDGES",
    "LIBRARY_PATH",
    "SkipGramTrainer",
    "csc_from_edges",
    "csr_aggregate",
    "csr_aggregate_transposed",
    "dropout_masked_scale",
    "formulas",
    "fused_update",
    "gather_rows",
    "parse_integer_edges",
    "random_order",
    "random_walks",
    "sample_blocks",
    "sample_layer",
    "sort_rows",
]

API_VERSION = 3
"""The optimizer entry point's interface (3: the gradients as a list of parts)."""

CSC_EDGE_IDS_MAY_HOLD_EDGES = True
"""``csc_from_edges`` reads every edge before it writes edge ids into their memory."""

LIBRARY_PATH = str(library().path)
"""The shared library these functions call."""
