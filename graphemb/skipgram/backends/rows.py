"""Where the torch backend's two tables live: in this process (:class:`LocalRows`), or as
:class:`~graphemb.NodeEmbedding` tables across the ranks of a process group
(:class:`EmbeddingRows`: shared memory on one machine, partitioned across machines or
GPUs), each rank training its share of every step."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ...embedding import NodeEmbedding
from ...optim import SparseSGD
from ...storage.initialization import uniform_by_id
from .base import INIT_RANGE, initial_tables

__all__ = ["EmbeddingRows", "LocalRows"]

Pair = tuple[torch.Tensor, torch.Tensor]


class LocalRows:
    """The input rows ``syn0`` and output rows ``syn1`` as tensors of this process.

    Parameters
    ----------
    syn0, syn1 : Tensor (N, D)
        The tables, updated in place.
    """

    rank, world_size = 0, 1

    def __init__(self, syn0: torch.Tensor, syn1: torch.Tensor) -> None:
        self.syn0, self.syn1 = syn0, syn1

    @classmethod
    def initial(cls, num_nodes: int, dimensions: int, seed: int, device: torch.device) -> LocalRows:
        """The tables every backend starts from (:func:`~.base.initial_tables`)."""
        syn0, syn1 = initial_tables(num_nodes, dimensions, seed)
        return cls(syn0.to(device), syn1.to(device))

    def read(
        self, contexts: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The input rows of ``contexts`` (P, D) and the output rows of ``targets`` (T, D)."""
        return self.syn0.index_select(0, contexts), self.syn1.index_select(0, targets)

    def add(
        self, contexts: torch.Tensor, dx: torch.Tensor, targets: torch.Tensor, dy: torch.Tensor
    ) -> None:
        """Add ``dx`` to the input rows of ``contexts``, ``dy`` to the output rows of
        ``targets`` (repeated ids add up)."""
        self.syn0.index_add_(0, contexts, dx)
        self.syn1.index_add_(0, targets, dy)

    def any_rank(self, flag: torch.Tensor) -> bool:
        """Whether ``flag`` (a 0-d bool tensor) is set."""
        return bool(flag)

    def input_rows(self) -> torch.Tensor:
        return self.syn0


class EmbeddingRows:
    """The two tables as :class:`~graphemb.NodeEmbedding` objects of the current process
    group (their storage chosen as for any embedding: shared memory on one CPU machine,
    partitioned on GPUs or across machines).

    Every rank reads the rows of its own pairs and hands back their changes as gradients;
    :class:`~graphemb.optim.SparseSGD` at a learning rate of the world size applies the
    sum of every rank's changes at each row's owner (the optimizers average gradients over
    ranks). Every call is collective: each rank makes the same calls, with or without
    pairs of its own.
    """

    def __init__(self, num_nodes: int, dimensions: int, seed: int, device: torch.device) -> None:
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        bound = INIT_RANGE / dimensions
        initial: Any = uniform_by_id(-bound, bound, seed=seed)  # init(rows, ids)
        self.center = NodeEmbedding(num_nodes, dimensions, "skipgram_input", device=device,
                                    init_func=initial)  # fmt: skip
        self.context = NodeEmbedding(num_nodes, dimensions, "skipgram_output", device=device,
                                     init_func=lambda table: table.zero_())  # fmt: skip
        self._optimizer = SparseSGD([self.center, self.context], lr=float(self.world_size))
        self._read: Pair | None = None

    def read(
        self, contexts: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows of ``contexts`` and ``targets``, pulled from their owners."""
        x, y = self.center(contexts), self.context(targets)
        self._read = (x, y)
        return x.detach(), y.detach()

    def add(
        self, contexts: torch.Tensor, dx: torch.Tensor, targets: torch.Tensor, dy: torch.Tensor
    ) -> None:
        """The rows last read move by ``dx`` and ``dy`` (summed over ranks at the owner)."""
        assert self._read is not None, "read() comes before add()"
        x, y = self._read
        torch.autograd.backward([x, y], [-dx, -dy])  # SGD: w -= lr * g, g = -change
        self._optimizer.step()
        self._read = None

    def any_rank(self, flag: torch.Tensor) -> bool:
        """Whether ``flag`` is set on any rank (collective)."""
        value = flag.to(torch.int32).reshape(1).to(self.center.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def input_rows(self) -> torch.Tensor:
        """The whole input table on every rank (collective)."""
        rows = self.center.all_get_embedding()
        assert rows is not None
        return rows
