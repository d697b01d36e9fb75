"""One save or load: the embeddings and optimizer it covers, their tables, the chunking of
rows, and the phases every rank agrees on
(:class:`~graphemb.distributed.agreement.PhaseAgreement`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._checks import as_size
from ..distributed.agreement import PhaseAgreement
from ..embedding import NodeEmbedding
from ..optim.optimizer import SparseOptimizer

__all__ = ["CheckpointJob", "Table", "CHUNK_BYTES"]

CHUNK_BYTES = 64 << 20  # default bound of a table piece held in memory


@dataclass
class Table:
    """One table to save or load: the embedding's weight or a state of the optimizer."""

    file_name: str  # name of the tensor in the file
    tensor: torch.Tensor
    row_shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass
class CheckpointJob(PhaseAgreement):
    """The embeddings and optimizer of one save or load, agreed on phase by phase."""

    embeddings: list[NodeEmbedding]
    optimizer: SparseOptimizer | None
    chunk_bytes: int

    @classmethod
    def create(cls, embeddings, optimizer, chunk_bytes) -> CheckpointJob:
        if isinstance(embeddings, NodeEmbedding):
            embeddings = [embeddings]
        embeddings = list(embeddings)
        if not embeddings or not all(isinstance(e, NodeEmbedding) for e in embeddings):
            raise TypeError("embeddings must be a NodeEmbedding or a non-empty list of them")
        names = [e.name for e in embeddings]
        if len(set(names)) != len(names):
            raise ValueError(f"embedding names must be unique in a checkpoint, got {names}")
        if optimizer is not None:
            if not isinstance(optimizer, SparseOptimizer):
                raise TypeError(
                    f"optimizer must be a graphemb sparse optimizer, got {type(optimizer).__name__}"
                )
            missing = [e.name for e in optimizer.embeddings if e not in embeddings]
            if missing:
                raise ValueError(f"the optimizer also trains {missing}: pass them in embeddings")
        chunk_bytes = as_size("chunk_bytes", chunk_bytes, minimum=1)
        storages = [e.storage for e in embeddings]
        if (
            len({s.world_size for s in storages}) != 1
            or len({s.distributed for s in storages}) != 1
        ):
            raise ValueError("all embeddings of a checkpoint must belong to the same process group")
        coordinator, exchange = storages[0].coordinator, storages[0].exchange
        rank, world_size = storages[0].rank, storages[0].world_size
        key = (
            "" if coordinator is None else f"checkpoint/{coordinator.next_generation('checkpoint')}"
        )
        return cls(
            coordinator=coordinator,
            exchange=exchange,
            rank=rank,
            world_size=world_size,
            key=key,
            label="checkpoint",
            embeddings=embeddings,
            optimizer=optimizer,
            chunk_bytes=chunk_bytes,
        )

    def tables(self, embedding: NodeEmbedding) -> list[Table]:
        dim = embedding.embedding_dim
        tables = [
            Table(f"embedding/{embedding.name}/weight", embedding.weight, (dim,), embedding.dtype)
        ]
        if self.optimizer is not None and embedding in self.optimizer.state:
            layout = self.optimizer.state_layout(embedding)
            for key, tensor in self.optimizer.state[embedding].items():  # type: ignore[index]
                row_shape, dtype = layout[key]
                tables.append(Table(f"optimizer/{embedding.name}/{key}", tensor, row_shape, dtype))
        return tables

    def rows_per_chunk(self, embedding: NodeEmbedding) -> int:
        row_bytes = sum(
            math.prod(t.row_shape) * t.tensor.element_size() for t in self.tables(embedding)
        )
        return max(1, self.chunk_bytes // max(1, row_bytes))
