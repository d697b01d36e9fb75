"""Load: validate everything first (metadata, shapes, checksums, extra) on the ranks that
read, then stream every row to its owner in lockstep rounds."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..embedding import NodeEmbedding
from ..optim.optimizer import SparseOptimizer
from .format import EXTRA, MANIFEST, check_compatible, decode_extra, file_metadata
from .job import CHUNK_BYTES, CheckpointJob
from .tensorfile import TensorFileReader

__all__ = ["load"]


def load(
    path: str | os.PathLike,
    embeddings: NodeEmbedding | Sequence[NodeEmbedding],
    optimizer: SparseOptimizer | None = None,
    *,
    chunk_bytes: int = CHUNK_BYTES,
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save` into ``embeddings`` (and ``optimizer``).

    Embeddings are matched by name; the checkpoint may hold more than asked for. Layout,
    world size, partition and device may all differ from the saving run's. Everything is
    validated first: a missing, truncated or corrupt file, a format version this graphemb
    does not read, an unknown name, a shape or dtype mismatch, an optimizer of another
    class or with other param groups, or an ``extra`` that cannot be read safely raise
    (``FileNotFoundError`` / ``ValueError`` naming the field, ``pickle.UnpicklingError``)
    on every rank and change nothing. The optimizer's param groups and step counter are
    restored by its own :meth:`~graphemb.optim.SparseOptimizer.prepare_load`.

    Returns
    -------
    dict
        ``{"extra": the saved extra (or None), "metadata": the checkpoint's metadata}``.
    """
    job = CheckpointJob.create(embeddings, optimizer, chunk_bytes)
    with contextlib.ExitStack() as open_files:  # readers stay open from validation to the end
        source = _open_source(job, Path(path), open_files)
        _write_rows(job, source)
        if source.apply_optimizer is not None:
            source.apply_optimizer()
    return {"extra": source.extra, "metadata": source.metadata}


@dataclass
class _Task:
    """Rows [start, stop) of one embedding in one file, read by ``reader`` (a rank)."""

    file: Path
    start: int
    stop: int
    reader: int
    ids_tensor: str | None  # None: the rows are the global ids start..stop (single file)


@dataclass
class _Source:
    """A validated checkpoint: metadata, files (held open on the ranks that read them),
    rows per file, the decoded extra and the optimizer's restore function."""

    metadata: dict
    files: list[Path]
    readers: dict[Path, TensorFileReader] = field(default_factory=dict)
    rows: dict[Path, dict[str, int]] = field(default_factory=dict)  # sharded: rows per file
    extra_bytes: bytes | None = None  # rank 0, before the broadcast
    extra: Any = None
    apply_optimizer: Callable[[], None] | None = None

    @property
    def sharded(self) -> bool:
        return self.metadata["layout"] == "sharded"

    def tasks(self, job: CheckpointJob, embedding: NodeEmbedding) -> list[_Task]:
        chunk = job.rows_per_chunk(embedding)
        if not self.sharded:
            n = embedding.num_embeddings
            return [_Task(self.files[0], s, min(s + chunk, n), 0, None) for s in range(0, n, chunk)]
        tasks: list[_Task] = []
        for file in self.files:
            rows = self.rows[file][embedding.name]
            for start in range(0, rows, chunk):
                tasks.append(
                    _Task(
                        file,
                        start,
                        min(start + chunk, rows),
                        len(tasks) % job.world_size,
                        f"ids/{embedding.name}",
                    )
                )
        return tasks


def _open_source(job: CheckpointJob, path: Path, open_files: contextlib.ExitStack) -> _Source:
    """Read and validate the checkpoint (metadata, shapes, checksums, extra) on the ranks
    that read it; every rank raises if any found a problem. Changes nothing."""
    sharded = job.share("layout", {"sharded": path.is_dir()} if job.rank == 0 else None)["sharded"]

    def validate() -> _Source | None:
        if sharded:  # every rank reads a share of the shards
            manifest = path / MANIFEST
            if not manifest.is_file():
                raise FileNotFoundError(f"sharded checkpoint {str(path)!r} has no {MANIFEST}")
            try:
                meta = json.loads(manifest.read_text())
                files = [path / name for name in meta["shards"]]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ValueError(f"{manifest}: corrupt manifest ({err})") from None
        elif job.rank == 0:  # the file only needs to be visible to rank 0
            reader = open_files.enter_context(TensorFileReader(path))
            meta, files = file_metadata(reader), [path]
        else:
            return None
        check_compatible(meta, job)
        source = _Source(meta, files)
        for file in files:
            source.readers[file] = (
                reader if not sharded else open_files.enter_context(TensorFileReader(file))
            )
        mine = files[job.rank :: job.world_size] if sharded else files
        source.rows = _check_files(job, meta, source.readers, verify=mine)
        if meta["extra"] and job.rank == 0:  # read now: nothing may fail after the first write
            source.extra_bytes = source.readers[files[0]].read(EXTRA).numpy().tobytes()
        return source

    validated = job.run("validation", validate)
    if not sharded:
        meta = job.share("metadata", validated.metadata if validated is not None else None)
        validated = validated or _Source(meta, [path])
    source: _Source = validated  # type: ignore[assignment]
    extra = None
    if source.metadata["extra"]:
        extra = job.broadcast_bytes(source.extra_bytes, "checkpoint extra")

    def prepare() -> None:
        # Every rank: the optimizer's own check (and restore function), the extra decoded
        # (a forged pickle raises here, before any row changes).
        source.apply_optimizer = check_compatible(source.metadata, job)
        if extra is not None:
            source.extra = decode_extra(extra)

    job.run("preparation", prepare)
    return source


def _check_files(
    job: CheckpointJob, meta: dict, readers: dict[Path, TensorFileReader], verify: list[Path]
) -> dict[Path, dict[str, int]]:
    """Every tensor the load needs exists with the right dtype and shape; checksums hold
    for the files in ``verify``. Returns the rows of every embedding in every file."""
    rows_by_file: dict[Path, dict[str, int]] = {}
    for file, reader in readers.items():
        rows_by_file[file] = {}
        for e in job.embeddings:
            rows = e.num_embeddings
            if meta["layout"] == "sharded":
                ids = reader.specs.get(f"ids/{e.name}")
                if ids is None or len(ids.shape) != 1 or ids.dtype != torch.int64:
                    raise ValueError(f"{file}: no ids of embedding {e.name!r}")
                rows = ids.shape[0]
            rows_by_file[file][e.name] = rows
            for table in job.tables(e):
                spec = reader.specs.get(table.file_name)
                expected = (rows, *table.row_shape)
                if spec is None or spec.shape != expected or spec.dtype != table.dtype:
                    raise ValueError(
                        f"{file}: tensor {table.file_name!r} should be {table.dtype} of shape "
                        f"{expected}, found {spec and (spec.dtype, spec.shape)}"
                    )
        if meta["extra"] and file == list(readers)[0] and EXTRA not in reader.specs:
            raise ValueError(f"{file}: the metadata announces an extra that is not there")
        if file in verify:
            for name in reader.specs:
                reader.verify(name)
    return rows_by_file


def _write_rows(job: CheckpointJob, source: _Source) -> None:
    """Send every row of the checkpoint to its owner, in lockstep rounds (collective).

    Every round reads first and votes: a read that fails on one rank stops every rank
    before that round writes anything."""

    def stream() -> None:
        readers = job.world_size if source.sharded else 1
        for embedding in job.embeddings:
            storage = embedding.storage
            tables = job.tables(embedding)
            tasks = source.tasks(job, embedding)
            mine = [t for t in tasks if t.reader == job.rank]
            operation = f"checkpoint load of {embedding.name!r}"
            for round_index in range(math.ceil(len(tasks) / readers)):
                task = mine[round_index] if round_index < len(mine) else None
                ids = torch.empty(0, dtype=torch.int64)
                rows = [torch.empty((0, *t.row_shape), dtype=t.dtype) for t in tables]
                error = None
                if task is not None:
                    try:
                        reader = source.readers[task.file]
                        ids = (
                            torch.arange(task.start, task.stop)
                            if task.ids_tensor is None
                            else reader.read(task.ids_tensor, task.start, task.stop)
                        )
                        rows = [reader.read(t.file_name, task.start, task.stop) for t in tables]
                    except BaseException as err:  # noqa: B036 - voted on, then re-raised
                        error = err
                job.vote(error, operation)
                storage.write_rows(
                    [t.tensor for t in tables],
                    ids.to(storage.device),
                    [r.to(storage.device) for r in rows],
                    operation,
                )
            storage.after_update(operation)

    job.run("read", stream)
