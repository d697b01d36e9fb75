"""The corpus of a run: its walks, drawn chunk by chunk (:class:`Corpus`), and what word2vec
counts over its corpus before training -- node frequencies, the noise distribution and the
subsampling keep probabilities.

A run is ``epochs * num_walks`` rounds; each round starts one walk from every node, in a
fresh random order, ``chunk_walks`` walks at a time. Walks are drawn as they are trained,
into one buffer, so memory holds one chunk whatever the graph's size.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

import torch

from .._allocator import without_huge_pages
from ..graph import Graph
from ..sampling.negatives import NegativeSampler
from ..sampling.permutation import RandomOrder
from ..sampling.subsampling import keep_probabilities
from ..sampling.walks import RandomWalker
from .options import SkipGramOptions

__all__ = ["Chunk", "Corpus"]


@dataclasses.dataclass(frozen=True)
class Chunk:
    """One chunk of walks of a run.

    Attributes
    ----------
    index, count : int
        Its position among the run's chunks, and their number.
    walks : Tensor of int64 (W, walk_length)
        Node ids, -1 after the end of a walk that reached a node without out-edges: this
        rank's share of the chunk's walks, valid until the next chunk is drawn (every chunk
        of a run is written into the same buffer).
    size : int
        Walks in the chunk, over all ranks.
    """

    index: int
    count: int
    walks: torch.Tensor
    size: int

    @property
    def name(self) -> str:
        """How messages name it ("walk chunk 3 of 12")."""
        return f"walk chunk {self.index + 1} of {self.count}"


class Corpus:
    """The walks of a run on ``graph``, chunk by chunk (:meth:`chunks`), and what the
    backends need to know of the graph: its size, its device, the noise distribution and
    the subsampling keep probabilities.

    word2vec counts the tokens of its corpus before training; walks are drawn as they are
    trained, so their expected counts stand in: a node's in-degree, or with weighted walks
    the sum of its in-edges' weights -- on an undirected graph exactly the walk's long-run
    share of visits (its stationary distribution). The noise distribution is those counts
    to the power 0.75 (uniform on a graph without edges).

    Rank ``rank`` of ``world_size`` draws its share of every chunk (the same start nodes
    in the same order on every rank, split among them; walks from a stream of its own).
    """

    def __init__(
        self, graph: Graph, options: SkipGramOptions, rank: int = 0, world_size: int = 1
    ) -> None:
        self._rank, self._world_size = rank, world_size
        self._options = options
        self.num_nodes = graph.num_nodes
        """Nodes of the graph: rows of the tables."""
        self.device = graph.device
        """Where the walks are drawn."""
        self._graph = graph
        self._walker = RandomWalker(graph, options.p, options.q, weighted=options.weighted)
        per_round = -(-graph.num_nodes // options.chunk_walks)
        self.count = per_round * options.epochs * options.num_walks
        """Chunks in the run."""
        self.total_walks = options.epochs * options.num_walks * graph.num_nodes
        """Walks in the run (each trained ``passes`` times)."""

    @property
    def graph(self) -> Graph:
        """The graph walked on."""
        return self._graph

    @property
    def options(self) -> SkipGramOptions:
        """What the run does."""
        return self._options

    @functools.cached_property
    def keep(self) -> torch.Tensor:
        """Subsampling keep probability per node: float64 (N,) (built on first use: a
        backend that reads the counts in place never builds it)."""
        return keep_probabilities(self.token_counts, self._options.sample)

    @functools.cached_property
    def noise(self) -> NegativeSampler:
        """The noise distribution (built on first use, as :attr:`keep`)."""
        counts = self.token_counts
        return NegativeSampler(counts if bool((counts > 0).any()) else torch.ones_like(counts))

    @property
    def token_counts(self) -> torch.Tensor:
        """Expected visits of the walks per node, up to a constant: float64 (N,) (computed
        on each call: the corpus keeps only what training reads)."""
        graph = self._graph
        counts = graph.weighted_in_degrees() if self._options.weighted else graph.in_degrees()
        return counts.to(torch.float64)

    def chunks(self) -> Iterator[Chunk]:
        """Every chunk of the run: each round a fresh permutation of the nodes
        (:class:`~graphemb.sampling.permutation.RandomOrder`), a walk from each,
        ``chunk_walks`` walks at a time; seeded by the options' ``seed``. A chunk's walks
        live in one buffer that the next chunk overwrites: train a chunk before drawing the
        next."""
        options = self._options
        device = self.device
        stream = options.seed * 1_000_003 + 7_919 * self._rank
        generator = torch.Generator(device=device).manual_seed(stream)
        # One buffer for every chunk's walks: a fresh one per chunk would land beside the
        # allocator's holes and hold several chunks' memory over a run.
        most = -(-min(options.chunk_walks, self.num_nodes) // self._world_size)
        buffer = torch.empty((most, options.walk_length), dtype=torch.int64, device=device)
        if buffer.device.type == "cpu":  # its size, not whole huge pages (2.5 MiB, not 4)
            without_huge_pages(buffer)
        index = 0
        for turn in range(options.epochs * options.num_walks):
            # the round's order computed chunk by chunk: no permutation of N nodes is held
            order = RandomOrder(self.num_nodes, seed=_round_seed(options.seed, turn), device=device)
            for begin in range(0, self.num_nodes, options.chunk_walks):
                size = min(options.chunk_walks, self.num_nodes - begin)
                first, count = _share(size, self._rank, self._world_size)
                out = buffer[:count]
                # this rank's start nodes, computed into the first column of its walks: no
                # array of them is held beside the buffer
                mine = order.chunk(begin + first, begin + first + count, out=out[:, 0])
                walks = self._walker(mine, options.walk_length - 1, generator=generator, out=out)
                yield Chunk(index, self.count, walks, size)
                index += 1


def _share(size: int, rank: int, world_size: int) -> tuple[int, int]:
    """Where rank ``rank``'s share of a chunk of ``size`` walks starts in it, and its
    length: the chunk cut as ``torch.tensor_split`` cuts it (the first ``size % world_size``
    ranks take one more)."""
    base, extra = divmod(size, world_size)
    return rank * base + min(rank, extra), base + (rank < extra)


def _round_seed(seed: int, turn: int) -> int:
    """The key of round ``turn``'s order of start nodes in a run seeded ``seed``."""
    return (seed * 0x9E3779B97F4A7C15 + turn) & 0xFFFFFFFFFFFFFFFF
