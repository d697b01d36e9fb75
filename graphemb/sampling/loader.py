"""``SeedLoader``: mini-batches of seed nodes, each sampled into blocks, one share per rank.

Example
-------
>>> import torch
>>> from graphemb.graph import Graph
>>> from graphemb.sampling import NeighborSampler, SeedLoader
>>> g = Graph.from_edges(torch.arange(9), torch.arange(1, 10))       # a path 0 -> ... -> 9
>>> loader = SeedLoader(g, torch.arange(10), NeighborSampler([2, 2]), batch_size=4,
...                     shuffle=True, seed=0)
>>> len(loader), [output_nodes.numel() for _, output_nodes, _ in loader]
(3, [4, 4, 2])
>>> loader.set_epoch(1)                                          # a new shuffle, every rank alike
>>> two_ranks = [SeedLoader(g, torch.arange(10), NeighborSampler([2]), 3, rank=r, world_size=2)
...              for r in range(2)]
>>> [[batch.tolist() for _, batch, _ in ranked] for ranked in two_ranks]
[[[0, 2, 4], [6, 8]], [[1, 3, 5], [7, 9]]]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, get_worker_info

from .._checks import as_size, check_node_id_vector, check_node_ids
from ..graph import Graph
from .protocol import Batch, BlockSampler

__all__ = ["SeedLoader"]
_SHUFFLE, _SAMPLING = 0, 1  # purposes of the derived seeds


class SeedLoader(IterableDataset[Batch]):
    """Batches of seed nodes sampled into blocks: ``(input_nodes, output_nodes, blocks)``.

    **Ranks.** With ``world_size`` N (default: from ``torch.distributed`` when it is
    initialised, else 1), the epoch's order of the seeds is the same on every rank and rank
    ``r`` takes its positions ``r, r + N, r + 2N, ...``, as
    :class:`torch.utils.data.distributed.DistributedSampler` does. Every rank gets exactly
    ``len(loader)`` batches of the same sizes, so collective steps (partitioned lookups,
    optimizer steps) line up, and the ranks' ``b``-th batches together are the ``b``-th
    batch one process would get with batch size ``N * batch_size`` (but for the padding):

    * ``drop_last=False``: when N does not divide the number of seeds, the order is padded
      by wrapping around to the next multiple of N, so up to N - 1 seeds are taken twice (on
      different ranks) in an epoch; the last batch may be short.
    * ``drop_last=True``: the seeds after the last whole multiple of ``N * batch_size`` in
      the order are left out (no short batch); the ranks' shares are disjoint.

    **Epochs.** Call :meth:`set_epoch` before every epoch, as with ``DistributedSampler``:
    the shuffle and the neighbour sampling of a batch are functions of ``(seed, epoch,
    rank, batch index)`` only. So an epoch is reproducible, the same with and without
    ``prefetch`` or DataLoader workers, and without ``set_epoch`` every epoch repeats.

    **Prefetch.** ``prefetch=True`` samples the next batch in a background thread while the
    current one is used (on a side CUDA stream when sampling or ``device`` is on a GPU);
    the batches are identical to ``prefetch=False``.

    **Rows.** ``prefetch_rows`` (NodeEmbeddings) has each batch's ``input_nodes`` handed to
    their :meth:`~graphemb.NodeEmbedding.prefetch` as soon as the batch is sampled, in batch
    order -- with ``prefetch=True`` while the previous batch is in use -- so that the lookup
    ``emb(input_nodes)`` finds its ids already routed (tables created with ``overlap=True``;
    elsewhere a no-op). Every batch must then be looked up, in order, on every rank.

    **DataLoader.** This is an :class:`~torch.utils.data.IterableDataset` that yields whole
    batches: ``DataLoader(loader, batch_size=None, num_workers=W)`` spreads the batches over
    W workers (worker ``w`` samples batches ``w, w + W, ...``) and yields them in order.

    Parameters
    ----------
    graph : Graph
        The graph to sample from; sampling runs on its device.
    seeds : Tensor, array or sequence of int, shape (S,); or bool Tensor, shape (num_nodes,)
        Distinct node ids (e.g. the training nodes), or a boolean mask over the nodes.
    sampler : NeighborSampler or any object with ``sample_blocks(graph, seeds, generator)``
    batch_size : int
        Seeds per batch on each rank (>= 1).
    shuffle : bool
        Shuffle the seeds every epoch (the same permutation on every rank).
    drop_last : bool
        Leave out the short last batch and the seeds that do not divide among the ranks.
    seed : int
        Base of every random draw (>= 0), like ``DistributedSampler``'s ``seed``.
    rank, world_size : int, optional
        This rank and the number of ranks; give both or neither.
    prefetch : bool
        Sample the next batch ahead, in a background thread.
    device : torch.device or str, optional
        Where the returned nodes and blocks are moved. Default: the graph's device.
    prefetch_rows : NodeEmbedding or sequence of them, optional
        Embeddings whose rows of ``input_nodes`` are prefetched for every batch (see
        **Rows**). Not with DataLoader workers (other processes).

    Yields
    ------
    input_nodes : Tensor of int64, shape (S_0,)
        ``blocks[0].src_nodes``.
    output_nodes : Tensor of int64, shape (B,)
        This batch's seeds.
    blocks : list of Block
        As returned by ``sampler.sample_blocks``.
    """

    def __init__(
        self,
        graph: Graph,
        seeds: Any,
        sampler: BlockSampler,
        batch_size: int,
        *,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        prefetch: bool = False,
        device: torch.device | str | None = None,
        prefetch_rows: Any = None,
    ) -> None:
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a graphemb Graph, got {type(graph).__name__}")
        if not callable(getattr(sampler, "sample_blocks", None)):
            raise TypeError(
                f"sampler must have a sample_blocks(graph, seeds, generator) method, got "
                f"{type(sampler).__name__}"
            )
        self.graph = graph
        self.seeds = _as_seed_ids(graph, seeds)
        self.sampler = sampler
        self.batch_size = as_size("batch_size", batch_size, minimum=1)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.seed = as_size("seed", seed)
        self.rank, self.world_size = _rank_and_world_size(rank, world_size)
        self.prefetch = bool(prefetch)
        self.device = graph.device if device is None else torch.device(device)
        self.epoch = 0
        self.prefetch_rows = _as_embeddings(prefetch_rows)

    # ------------------------------------------------------------------ public
    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s shuffle and sampling for the next iterations (>= 0)."""
        self.epoch = as_size("epoch", epoch)

    @property
    def seeds_per_rank(self) -> int:
        """Seeds each rank visits per epoch (padding included, short batch dropped or not)."""
        count = self.seeds.numel()
        if self.drop_last:
            return count // self.world_size // self.batch_size * self.batch_size
        return math.ceil(count / self.world_size)

    def __len__(self) -> int:
        """Batches per epoch, the same on every rank."""
        return math.ceil(self.seeds_per_rank / self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        batches = list(enumerate(self._rank_batches()))
        worker = get_worker_info()
        if worker is not None and self.prefetch_rows:
            raise ValueError(
                "prefetch_rows needs the batches in the training process, not in DataLoader "
                f"worker {worker.id}: use prefetch=True instead of DataLoader workers"
            )
        if worker is not None:  # inside a DataLoader worker: every num_workers-th batch
            batches = batches[worker.id :: worker.num_workers]
        if not self.prefetch:
            for index, seeds in batches:
                yield self._sample(index, seeds)
            return
        yield from self._prefetched(batches)

    def __repr__(self) -> str:
        return (
            f"SeedLoader(num_seeds={self.seeds.numel()}, batch_size={self.batch_size}, "
            f"batches={len(self)}, rank={self.rank}, world_size={self.world_size}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last}, prefetch={self.prefetch})"
        )

    # ------------------------------------------------------------------ batches
    def _rank_batches(self) -> tuple[torch.Tensor, ...]:
        """This rank's batches of seeds for the current epoch."""
        count = self.seeds.numel()
        if self.shuffle:
            # the same permutation on every rank: its seed leaves the rank out
            generator = torch.Generator().manual_seed(self._derived_seed(_SHUFFLE, rank=0))
            order = torch.randperm(count, generator=generator).to(self.seeds.device)
        else:
            order = torch.arange(count, device=self.seeds.device)
        total = self.seeds_per_rank * self.world_size
        if total > count:  # pad by wrapping around (as many times as needed)
            order = order.repeat(math.ceil(total / count))
        share = order[:total][self.rank :: self.world_size]
        if not share.numel():
            return ()  # (split would give one empty batch)
        return self.seeds.index_select(0, share).split(self.batch_size)

    def _derived_seed(self, purpose: int, rank: int, batch: int = 0) -> int:
        """A 63-bit seed from (seed, epoch, purpose, rank, batch): independent streams."""
        words = np.random.SeedSequence(
            [self.seed, self.epoch, purpose, rank, batch]
        ).generate_state(2, dtype=np.uint32)
        return (int(words[0]) << 31) ^ int(words[1])

    def _sample(self, index: int, seeds: torch.Tensor) -> Batch:
        generator = torch.Generator(device=self.graph.device)
        generator.manual_seed(self._derived_seed(_SAMPLING, self.rank, index))
        input_nodes, output_nodes, blocks = self.sampler.sample_blocks(
            self.graph, seeds, generator=generator
        )
        if self.device != self.graph.device:
            input_nodes = input_nodes.to(self.device)
            output_nodes = output_nodes.to(self.device)
            blocks = [block.to(self.device) for block in blocks]
        for embedding in self.prefetch_rows:  # in batch order: lookups use them in order
            embedding.prefetch(input_nodes)
        return input_nodes, output_nodes, blocks

    # ------------------------------------------------------------------ prefetch
    def _prefetched(self, batches: Sequence[tuple[int, torch.Tensor]]) -> Iterator[Batch]:
        cuda = next((d for d in (self.graph.device, self.device) if d.type == "cuda"), None)
        stream = torch.cuda.Stream(cuda) if cuda is not None else None

        if stream is not None:  # the seed batches were cut on the consumer's stream
            stream.wait_stream(torch.cuda.current_stream(cuda))

        def work(index: int, seeds: torch.Tensor) -> tuple[Batch, Any]:
            if stream is None:
                return self._sample(index, seeds), None
            with torch.cuda.stream(stream):  # overlaps with the consumer's stream
                if seeds.is_cuda:
                    seeds.record_stream(stream)
                batch = self._sample(index, seeds)
                done = torch.cuda.Event()
                done.record(stream)
            return batch, done

        if not batches:
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="SeedLoader") as pool:
            pending: Future = pool.submit(work, *batches[0])
            for following in [*batches[1:], None]:
                batch, done = pending.result()
                if following is not None:  # start the next batch before handing this one out
                    pending = pool.submit(work, *following)
                if done is not None and cuda is not None:
                    _hand_over(batch, done, cuda)
                yield batch


def _hand_over(batch: Batch, done: torch.cuda.Event, device: torch.device) -> None:
    """Make the consumer's stream wait for the side stream's batch, and keep the batch's
    memory from being reused by the side stream while the consumer may still read it."""
    consumer = torch.cuda.current_stream(device)
    consumer.wait_event(done)
    input_nodes, output_nodes, blocks = batch
    tensors = [input_nodes, output_nodes]
    for block in blocks:
        tensors += block._tensors()
    for tensor in tensors:
        if tensor.device.type == "cuda":
            tensor.record_stream(consumer)


def _as_embeddings(prefetch_rows: Any) -> tuple:
    """``prefetch_rows`` as a tuple of objects with a ``prefetch(ids)`` method."""
    if prefetch_rows is None:
        return ()
    items = tuple(prefetch_rows) if isinstance(prefetch_rows, (list, tuple)) else (prefetch_rows,)
    for item in items:
        if not callable(getattr(item, "prefetch", None)):
            raise TypeError(
                f"prefetch_rows must hold NodeEmbeddings (with a prefetch method), got "
                f"{type(item).__name__}"
            )
    return items


def _rank_and_world_size(rank: int | None, world_size: int | None) -> tuple[int, int]:
    if rank is None and world_size is None:
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return 0, 1
    if rank is None or world_size is None:
        raise ValueError(
            f"give both rank and world_size or neither, got rank={rank!r}, "
            f"world_size={world_size!r}"
        )
    world_size = as_size("world_size", world_size, minimum=1)
    rank = as_size("rank", rank)
    if rank >= world_size:
        raise ValueError(f"rank = {rank} must lie in [0, world_size = {world_size})")
    return rank, world_size


def _as_seed_ids(graph: Graph, seeds: Any) -> torch.Tensor:
    """Distinct int64 node ids on the graph's device (from ids or a boolean node mask)."""
    if isinstance(seeds, torch.Tensor) and seeds.dtype == torch.bool:
        if seeds.shape != (graph.num_nodes,):
            raise ValueError(
                f"a boolean seed mask must have shape ({graph.num_nodes},), got "
                f"{tuple(seeds.shape)}"
            )
        return torch.nonzero(seeds.to(graph.device)).squeeze(1)
    if not isinstance(seeds, torch.Tensor):
        array = np.asarray(seeds)
        if array.size and array.dtype.kind not in "iu":
            raise TypeError(f"seeds must hold integer node ids, got dtype {array.dtype}")
        seeds = torch.from_numpy(array.astype(np.int64, copy=False))
    seeds = check_node_id_vector("seeds", seeds).to(device=graph.device, dtype=torch.int64)
    check_node_ids(seeds, graph.num_nodes, "seeds")
    if seeds.numel():
        ordered = torch.sort(seeds).values
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        if repeated.numel():
            raise ValueError(
                f"seeds must be distinct, but node {int(repeated[0])} appears more than once"
            )
    return seeds
