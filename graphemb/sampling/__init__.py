"""Graph sampling in pure torch, on CPU and CUDA: neighbour sampling into DGL-style blocks,
seed batches per rank, and random walks."""

from .block import Block

__all__ = ["Block"]
