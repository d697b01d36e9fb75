"""Save: gather rows chunk by chunk to one file (rank 0), or write each rank's own rows to
its shard and commit the shards with an atomically replaced manifest."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..distributed.coordination import CoordinationError
from ..embedding import NodeEmbedding
from ..optim.optimizer import SparseOptimizer
from .format import EXTRA, MANIFEST, encode_extra, metadata, shard_name
from .job import CHUNK_BYTES, CheckpointJob
from .tensorfile import TensorFileWriter, TensorSpec

__all__ = ["save"]


def save(
    path: str | os.PathLike,
    embeddings: NodeEmbedding | Sequence[NodeEmbedding],
    optimizer: SparseOptimizer | None = None,
    *,
    extra: dict[str, Any] | None = None,
    sharded: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
) -> None:
    """Write a checkpoint of ``embeddings`` (and ``optimizer``'s state) to ``path``.

    Parameters
    ----------
    path : str or PathLike
        A file (single layout) or a directory (``sharded=True``).
    embeddings : NodeEmbedding or sequence of NodeEmbedding
        Tables to save; names must be unique. Every embedding of ``optimizer`` must be
        among them.
    optimizer : SparseOptimizer, optional
        Saves its class, hyper-parameters per group, step counter and per-row state.
    extra : dict, optional
        Anything else needed to resume -- dense ``model.state_dict()``, a dense optimizer's
        or LR scheduler's state, the epoch: tensors and plain Python values only (it is
        read back with ``torch.load(weights_only=True)``). Only rank 0's is saved.
    sharded : bool
        Each rank writes its own rows, in parallel (see the module docstring).
    chunk_bytes : int
        Largest piece of a table held in memory at once (any integer-like value >= 1).

    Raises
    ------
    TypeError, ValueError, OSError
        On every rank when any rank fails (see the module docstring); the previous
        checkpoint at ``path`` is left as it was.

    Examples
    --------
    >>> import os, tempfile, torch, graphemb
    >>> from graphemb.optim import SparseAdam
    >>> emb = graphemb.NodeEmbedding(100, 8, "ckpt-demo", init_func=torch.nn.init.normal_)
    >>> opt = SparseAdam([emb], lr=0.01)
    >>> path = os.path.join(tempfile.mkdtemp(), "demo.ckpt")
    >>> graphemb.save(path, emb, opt, extra={"epoch": 3})
    >>> fresh = graphemb.NodeEmbedding(100, 8, "ckpt-demo")
    >>> graphemb.load(path, fresh, SparseAdam([fresh]))["extra"]
    {'epoch': 3}
    >>> torch.equal(fresh.weight, emb.weight)
    True
    """
    job = CheckpointJob.create(embeddings, optimizer, chunk_bytes)
    path = Path(path)
    if sharded:
        _save_sharded(job, path, extra)
    else:
        _save_single(job, path, extra)


def _save_single(job: CheckpointJob, path: Path, extra: dict[str, Any] | None) -> None:
    with contextlib.ExitStack() as stack:  # drops the temporary file unless committed

        def prepare() -> tuple[TensorFileWriter | None, bytes | None]:
            meta = metadata(job, "single", extra is not None)
            if job.rank != 0:
                return None, None
            blob = encode_extra(extra)
            if path.is_dir():
                raise FileExistsError(f"{str(path)!r} is a directory (a sharded checkpoint?)")
            specs = [
                TensorSpec(t.file_name, t.dtype, (e.num_embeddings, *t.row_shape))
                for e in job.embeddings
                for t in job.tables(e)
            ]
            if blob is not None:
                specs.append(TensorSpec(EXTRA, torch.uint8, (len(blob),)))
            writer = TensorFileWriter(path, specs, {"graphemb": json.dumps(meta)})
            return stack.enter_context(writer), blob

        writer, blob = job.run("prepare", prepare)
        job.run("write", lambda: _write_single(job, writer, blob))


def _write_single(job: CheckpointJob, writer: TensorFileWriter | None, blob: bytes | None) -> None:
    """Rank 0 pulls every row chunk by chunk and writes it; the others answer the pulls
    (collective if partitioned). Every rank takes part in every round."""
    for embedding in job.embeddings:
        storage, chunk = embedding.storage, job.rows_per_chunk(embedding)
        operation = f"checkpoint save of {embedding.name!r}"
        for table in job.tables(embedding):
            for start in range(0, embedding.num_embeddings, chunk):
                stop = min(start + chunk, embedding.num_embeddings)
                error = None
                try:
                    ids = torch.arange(
                        start, stop if job.rank == 0 else start, device=storage.device
                    )
                    rows = storage.read_rows(table.tensor, ids, operation)
                    if writer is not None:
                        writer.write(table.file_name, rows)
                except CoordinationError:
                    raise  # the collective failed: every rank knows
                except BaseException as err:  # noqa: B036 - voted on, then re-raised
                    error = err
                job.vote(error, operation)
    if writer is not None:
        if blob is not None:
            writer.write(EXTRA, torch.frombuffer(bytearray(blob), dtype=torch.uint8))
        writer.commit()


def _save_sharded(job: CheckpointJob, path: Path, extra: dict[str, Any] | None) -> None:
    def prepare() -> tuple[dict, str | None, bytes | None]:
        meta = metadata(job, "sharded", extra is not None)
        if job.rank != 0:
            return meta, None, None
        blob = encode_extra(extra)
        if path.exists() and not path.is_dir():
            raise FileExistsError(f"{str(path)!r} is a file (a single-file checkpoint?)")
        path.mkdir(exist_ok=True)  # like torch.save, missing parents are an error
        return meta, secrets.token_hex(4), blob

    meta, token, blob = job.run("prepare", prepare)
    token = job.share("token", {"token": token})["token"]
    shard = path / shard_name(token, job.rank, job.world_size)
    try:
        job.run("write", lambda: _write_shard(job, shard, meta, blob))
    except BaseException:
        shard.unlink(missing_ok=True)  # no manifest names it: the manifest is written last
        raise
    # The commit point: rank 0 replaces the manifest, which names the new shards.
    job.run("commit", lambda: _write_manifest(job, path, meta, token) if job.rank == 0 else None)


def _write_shard(job: CheckpointJob, shard: Path, meta: dict, blob: bytes | None) -> None:
    """The rows this rank owns, read from its own memory: no communication."""
    owned = {e.name: e.storage.owned_ids() for e in job.embeddings}
    specs = []
    for e in job.embeddings:
        count = owned[e.name].numel()
        specs.append(TensorSpec(f"ids/{e.name}", torch.int64, (count,)))
        specs += [TensorSpec(t.file_name, t.dtype, (count, *t.row_shape)) for t in job.tables(e)]
    if blob is not None:
        specs.append(TensorSpec(EXTRA, torch.uint8, (len(blob),)))
    with TensorFileWriter(shard, specs, {"graphemb": json.dumps(meta)}) as writer:
        for e in job.embeddings:
            ids = owned[e.name]
            writer.write(f"ids/{e.name}", ids)
            chunk = job.rows_per_chunk(e)
            for table in job.tables(e):
                for start in range(0, ids.numel(), chunk):
                    job.check_peers("write")  # stop early when another rank failed
                    local = e.storage.local_index(ids[start : start + chunk])
                    writer.write(table.file_name, table.tensor.index_select(0, local))
        if blob is not None:
            writer.write(EXTRA, torch.frombuffer(bytearray(blob), dtype=torch.uint8))
        writer.commit()


def _write_manifest(job: CheckpointJob, path: Path, meta: dict, token: str) -> None:
    shards = [shard_name(token, r, job.world_size) for r in range(job.world_size)]
    manifest = {**meta, "token": token, "shards": shards}
    tmp = path / f"{MANIFEST}.tmp-{token}"
    try:
        tmp.write_text(json.dumps(manifest, indent=1))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path / MANIFEST)
    except BaseException:
        for name in [tmp.name, *shards]:  # not committed: the new files are garbage
            (path / name).unlink(missing_ok=True)
        raise
    # Committed: from here on nothing may fail the save (the shards are referenced now).
    with contextlib.suppress(OSError):
        for stale in path.iterdir():  # shards of older saves and of interrupted ones
            if stale.name.startswith("shard-") and stale.name not in shards:
                stale.unlink(missing_ok=True)
