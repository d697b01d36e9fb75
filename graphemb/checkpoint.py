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

Files use the safetensors layout (:mod:`graphemb.tensorfile`): tensors and JSON only, nothing
is unpickled except ``extra``, read with ``torch.load(weights_only=True)``. Writes are atomic:
an interrupted save (exception, SIGKILL) leaves the previous checkpoint at ``path`` loadable.
``load`` checks everything -- format, version, names, shapes, dtypes, optimizer class and
state, checksums of every tensor -- before it changes anything.

With a process group both functions are collective: every rank calls them with the same
arguments.
"""

from __future__ import annotations

import io
import json
import math
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .coordination import Coordinator
from .embedding import NodeEmbedding
from .optim.optimizer import SparseOptimizer
from .tensorfile import TensorFileReader, TensorFileWriter, TensorSpec

__all__ = ["save", "load", "FORMAT_VERSION"]

FORMAT_NAME = "graphemb-checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_CHUNK_BYTES = 64 << 20
_EXTRA = "extra"


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
        Saves its class, hyper-parameters per group and per-row state.
    extra : dict, optional
        Anything else needed to resume -- dense ``model.state_dict()``, a dense optimizer's
        or LR scheduler's state, the epoch: tensors and plain Python values only (it is
        read back with ``torch.load(weights_only=True)``).
    sharded : bool
        Each rank writes its own rows, in parallel (see the module docstring).
    chunk_bytes : int
        Largest piece of a table held in memory at once.

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
    blob = _encode_extra(extra) if job.rank == 0 else None
    if sharded:
        _save_sharded(job, path, blob, extra is not None)
    else:
        _save_single(job, path, blob, extra is not None)


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
    does not read, an unknown name, a shape or dtype mismatch, or an optimizer of another
    class raise (``FileNotFoundError`` / ``ValueError`` naming the field) and change
    nothing.

    Returns
    -------
    dict
        ``{"extra": the saved extra (or None), "metadata": the checkpoint's metadata}``.
    """
    job = _Job.create(embeddings, optimizer, chunk_bytes)
    path = Path(path)
    source = _open_source(job, path)
    _write_rows(job, source)
    if optimizer is not None:
        _restore_param_groups(optimizer, source.metadata["optimizer"])
    extra = _decode_extra(source.extra_bytes(job)) if source.metadata["extra"] else None
    return {"extra": extra, "metadata": source.metadata}


# ====================================================================== the job
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
            missing = [e.name for e in optimizer._embeddings() if e not in embeddings]
            if missing:
                raise ValueError(f"the optimizer also trains {missing}: pass them in embeddings")
        if not isinstance(chunk_bytes, int) or chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be a positive int, got {chunk_bytes!r}")
        storages = [e._storage for e in embeddings]
        if len({s.world_size for s in storages}) != 1 or len({s.distributed for s in storages}) != 1:
            raise ValueError("all embeddings of a checkpoint must belong to the same process group")
        coordinator = storages[0].coordinator
        rank, world_size = storages[0].rank, storages[0].world_size
        key = "" if coordinator is None else f"checkpoint/{coordinator.next_generation('checkpoint')}"
        return cls(embeddings, optimizer, coordinator, rank, world_size, key, chunk_bytes)

    def tables(self, embedding: NodeEmbedding, with_optimizer: bool = True) -> list[_Table]:
        dim = embedding.embedding_dim
        tables = [_Table(f"embedding/{embedding.name}/weight", embedding.weight, (dim,), embedding.dtype)]
        if with_optimizer and self.optimizer is not None and embedding in self.optimizer.state:
            layout = self.optimizer._state_layout(embedding)
            for key, tensor in self.optimizer.state[embedding].items():
                row_shape, dtype = layout[key]
                tables.append(_Table(f"optimizer/{embedding.name}/{key}", tensor, row_shape, dtype))
        return tables

    def agree(self, phase: str, error: BaseException | None) -> None:
        """Raise on every rank if ``phase`` failed on any; plain re-raise without a group."""
        if self.coordinator is None:
            if error is not None:
                raise error
            return
        self.coordinator.agree(f"{self.key}/{phase}", error, f"checkpoint {phase}")

    def share(self, phase: str, document: dict | None) -> dict:
        """Rank 0's ``document`` on every rank."""
        if self.coordinator is None:
            return document
        key = f"{self.key}/{phase}/document"
        if self.rank == 0:
            self.coordinator.publish(key, document)
            return document
        return self.coordinator.read(key, f"rank 0's checkpoint {phase}")

    def rows_per_chunk(self, embedding: NodeEmbedding) -> int:
        row_bytes = sum(math.prod(t.row_shape) * t.tensor.element_size() for t in self.tables(embedding))
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
        groups = []
        for group in opt.param_groups:
            hyper = {k: _plain(v, k) for k, v in group.items() if k != "params"}
            groups.append({**hyper, "param_names": [e.name for e in group["params"]]})
        state = {
            e.name: {
                key: {"row_shape": list(row_shape), "dtype": _dtype_name(dtype)}
                for key, (row_shape, dtype) in opt._state_layout(e).items()
            }
            for e in opt._embeddings()
        }
        optimizer = {"class": type(opt).__name__, "param_groups": groups, "state": state,
                     "steps_taken": opt._steps_taken}
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "layout": layout,
            "embeddings": embeddings, "optimizer": optimizer, "extra": has_extra}


def _check_compatible(meta: dict[str, Any], job: _Job) -> None:
    """ValueError naming the first field of the checkpoint that does not fit the live objects."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ValueError("not a graphemb checkpoint (metadata field 'format' is missing)")
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"checkpoint format version {meta.get('version')!r} is not supported "
            f"(this graphemb reads version {FORMAT_VERSION})"
        )
    saved = meta["embeddings"]
    for e in job.embeddings:
        if e.name not in saved:
            raise ValueError(f"embedding {e.name!r} is not in the checkpoint (it holds {sorted(saved)})")
        s = saved[e.name]
        for field_name, live in (("num_embeddings", e.num_embeddings),
                                 ("embedding_dim", e.embedding_dim),
                                 ("dtype", _dtype_name(e.dtype))):
            if s[field_name] != live:
                raise ValueError(
                    f"embedding {e.name!r}: checkpoint has {field_name}={s[field_name]!r}, "
                    f"the live embedding {live!r}"
                )
    if job.optimizer is None:
        return
    opt, saved_opt = job.optimizer, meta["optimizer"]
    if saved_opt is None:
        raise ValueError("the checkpoint holds no optimizer state (it was saved without optimizer)")
    if saved_opt["class"] != type(opt).__name__:
        raise ValueError(
            f"optimizer class mismatch: the checkpoint holds {saved_opt['class']}, "
            f"the live optimizer is {type(opt).__name__}"
        )
    if len(saved_opt["param_groups"]) != len(opt.param_groups):
        raise ValueError(
            f"optimizer param_groups: the checkpoint has {len(saved_opt['param_groups'])}, the "
            f"live optimizer {len(opt.param_groups)}"
        )
    for index, (group, saved_group) in enumerate(zip(opt.param_groups, saved_opt["param_groups"])):
        names = [e.name for e in group["params"]]
        if saved_group["param_names"] != names:
            raise ValueError(
                f"optimizer param_groups[{index}]: the checkpoint trains "
                f"{saved_group['param_names']}, the live optimizer {names}"
            )
        opt._check_group(_hyper_parameters(saved_group, group))
    for e in opt._embeddings():
        expected = {k: {"row_shape": list(r), "dtype": _dtype_name(d)}
                    for k, (r, d) in opt._state_layout(e).items()}
        if saved_opt["state"].get(e.name) != expected:
            raise ValueError(
                f"optimizer state of {e.name!r}: the checkpoint has "
                f"{saved_opt['state'].get(e.name)}, the live optimizer needs {expected}"
            )


def _hyper_parameters(saved_group: dict, live_group: dict) -> dict:
    """A live param group with the saved hyper-parameters (tuples restored)."""
    restored = {k: v for k, v in saved_group.items() if k != "param_names"}
    for key, value in restored.items():
        if isinstance(live_group.get(key), tuple) and isinstance(value, list):
            restored[key] = tuple(value)
    return {**restored, "params": live_group["params"]}


def _restore_param_groups(optimizer: SparseOptimizer, saved_opt: dict) -> None:
    new_groups = [_hyper_parameters(s, g) for s, g in zip(saved_opt["param_groups"], optimizer.param_groups)]
    for group, new in zip(optimizer.param_groups, new_groups):
        group.clear()
        group.update(new)
    optimizer._steps_taken = int(saved_opt.get("steps_taken", 0))


# ====================================================================== save
def _save_single(job: _Job, path: Path, blob: bytes | None, has_extra: bool) -> None:
    meta = _metadata(job, "single", has_extra)
    specs = [TensorSpec(t.file_name, t.dtype, (e.num_embeddings, *t.row_shape))
             for e in job.embeddings for t in job.tables(e)]
    writer, error = None, None
    if job.rank == 0:
        try:
            if path.is_dir():
                raise FileExistsError(f"{str(path)!r} is a directory (a sharded checkpoint?)")
            if blob is not None:
                specs.append(TensorSpec(_EXTRA, torch.uint8, (len(blob),)))
            writer = TensorFileWriter(path, specs, {"graphemb": json.dumps(meta)})
        except (OSError, ValueError) as err:
            error = err
    job.agree("open", error)
    try:
        for embedding in job.embeddings:
            storage, chunk = embedding._storage, job.rows_per_chunk(embedding)
            for table in job.tables(embedding):
                for start in range(0, embedding.num_embeddings, chunk):
                    stop = min(start + chunk, embedding.num_embeddings)
                    # Rank 0 pulls the rows, the others only answer (collective if partitioned).
                    ids = torch.arange(start, stop if job.rank == 0 else start, device=storage.device)
                    rows = storage.read_rows(table.tensor, ids, f"checkpoint save of {embedding.name!r}")
                    if writer is not None and error is None:
                        try:
                            writer.write(table.file_name, rows)
                        except OSError as err:  # keep answering the others' collectives
                            error = err
        if writer is not None and error is None:
            try:
                if blob is not None:
                    writer.write(_EXTRA, torch.frombuffer(bytearray(blob), dtype=torch.uint8))
                writer.commit()
            except OSError as err:
                error = err
    finally:
        if writer is not None and error is not None:
            writer.abort()
    job.agree("commit", error)


def _save_sharded(job: _Job, path: Path, blob: bytes | None, has_extra: bool) -> None:
    meta = _metadata(job, "sharded", has_extra)
    error, token = None, None
    if job.rank == 0:
        try:
            if path.exists() and not path.is_dir():
                raise FileExistsError(f"{str(path)!r} is a file (a single-file checkpoint?)")
            path.mkdir(exist_ok=True)  # like torch.save, missing parents are an error
            token = secrets.token_hex(4)
        except OSError as err:
            error = err
    job.agree("open", error)
    token = job.share("token", {"token": token})["token"]
    shard = path / _shard_name(token, job.rank, job.world_size)

    # Every rank writes the rows it owns, read from its own memory: no communication.
    own_ids = {e.name: e.partition.global_ids(job.rank) for e in job.embeddings}
    specs = []
    for e in job.embeddings:
        count = own_ids[e.name].numel()
        specs.append(TensorSpec(f"ids/{e.name}", torch.int64, (count,)))
        specs += [TensorSpec(t.file_name, t.dtype, (count, *t.row_shape)) for t in job.tables(e)]
    if blob is not None:
        specs.append(TensorSpec(_EXTRA, torch.uint8, (len(blob),)))
    error = None
    try:
        with TensorFileWriter(shard, specs, {"graphemb": json.dumps(meta)}) as writer:
            for e in job.embeddings:
                ids = own_ids[e.name]
                writer.write(f"ids/{e.name}", ids)
                chunk = job.rows_per_chunk(e)
                for table in job.tables(e):
                    for start in range(0, ids.numel(), chunk):
                        local = e._storage.owned_index(ids[start:start + chunk].to(e.device))
                        writer.write(table.file_name, table.tensor.index_select(0, local))
            if blob is not None:
                writer.write(_EXTRA, torch.frombuffer(bytearray(blob), dtype=torch.uint8))
            writer.commit()
    except OSError as err:
        error = err
    job.agree("shards", error)

    error = None
    if job.rank == 0:  # the commit point: the manifest names the new shards
        try:
            shards = [_shard_name(token, r, job.world_size) for r in range(job.world_size)]
            manifest = {**meta, "token": token, "shards": shards}
            tmp = path / f"{MANIFEST}.tmp-{token}"
            tmp.write_text(json.dumps(manifest, indent=1))
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path / MANIFEST)
            for stale in path.iterdir():  # shards of older saves and of interrupted ones
                if stale.name.startswith("shard-") and stale.name not in shards:
                    stale.unlink(missing_ok=True)
        except OSError as err:
            error = err
    job.agree("manifest", error)


def _shard_name(token: str, rank: int, world_size: int) -> str:
    return f"shard-{token}-{rank:05d}-of-{world_size:05d}.safetensors"


# ====================================================================== load
@dataclass
class _Task:
    """Rows [start, stop) of one embedding in one file, read by ``reader`` (a rank)."""

    file: Path
    embedding: NodeEmbedding
    start: int
    stop: int
    reader: int
    ids_tensor: str | None  # None: the rows are the global ids start..stop (single file)


class _Source:
    """A validated checkpoint: its metadata, files, and how its rows are split into tasks."""

    def __init__(self, metadata: dict, files: list[Path], extra_file: Path | None):
        self.metadata = metadata
        self.files = files
        self.extra_file = extra_file

    def tasks(self, job: _Job, embedding: NodeEmbedding) -> list[_Task]:
        chunk = job.rows_per_chunk(embedding)
        if self.metadata["layout"] == "single":
            return [_Task(self.files[0], embedding, s, min(s + chunk, embedding.num_embeddings), 0, None)
                    for s in range(0, embedding.num_embeddings, chunk)]
        tasks = []
        for file in self.files:
            rows = TensorFileReader(file).specs[f"ids/{embedding.name}"].shape[0]
            for start in range(0, rows, chunk):
                tasks.append(_Task(file, embedding, start, min(start + chunk, rows),
                                   len(tasks) % job.world_size, f"ids/{embedding.name}"))
        return tasks

    def extra_bytes(self, job: _Job) -> bytes:
        data = None
        if job.rank == 0:
            data = TensorFileReader(self.extra_file).read(_EXTRA).numpy().tobytes()
        storage = job.embeddings[0]._storage
        if storage.exchange is None:
            return data
        return storage.exchange.broadcast_bytes(data, 0, "checkpoint extra")


def _open_source(job: _Job, path: Path) -> _Source:
    """Read and validate the checkpoint (metadata, shapes, checksums) on the ranks that
    read it; every rank raises if any found a problem."""
    error, meta, files = None, None, []
    sharded = path.is_dir()
    readers = range(job.world_size) if sharded else range(1)  # single file: rank 0 only
    if job.rank in readers:
        try:
            if sharded:
                manifest = path / MANIFEST
                if not manifest.is_file():
                    raise FileNotFoundError(f"sharded checkpoint {str(path)!r} has no {MANIFEST}")
                try:
                    meta = json.loads(manifest.read_text())
                    files = [path / name for name in meta["shards"]]
                except (json.JSONDecodeError, KeyError, TypeError) as err:
                    raise ValueError(f"{manifest}: corrupt manifest ({err})") from None
            else:
                meta = _file_metadata(TensorFileReader(path))
                files = [path]
            _check_compatible(meta, job)
            _check_files(job, meta, files, verify=[f for i, f in enumerate(files)
                                                    if i % len(readers) == job.rank])
        except (OSError, ValueError) as err:
            error = err
    job.agree("validation", error)
    if not sharded:
        meta = job.share("metadata", meta)
        files = [path]
    extra_file = files[0] if meta["extra"] else None
    return _Source(meta, files, extra_file)


def _file_metadata(reader: TensorFileReader) -> dict:
    try:
        return json.loads(reader.metadata["graphemb"])
    except (KeyError, json.JSONDecodeError):
        raise ValueError(f"{reader.path}: not a graphemb checkpoint (no graphemb metadata)") from None


def _check_files(job: _Job, meta: dict, files: list[Path], verify: list[Path]) -> None:
    """Every tensor the load needs exists with the right dtype and shape; checksums hold
    for the files in ``verify``."""
    for file in files:
        reader = TensorFileReader(file)
        for e in job.embeddings:
            rows = e.num_embeddings
            if meta["layout"] == "sharded":
                ids = reader.specs.get(f"ids/{e.name}")
                if ids is None:
                    raise ValueError(f"{file}: no ids of embedding {e.name!r}")
                rows = ids.shape[0]
            for table in job.tables(e):
                spec = reader.specs.get(table.file_name)
                expected = (rows, *table.row_shape)
                if spec is None or spec.shape != expected or spec.dtype != table.dtype:
                    raise ValueError(
                        f"{file}: tensor {table.file_name!r} should be {table.dtype} of shape "
                        f"{expected}, found {spec and (spec.dtype, spec.shape)}"
                    )
        if file in verify:
            for name in reader.specs:
                reader.verify(name)


def _write_rows(job: _Job, source: _Source) -> None:
    """Send every row of the checkpoint to its owner (collective, in rounds)."""
    for embedding in job.embeddings:
        storage = embedding._storage
        tables = job.tables(embedding)
        tasks = source.tasks(job, embedding)
        readers = 1 if source.metadata["layout"] == "single" else job.world_size
        mine = [t for t in tasks if t.reader == job.rank]
        for round_index in range(math.ceil(len(tasks) / readers)):
            task = mine[round_index] if round_index < len(mine) else None
            ids = torch.empty(0, dtype=torch.int64)
            rows = [torch.empty((0, *t.row_shape), dtype=t.dtype) for t in tables]
            if task is not None:
                reader = TensorFileReader(task.file)
                ids = (torch.arange(task.start, task.stop) if task.ids_tensor is None
                       else reader.read(task.ids_tensor, task.start, task.stop))
                rows = [reader.read(t.file_name, task.start, task.stop) for t in tables]
            storage.write_rows(
                [t.tensor for t in tables], ids.to(storage.device),
                [r.to(storage.device) for r in rows], f"checkpoint load of {embedding.name!r}",
            )
        storage.after_update(f"checkpoint load of {embedding.name!r}")


# ====================================================================== helpers
def _encode_extra(extra: dict[str, Any] | None) -> bytes | None:
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict, got {type(extra).__name__}")
    buffer = io.BytesIO()
    torch.save(extra, buffer)
    try:  # refuse now what load could not read back safely
        _decode_extra(buffer.getvalue())
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
