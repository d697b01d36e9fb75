"""The checkpoint format: metadata (what a checkpoint holds and how it was saved), its
compatibility with live embeddings and optimizers, file and shard names, and the encoding
of ``extra``. Tensors live in safetensors files (:mod:`graphemb.checkpoint.tensorfile`)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .tensorfile import TensorFileReader

if TYPE_CHECKING:
    from .job import CheckpointJob

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MANIFEST",
    "EXTRA",
    "metadata",
    "check_compatible",
    "file_metadata",
    "shard_name",
    "encode_extra",
    "decode_extra",
]

FORMAT_NAME = "graphemb-checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
EXTRA = "extra"  # name of the pickled ``extra`` in the files


def metadata(job: CheckpointJob, layout: str, has_extra: bool) -> dict[str, Any]:
    embeddings = {
        e.name: {
            "num_embeddings": e.num_embeddings,
            "embedding_dim": e.embedding_dim,
            "dtype": dtype_name(e.dtype),
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
                key: {"row_shape": list(row_shape), "dtype": dtype_name(dtype)}
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


def check_compatible(meta: Any, job: CheckpointJob) -> Callable[[], None] | None:
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


def _check_contents(meta: dict[str, Any], job: CheckpointJob) -> Callable[[], None] | None:
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
            ("dtype", dtype_name(e.dtype)),
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
            k: {"row_shape": list(r), "dtype": dtype_name(d)}
            for k, (r, d) in opt.state_layout(e).items()
        }
        if saved_opt["state"].get(e.name) != expected:
            raise ValueError(
                f"optimizer state of {e.name!r}: the checkpoint has "
                f"{saved_opt['state'].get(e.name)}, the live optimizer needs {expected}"
            )
    return apply


def file_metadata(reader: TensorFileReader) -> dict:
    try:
        return json.loads(reader.metadata["graphemb"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise ValueError(
            f"{reader.path}: not a graphemb checkpoint (no graphemb metadata)"
        ) from None


def shard_name(token: str, rank: int, world_size: int) -> str:
    return f"shard-{token}-{rank:05d}-of-{world_size:05d}.safetensors"


def encode_extra(extra: dict[str, Any] | None) -> bytes | None:
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict, got {type(extra).__name__}")
    buffer = io.BytesIO()
    try:
        torch.save(extra, buffer)
        decode_extra(buffer.getvalue())  # refuse now what load could not read back safely
    except Exception as err:
        raise TypeError(
            "extra may hold only tensors and plain Python values (dict, list, tuple, str, "
            f"numbers, None): torch.load(weights_only=True) cannot read it back: {err}"
        ) from None
    return buffer.getvalue()


def decode_extra(data: bytes) -> dict[str, Any]:
    return torch.load(io.BytesIO(data), weights_only=True)


def dtype_name(dtype: torch.dtype) -> str:
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
