"""Graph sampling in pure torch, on CPU and CUDA: neighbour sampling into DGL-style blocks,
seed batches per rank, random walks, and noise nodes for negative sampling."""

from .block import Block
from .loader import SeedLoader
from .negatives import NegativeSampler
from .neighbor import NeighborSampler, sample_neighbors
from .protocol import Batch, BlockSampler
from .walks import PAD, RandomWalker, random_walks

__all__ = [
    "PAD",
    "Batch",
    "Block",
    "BlockSampler",
    "NegativeSampler",
    "NeighborSampler",
    "RandomWalker",
    "SeedLoader",
    "random_walks",
    "sample_neighbors",
]
