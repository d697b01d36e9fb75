"""A bad checkpoint -- missing, truncated, corrupt, of another version, layout,
optimizer, name, shape or dtype, with malformed metadata, or forging a pickle -- is refused
with an error that says why, and changes nothing of the live embedding and optimizer."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from checkpoint_state import assert_unchanged, small_training, state_of

import graphemb
from graphemb import NodeEmbedding
from graphemb.checkpoint.tensorfile import TensorFileReader, TensorFileWriter, TensorSpec
from graphemb.optim import SparseAdagrad, SparseAdam


def flip_byte(path: Path, offset_from_end: int) -> None:
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0xFF
    path.write_bytes(bytes(data))


def make_bad(kind: str, tmp_path: Path, monkeypatch) -> Path:
    emb, opt = small_training("victim")
    path = tmp_path / "bad.ckpt"
    if kind == "missing file":
        return tmp_path / "nothing-here"
    if kind == "wrong version":
        monkeypatch.setattr(graphemb.checkpoint.format, "FORMAT_VERSION", 99)
        graphemb.save(path, emb, opt)
        monkeypatch.undo()
        return path
    if kind == "not a graphemb file":
        with TensorFileWriter(path, [TensorSpec("x", torch.float32, (2,))], {}) as writer:
            writer.write("x", torch.zeros(2))
            writer.commit()
        return path
    if kind == "no optimizer saved":
        graphemb.save(path, emb)
        return path
    if kind == "other optimizer class":
        emb2, opt2 = small_training("victim", SparseAdagrad)
        graphemb.save(path, emb2, opt2)
        return path
    if kind in ("other name", "other num_embeddings", "other embedding_dim", "other dtype"):
        shape = {"other num_embeddings": (51, 4), "other embedding_dim": (50, 5)}.get(kind, (50, 4))
        other = NodeEmbedding(
            *shape,
            "elsewhere" if kind == "other name" else "victim",
            dtype=torch.float16 if kind == "other dtype" else torch.float32,
        )
        graphemb.save(path, other, SparseAdam([other]))
        return path
    graphemb.save(path, emb, opt)
    if kind == "truncated":
        path.write_bytes(path.read_bytes()[:-40])
    elif kind == "corrupt data":
        flip_byte(path, 10)
    elif kind == "corrupt header":
        data = bytearray(path.read_bytes())
        data[12:20] = b"\x00garbage"
        path.write_bytes(bytes(data))
    elif kind == "empty file":
        path.write_bytes(b"")
    elif kind == "malformed metadata":  # valid JSON, wrong types: no KeyError/TypeError escapes
        reader = TensorFileReader(path)
        meta = json.loads(reader.metadata["graphemb"])
        meta["embeddings"] = ["victim"]
        rewrite(path, reader, {**reader.metadata, "graphemb": json.dumps(meta)})
    elif kind == "malformed optimizer metadata":
        reader = TensorFileReader(path)
        meta = json.loads(reader.metadata["graphemb"])
        meta["optimizer"]["param_groups"] = {"lr": 0.1}
        rewrite(path, reader, {**reader.metadata, "graphemb": json.dumps(meta)})
    return path


def rewrite(path: Path, reader: TensorFileReader, metadata: dict) -> None:
    """The same tensors under other metadata."""
    tensors = {name: reader.read(name) for name in reader.specs}
    specs = list(reader.specs.values())
    with TensorFileWriter(path, specs, metadata) as writer:
        for spec in specs:
            writer.write(spec.name, tensors[spec.name])
        writer.commit()


BAD = {  # kind -> (exception, message fragment)
    "missing file": (FileNotFoundError, "does not exist"),
    "truncated": (ValueError, "truncated"),
    "corrupt data": (ValueError, "checksum"),
    "corrupt header": (ValueError, "header"),
    "empty file": (ValueError, "truncated"),
    "wrong version": (ValueError, "version 99"),
    "not a graphemb file": (ValueError, "not a graphemb checkpoint"),
    "no optimizer saved": (ValueError, "no optimizer state"),
    "other optimizer class": (ValueError, "SparseAdagrad"),
    "other name": (ValueError, "'victim' is not in the checkpoint"),
    "other num_embeddings": (ValueError, "num_embeddings=51"),
    "other embedding_dim": (ValueError, "embedding_dim=5"),
    "other dtype": (ValueError, "dtype='float16'"),
    "malformed metadata": (ValueError, "malformed checkpoint metadata"),
    "malformed optimizer metadata": (ValueError, "param_groups"),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_bad_checkpoint_raises_and_changes_nothing(kind, tmp_path, monkeypatch):
    path = make_bad(kind, tmp_path, monkeypatch)
    live = NodeEmbedding(50, 4, "victim", init_func=lambda t: t.normal_())
    live_opt = SparseAdam([live], lr=0.5)
    live(torch.tensor([1, 2])).sum().backward()
    live_opt.step()
    before = state_of(live, live_opt)
    error, message = BAD[kind]
    with pytest.raises(error, match=message):
        graphemb.load(path, live, live_opt)
    assert_unchanged(before, live, live_opt)


@pytest.mark.parametrize("damage", ["no manifest", "missing shard", "corrupt shard"])
def test_bad_sharded_checkpoint_raises_and_changes_nothing(damage, tmp_path):
    emb, opt = small_training("victim")
    path = tmp_path / "sharded"
    graphemb.save(path, emb, opt, sharded=True)
    shard = next(path.glob("shard-*"))
    if damage == "no manifest":
        (path / "manifest.json").unlink()
    elif damage == "missing shard":
        shard.unlink()
    else:
        flip_byte(shard, 3)
    live, live_opt = small_training("victim")
    live.all_set_embedding(torch.zeros(50, 4))
    before = state_of(live, live_opt)
    with pytest.raises((FileNotFoundError, ValueError)):
        graphemb.load(path, live, live_opt)
    assert_unchanged(before, live, live_opt)


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch /tmp/graphemb-pwned",))


def test_loading_never_unpickles_arbitrary_objects(tmp_path):
    emb, opt = small_training("victim")
    with pytest.raises(TypeError, match="weights_only"):
        graphemb.save(tmp_path / "x.ckpt", emb, opt, extra={"bad": _Exploit()})
    # A checkpoint whose extra was forged to hold a malicious pickle.
    path = tmp_path / "forged.ckpt"
    graphemb.save(path, emb, opt, extra={"ok": 1})
    reader = TensorFileReader(path)
    specs = [reader.specs[n] for n in reader.specs if n != "extra"]
    payload = pickle.dumps(_Exploit(), protocol=2)  # torch.save's protocol
    specs.append(TensorSpec("extra", torch.uint8, (len(payload),)))
    forged = tmp_path / "forged2.ckpt"
    with TensorFileWriter(forged, specs, reader.metadata) as writer:
        for spec in specs[:-1]:
            writer.write(spec.name, reader.read(spec.name))
        writer.write("extra", torch.frombuffer(bytearray(payload), dtype=torch.uint8))
        writer.commit()
    marker = Path("/tmp/graphemb-pwned")
    marker.unlink(missing_ok=True)
    fresh = NodeEmbedding(50, 4, "victim")
    fresh_opt = SparseAdam([fresh])
    before = state_of(fresh, fresh_opt)
    with pytest.raises(pickle.UnpicklingError, match="system"):
        graphemb.load(forged, fresh, fresh_opt)
    assert not marker.exists(), "load executed code from the checkpoint"
    assert_unchanged(before, fresh, fresh_opt)  # the extra is read before any row changes
