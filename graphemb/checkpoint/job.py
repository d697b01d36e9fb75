"""Checkpoints: save embeddings and optimizer state from any layout, load into any other.

``save`` gathers every embedding's rows and the optimizer's per-row state (Adam moments and
per-row steps, Adagrad sums) to CPU and writes them with their metadata: format version,
names, shapes, dtypes, storage and partition, optimizer class and hyper-parameters
(including each group's current learning rate). ``load`` puts them back into embeddings of
any world size, partition or device -- 4 GPU ranks to 1 CPU process in a notebook, 1 process
to 3 ranks with range partitions -- after which training continues exactly as if it had
never stopped.

Two layouts:

* single file (default): rank 0 writes one file, pulling rows chunk by chunk (memory on
  rank 0 is bounded by the chunk, never a second copy of a table); at load rank 0 reads it
  and sends every row to its owner. The file only needs to be visible to rank 0.
* sharded (``sharded=True``): ``path`` is a directory; every rank writes the rows it owns in
  parallel, and ``manifest.json`` -- replaced atomically once every shard is on disk -- says
  which shards make the checkpoint. At load every rank reads a share of the shards and sends
  rows to their (new) owners. Needs a filesystem that every rank sees.
  (``torch.distributed.checkpoint`` reshards only between DTensor/ShardedTensor placements,
  contiguous even shards; a row ownership such as ``id % world_size`` or uneven ranges is
  outside what it can express, hence the explicit ids stored with each shard.)

Files use the safetensors layout (:mod:`graphemb.checkpoint.tensorfile`): tensors and JSON
only, nothing is unpickled except ``extra``, read with ``torch.load(weights_only=True)``.
Writes are atomic: an interrupted save (exception, SIGKILL) leaves the previous checkpoint
at ``path`` loadable.
``load`` checks everything -- format, version, names, shapes, dtypes, optimizer class and
state, checksums of every tensor -- before it changes anything.

With a process group both functions are collective: every rank calls them with the same
arguments. They run in phases (prepare, write; validate, read), and every phase ends with an
agreement: a failure on any one rank -- an ``extra`` rank 0 cannot encode, a full disk, a
malformed file, an exception of any type -- makes every rank raise at once, the failed rank
its own error and the others an error of the same built-in type naming the failed rank and
its message (:meth:`graphemb.distributed.coordination.Coordinator.agree`). Ranks that stream
rows in lockstep rounds vote after every round
(:meth:`graphemb.distributed.exchange.Exchange.any`), and ranks that write on their own poll
for a failed peer between chunks, so nobody works on for long after a peer failed. A failed
save leaves the previous checkpoint as it was; a failed load leaves the live tables and
optimizer as they were, with one exception: an I/O error while streaming rows whose
checksums were verified moments before (a failing disk -- the files are held open, so a
concurrent save cannot change them) stops the load on every rank with the rows of earlier
rounds already loaded.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from .._checks import as_size
from ..distributed.coordination import CoordinationError, Coordinator
from ..distributed.exchange import Exchange
from ..embedding import NodeEmbedding
from ..optim.optimizer import SparseOptimizer
from .tensorfile import TensorFileReader, TensorFileWriter, TensorSpec

__all__ = ["save", "load", "FORMAT_VERSION"]

FORMAT_NAME = "graphemb-checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_CHUNK_BYTES = 64 << 20
_EXTRA = "extra"

T = TypeVar("T")


# ====================================================================== public API
def save(
    path: str | os.PathLike,
    embeddings: NodeEmbedding | Sequence[NodeEmbedding],
    optimizer: SparseOptimizer | None = None,
    *,
    extra: dict[str, Any] | None = None,
    sharded: bool = False,
    chunk_bytes: int = _CHUNK_BYTES,
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
    job = _Job.create(embeddings, optimizer, chunk_bytes)
    path = Path(path)
    if sharded:
        _save_sharded(job, path, extra)
    else:
        _save_single(job, path, extra)


def load(
    path: str | os.PathLike,
    embeddings: NodeEmbedding | Sequence[NodeEmbedding],
    optimizer: SparseOptimizer | None = None,
    *,
    chunk_bytes: int = _CHUNK_BYTES,
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
    job = _Job.create(embeddings, optimizer, chunk_bytes)
    with contextlib.ExitStack() as open_files:  # readers stay open from validation to the end
        source = _open_source(job, Path(path), open_files)
        _write_rows(job, source)
        if source.apply_optimizer is not None:
            source.apply_optimizer()
    return {"extra": source.extra, "metadata": source.metadata}


# ====================================================================== the job
class _PeerFailed(Exception):
    """Another rank failed the current phase: stop; the agreement raises its error."""


@dataclass
class _Table:
    """One table to save or load: the embedding's weight or a state of the optimizer."""

    file_name: str  # name of the tensor in the file
    tensor: torch.Tensor
    row_shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass
class _Job:
    embeddings: list[NodeEmbedding]
    optimizer: SparseOptimizer | None
    coordinator: Coordinator | None
    exchange: Exchange | None
    rank: int
    world_size: int
    key: str
    chunk_bytes: int

    @classmethod
    def create(cls, embeddings, optimizer, chunk_bytes) -> _Job:
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
        return cls(embeddings, optimizer, coordinator, exchange, rank, world_size, key, chunk_bytes)

    def tables(self, embedding: NodeEmbedding) -> list[_Table]:
        dim = embedding.embedding_dim
        tables = [
            _Table(f"embedding/{embedding.name}/weight", embedding.weight, (dim,), embedding.dtype)
        ]
        if self.optimizer is not None and embedding in self.optimizer.state:
            layout = self.optimizer.state_layout(embedding)
            for key, tensor in self.optimizer.state[embedding].items():  # type: ignore[index]
                row_shape, dtype = layout[key]
                tables.append(_Table(f"optimizer/{embedding.name}/{key}", tensor, row_shape, dtype))
        return tables

    # ------------------------------------------------------------------ agreement
    def run(self, phase: str, work: Callable[[], T]) -> T:
        """This rank's part of ``phase``, then the agreement: every rank raises if any rank
        failed, whatever the exception (a rank that raised alone would leave the others
        waiting until the timeout)."""
        result, error = None, None
        try:
            result = work()
        except _PeerFailed:
            pass  # the agreement raises the peer's error
        except BaseException as err:  # noqa: B036 - reported to the others, then re-raised
            error = err
        if self.coordinator is None:
            if error is not None:
                raise error
        else:
            self.coordinator.agree(f"{self.key}/{phase}", error, f"checkpoint {phase}")
        return result  # type: ignore[return-value]

    def check_peers(self, phase: str) -> None:
        """Raise :class:`_PeerFailed` if another rank already failed ``phase``."""
        if self.coordinator is not None and self.coordinator.failed(f"{self.key}/{phase}"):
            raise _PeerFailed

    def vote(self, error: BaseException | None, what: str) -> None:
        """End of a lockstep round: stop on every rank if it failed on any."""
        failed = error is not None
        if self.exchange is not None:
            failed = self.exchange.any(failed, f"{what} (failure vote)")
        if error is not None:
            raise error
        if failed:
            raise _PeerFailed

    def share(self, phase: str, document: dict | None) -> dict:
        """Rank 0's ``document`` on every rank."""
        if self.coordinator is None:
            return document  # type: ignore[return-value]
        key = f"{self.key}/{phase}/document"
        if self.rank == 0:
            self.coordinator.publish(key, document)  # type: ignore[arg-type]
            return document  # type: ignore[return-value]
        return self.coordinator.read(key, f"rank 0's checkpoint {phase}")

    def broadcast_bytes(self, data: bytes | None, what: str) -> bytes:
        """Rank 0's ``data`` on every rank."""
        if self.exchange is None:
            return data  # type: ignore[return-value]
        return self.exchange.broadcast_bytes(data, 0, what)

    def rows_per_chunk(self, embedding: NodeEmbedding) -> int:
        row_bytes = sum(
            math.prod(t.row_shape) * t.tensor.element_size() for t in self.tables(embedding)
        )
        return max(1, self.chunk_bytes // max(1, row_bytes))


# ====================================================================== metadata
def _metadata(job: _Job, layout: str, has_extra: bool) -> dict[str, Any]:
    embeddings = {
        e.name: {
            "num_embeddings": e.num_embeddings,
            "embedding_dim": e.embedding_dim,
            "dtype": _dtype_name(e.dtype),
            "storage": e.storage_kind,
            "world_size": e.world_size,
            "partition": e.partition.to_dict(),
        }
        for e in job.embeddings
    }
    optimizer = None
    if job.optimizer is not None:
        opt = job.optimizer
        header = opt.state_dict(with_state=False)  # the optimizer's own description
        groups = [
            {k: _plain(v, k) for k, v in group.items() if k != "params"}  # names identify
            for group in header["param_groups"]
        ]
        state = {
            e.name: {
                key: {"row_shape": list(row_shape), "dtype": _dtype_name(dtype)}
                for key, (row_shape, dtype) in opt.state_layout(e).items()
            }
            for e in opt.embeddings
        }
        optimizer = {
            "class": type(opt).__name__,
            "param_groups": groups,
            "state": state,
            "steps_taken": header["steps_taken"],
        }
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "layout": layout,
        "embeddings": embeddings,
        "optimizer": optimizer,
        "extra": has_extra,
    }


def _check_compatible(meta: Any, job: _Job) -> Callable[[], None] | None:
    """ValueError naming the first field of the checkpoint that does not fit the live
    objects; else the function that restores the optimizer's param groups and step counter
    (None without optimizer)."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ValueError("not a graphemb checkpoint (metadata field 'format' is missing)")
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"checkpoint format version {meta.get('version')!r} is not supported "
            f"(this graphemb reads version {FORMAT_VERSION})"
        )
    try:
        return _check_contents(meta, job)
    except (KeyError, TypeError, AttributeError, IndexError) as err:
        raise ValueError(f"malformed checkpoint metadata ({type(err).__name__}: {err})") from None


def _check_contents(meta: dict[str, Any], job: _Job) -> Callable[[], None] | None:
    if meta["layout"] not in ("single", "sharded") or not isinstance(meta["extra"], bool):
        raise ValueError(f"malformed checkpoint metadata (layout {meta['layout']!r})")
    saved = meta["embeddings"]
    for e in job.embeddings:
        if e.name not in saved:
            raise ValueError(
                f"embedding {e.name!r} is not in the checkpoint (it holds {sorted(saved)})"
            )
        s = saved[e.name]
        for field_name, live in (
            ("num_embeddings", e.num_embeddings),
            ("embedding_dim", e.embedding_dim),
            ("dtype", _dtype_name(e.dtype)),
        ):
            if s[field_name] != live:
                raise ValueError(
                    f"embedding {e.name!r}: checkpoint has {field_name}={s[field_name]!r}, "
                    f"the live embedding {live!r}"
                )
    if job.optimizer is None:
        return None
    opt, saved_opt = job.optimizer, meta["optimizer"]
    if saved_opt is None:
        raise ValueError("the checkpoint holds no optimizer state (it was saved without optimizer)")
    if saved_opt["class"] != type(opt).__name__:
        raise ValueError(
            f"optimizer class mismatch: the checkpoint holds {saved_opt['class']}, "
            f"the live optimizer is {type(opt).__name__}"
        )
    # Param groups (names, hyper-parameters) and step counter: checked by the optimizer.
    try:
        apply = opt.prepare_load(saved_opt, with_state=False)
    except ValueError as err:
        raise ValueError(f"optimizer state in the checkpoint: {err}") from None
    for e in opt.embeddings:
        expected = {
            k: {"row_shape": list(r), "dtype": _dtype_name(d)}
            for k, (r, d) in opt.state_layout(e).items()
        }
        if saved_opt["state"].get(e.name) != expected:
            raise ValueError(
                f"optimizer state of {e.name!r}: the checkpoint has "
                f"{saved_opt['state'].get(e.name)}, the live optimizer needs {expected}"
            )
    return apply


# ====================================================================== save
def _save_single(job: _Job, path: Path, extra: dict[str, Any] | None) -> None:
    with contextlib.ExitStack() as stack:  # drops the temporary file unless committed

        def prepare() -> tuple[TensorFileWriter | None, bytes | None]:
            meta = _metadata(job, "single", extra is not None)
            if job.rank != 0:
                return None, None
            blob = _encode_extra(extra)
            if path.is_dir():
                raise FileExistsError(f"{str(path)!r} is a directory (a sharded checkpoint?)")
            specs = [
                TensorSpec(t.file_name, t.dtype, (e.num_embeddings, *t.row_shape))
                for e in job.embeddings
                for t in job.tables(e)
            ]
            if blob is not None:
                specs.append(TensorSpec(_EXTRA, torch.uint8, (len(blob),)))
            writer = TensorFileWriter(path, specs, {"graphemb": json.dumps(meta)})
            return stack.enter_context(writer), blob

        writer, blob = job.run("prepare", prepare)
        job.run("write", lambda: _write_single(job, writer, blob))


def _write_single(job: _Job, writer: TensorFileWriter | None, blob: bytes | None) -> None:
    """Rank 0 pulls every row chunk by chunk and writes it; the others answer the pulls
    (collective if partitioned). Every rank takes part in every round."""
    for embedding in job.embeddings:
        storage, chunk = embedding.storage, job.rows_per_chunk(embedding)
        what = f"checkpoint save of {embedding.name!r}"
        for table in job.tables(embedding):
            for start in range(0, embedding.num_embeddings, chunk):
                stop = min(start + chunk, embedding.num_embeddings)
                error = None
                try:
                    ids = torch.arange(
                        start, stop if job.rank == 0 else start, device=storage.device
                    )
                    rows = storage.read_rows(table.tensor, ids, what)
                    if writer is not None:
                        writer.write(table.file_name, rows)
                except CoordinationError:
                    raise  # the collective failed: every rank knows
                except BaseException as err:  # noqa: B036 - voted on, then re-raised
                    error = err
                job.vote(error, what)
    if writer is not None:
        if blob is not None:
            writer.write(_EXTRA, torch.frombuffer(bytearray(blob), dtype=torch.uint8))
        writer.commit()


def _save_sharded(job: _Job, path: Path, extra: dict[str, Any] | None) -> None:
    def prepare() -> tuple[dict, str | None, bytes | None]:
        meta = _metadata(job, "sharded", extra is not None)
        if job.rank != 0:
            return meta, None, None
        blob = _encode_extra(extra)
        if path.exists() and not path.is_dir():
            raise FileExistsError(f"{str(path)!r} is a file (a single-file checkpoint?)")
        path.mkdir(exist_ok=True)  # like torch.save, missing parents are an error
        return meta, secrets.token_hex(4), blob

    meta, token, blob = job.run("prepare", prepare)
    token = job.share("token", {"token": token})["token"]
    shard = path / _shard_name(token, job.rank, job.world_size)
    try:
        job.run("write", lambda: _write_shard(job, shard, meta, blob))
    except BaseException:
        shard.unlink(missing_ok=True)  # no manifest names it: the manifest is written last
        raise
    # The commit point: rank 0 replaces the manifest, which names the new shards.
    job.run("commit", lambda: _write_manifest(job, path, meta, token) if job.rank == 0 else None)


def _write_shard(job: _Job, shard: Path, meta: dict, blob: bytes | None) -> None:
    """The rows this rank owns, read from its own memory: no communication."""
    owned = {e.name: e.storage.owned_ids() for e in job.embeddings}
    specs = []
    for e in job.embeddings:
        count = owned[e.name].numel()
        specs.append(TensorSpec(f"ids/{e.name}", torch.int64, (count,)))
        specs += [TensorSpec(t.file_name, t.dtype, (count, *t.row_shape)) for t in job.tables(e)]
    if blob is not None:
        specs.append(TensorSpec(_EXTRA, torch.uint8, (len(blob),)))
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
            writer.write(_EXTRA, torch.frombuffer(bytearray(blob), dtype=torch.uint8))
        writer.commit()


def _write_manifest(job: _Job, path: Path, meta: dict, token: str) -> None:
    shards = [_shard_name(token, r, job.world_size) for r in range(job.world_size)]
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


def _shard_name(token: str, rank: int, world_size: int) -> str:
    return f"shard-{token}-{rank:05d}-of-{world_size:05d}.safetensors"


# ====================================================================== load
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

    def tasks(self, job: _Job, embedding: NodeEmbedding) -> list[_Task]:
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


def _open_source(job: _Job, path: Path, open_files: contextlib.ExitStack) -> _Source:
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
            meta, files = _file_metadata(reader), [path]
        else:
            return None
        _check_compatible(meta, job)
        source = _Source(meta, files)
        for file in files:
            source.readers[file] = (
                reader if not sharded else open_files.enter_context(TensorFileReader(file))
            )
        mine = files[job.rank :: job.world_size] if sharded else files
        source.rows = _check_files(job, meta, source.readers, verify=mine)
        if meta["extra"] and job.rank == 0:  # read now: nothing may fail after the first write
            source.extra_bytes = source.readers[files[0]].read(_EXTRA).numpy().tobytes()
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
        source.apply_optimizer = _check_compatible(source.metadata, job)
        if extra is not None:
            source.extra = _decode_extra(extra)

    job.run("preparation", prepare)
    return source


def _file_metadata(reader: TensorFileReader) -> dict:
    try:
        return json.loads(reader.metadata["graphemb"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise ValueError(
            f"{reader.path}: not a graphemb checkpoint (no graphemb metadata)"
        ) from None


def _check_files(
    job: _Job, meta: dict, readers: dict[Path, TensorFileReader], verify: list[Path]
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
        if meta["extra"] and file == list(readers)[0] and _EXTRA not in reader.specs:
            raise ValueError(f"{file}: the metadata announces an extra that is not there")
        if file in verify:
            for name in reader.specs:
                reader.verify(name)
    return rows_by_file


def _write_rows(job: _Job, source: _Source) -> None:
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
            what = f"checkpoint load of {embedding.name!r}"
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
                job.vote(error, what)
                storage.write_rows(
                    [t.tensor for t in tables],
                    ids.to(storage.device),
                    [r.to(storage.device) for r in rows],
                    what,
                )
            storage.after_update(what)

    job.run("read", stream)


# ====================================================================== helpers
def _encode_extra(extra: dict[str, Any] | None) -> bytes | None:
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict, got {type(extra).__name__}")
    buffer = io.BytesIO()
    try:
        torch.save(extra, buffer)
        _decode_extra(buffer.getvalue())  # refuse now what load could not read back safely
    except Exception as err:
        raise TypeError(
            "extra may hold only tensors and plain Python values (dict, list, tuple, str, "
            f"numbers, None): torch.load(weights_only=True) cannot read it back: {err}"
        ) from None
    return buffer.getvalue()


def _decode_extra(data: bytes) -> dict[str, Any]:
    return torch.load(io.BytesIO(data), weights_only=True)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _plain(value: Any, name: str) -> Any:
    """A JSON-able copy of a hyper-parameter value."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, (tuple, list)):
        return [_plain(v, name) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"hyper-parameter {name!r} = {value!r} cannot be stored in a checkpoint")
