"""Checkpoints: save embeddings and optimizer state from any layout, load into any other.

See :func:`save` and :func:`load`.
"""

from .job import FORMAT_VERSION, load, save

__all__ = ["save", "load", "FORMAT_VERSION"]
