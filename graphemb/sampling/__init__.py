"""Graph sampling in pure torch, on CPU and CUDA: neighbour sampling into DGL-style blocks,
seed batches per rank, random walks, a seeded order of the nodes computed chunk by chunk,
noise nodes for negative sampling, and word2vec's subsampling of frequent nodes."""

from .block import Block
from .loader import SeedLoader
from .negatives import NegativeSampler
from .neighbor import NeighborSampler, sample_neighbors
from .permutation import RandomOrder
from .protocol import Batch, BlockSampler
from .subsampling import keep_probabilities
from .walks import PAD, RandomWalker, random_walks

__all__ = [
    "PAD",
    "Batch",
    "Block",
    "BlockSampler",
    "NegativeSampler",
    "NeighborSampler",
    "RandomOrder",
    "RandomWalker",
    "SeedLoader",
    "keep_probabilities",
    "random_walks",
    "sample_neighbors",
]
