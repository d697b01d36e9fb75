"""Checkpoints: exact round trips in every layout, loads across layouts and world sizes,
atomic writes, and refusal of every malformed checkpoint without changing anything.

The training is the scenario of ``scenarios.py`` (five embeddings, four optimizer kinds)
with batches from 2 data ranks, so runs on 1, 2 or 3 processes train on the same data.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import scenarios
import torch
from _multiprocess import run_ranks

import graphemb
from graphemb import NodeEmbedding, Partition
from graphemb.checkpoint.tensorfile import TensorFileReader, TensorFileWriter, TensorSpec
from graphemb.optim import SparseAdagrad, SparseAdam

BEFORE, AFTER = 8, 6  # steps before the save, steps after it
DATA_WORLD = 2  # batches of 2 data ranks, whatever the number of processes
TESTS = Path(__file__).resolve().parents[1]  # the support modules (checkpoint_writer_job)

LAYOUTS = {  # name -> (processes, make_embedding factory)
    "local": (1, lambda world, name: NodeEmbedding(scenarios.NUM, scenarios.DIM, name)),
    "shared2": (
        2,
        lambda world, name: NodeEmbedding(scenarios.NUM, scenarios.DIM, name, timeout=30),
    ),
    "remainder2": (
        2,
        lambda world, name: NodeEmbedding(
            scenarios.NUM,
            scenarios.DIM,
            name,
            timeout=30,
            partition=Partition.remainder(scenarios.NUM, world),
        ),
    ),
    "range3": (
        3,
        lambda world, name: NodeEmbedding(
            scenarios.NUM,
            scenarios.DIM,
            name,
            timeout=30,
            partition=Partition.range(scenarios.NUM, [0, 20, 20, scenarios.NUM]),
        ),
    ),
}


def build(layout, world):
    return scenarios.build(lambda name: LAYOUTS[layout][1](world, name))


def save_all(directory: Path, embeddings, optimizers, sharded: bool) -> None:
    """One checkpoint per embedding (each has its own optimizer)."""
    directory.mkdir(exist_ok=True)
    for name in embeddings:
        graphemb.save(
            directory / name,
            embeddings[name],
            optimizers[name],
            sharded=sharded,
            extra={"step": BEFORE, "name": name},
        )


def load_all(directory: Path, embeddings, optimizers) -> None:
    for name in embeddings:
        meta = graphemb.load(directory / name, embeddings[name], optimizers[name])
        assert meta["extra"] == {"step": BEFORE, "name": name}


def continue_training(embeddings, optimizers, rank, world):
    scenarios.train_steps(
        embeddings, optimizers, rank, world, range(BEFORE, BEFORE + AFTER), data_world=DATA_WORLD
    )
    return scenarios.snapshot(embeddings, optimizers)


def round_trip(rank, world, layout, root):
    """Train, save (both layouts), continue -> A; then for each saved layout: fresh
    objects of the same names, load, continue -> B. Returns everything to compare."""
    root = Path(root)
    embeddings, optimizers = build(layout, world)
    scenarios.train_steps(embeddings, optimizers, rank, world, range(BEFORE), data_world=DATA_WORLD)
    saved = scenarios.snapshot(embeddings, optimizers)
    for sharded in (False, True):
        save_all(
            root / f"{layout}-{'sharded' if sharded else 'single'}", embeddings, optimizers, sharded
        )
    continued = continue_training(embeddings, optimizers, rank, world)
    del embeddings, optimizers
    gc.collect()  # shared-memory names are free again
    resumed = {}
    for kind in ("single", "sharded"):
        embeddings, optimizers = build(layout, world)
        load_all(root / f"{layout}-{kind}", embeddings, optimizers)
        loaded = scenarios.snapshot(embeddings, optimizers)
        resumed[kind] = (loaded, continue_training(embeddings, optimizers, rank, world))
        del embeddings, optimizers
        gc.collect()
    return saved, continued, resumed


def cross_load(rank, world, layout, source):
    embeddings, optimizers = build(layout, world)
    load_all(Path(source), embeddings, optimizers)
    loaded = scenarios.snapshot(embeddings, optimizers)
    return loaded, continue_training(embeddings, optimizers, rank, world)


def run_layout(function, layout, *args):
    world = LAYOUTS[layout][0]
    if world == 1:
        return [function(0, 1, layout, *args)]
    return run_ranks(function, world, layout, *args)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Round trips of every layout; their checkpoints stay for the cross-layout loads."""
    root = tmp_path_factory.mktemp("checkpoints")
    results = {layout: run_layout(round_trip, layout, str(root)) for layout in LAYOUTS}
    return root, results


# ---------------------------------------------------------------------- round trips
@pytest.mark.multiprocess
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_save_train_equals_load_train_exactly(trained, layout):
    _, results = trained
    for saved, continued, resumed in results[layout]:
        for _kind, (loaded, after) in resumed.items():
            scenarios.assert_same_training(loaded, saved, exact=True)
            scenarios.assert_same_training(after, continued, exact=True)


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "source, target",
    [
        ("shared2-single", "local"),  # 2 -> 1 (a notebook loads a job's checkpoint)
        ("local-single", "range3"),  # 1 -> 3, uneven range partitions
        ("shared2-single", "remainder2"),  # shared memory -> partitioned
        ("shared2-sharded", "range3"),  # sharded 2 -> 3: resharding
        ("range3-sharded", "local"),  # sharded 3 -> 1
    ],
)
def test_load_into_another_layout_and_world_size(trained, source, target):
    """The loaded tables and states are bitwise the saved ones; continuing trains like the
    saving layout did (up to the order of floating-point sums across ranks)."""
    root, results = trained
    saved, continued, _ = results[source.split("-")[0]][0]
    for loaded, after in run_layout(cross_load, target, str(root / source)):
        scenarios.assert_same_training(loaded, saved, exact=True)
        scenarios.assert_same_training(after, continued)


# ---------------------------------------------------------------------- atomic writes
def small_training(name="victim", optimizer=SparseAdam):
    emb = NodeEmbedding(50, 4, name, init_func=lambda t: t.copy_(torch.arange(200.0).view(50, 4)))
    opt = optimizer([emb], lr=0.1)
    for step in range(3):
        ids = torch.tensor([step, 7, 7, 49])
        emb(ids).pow(2).sum().backward()
        opt.step()
    return emb, opt


def state_of(emb, opt):
    return {
        "weight": emb.weight.clone(),
        **{k: v.clone() for k, v in opt.state[emb].items()},
        "groups": [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups],
    }


def assert_unchanged(before, emb, opt):
    after = state_of(emb, opt)
    assert before.keys() == after.keys()
    for key in before:
        if key == "groups":
            assert before[key] == after[key]
        else:
            assert torch.equal(before[key], after[key]), key


@pytest.mark.parametrize("sharded", [False, True])
def test_exception_during_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch, sharded):
    emb, opt = small_training()
    path = tmp_path / "ckpt"
    graphemb.save(path, emb, opt, sharded=sharded)
    old = emb.all_get_embedding()
    emb.all_set_embedding(old + 100)

    calls = {"n": 0}
    original = TensorFileWriter.write

    def failing_write(self, name, rows):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        original(self, name, rows)

    monkeypatch.setattr(TensorFileWriter, "write", failing_write)
    with pytest.raises(OSError, match="No space left"):
        graphemb.save(path, emb, opt, sharded=sharded)
    monkeypatch.undo()
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name], "temporary files left"
    fresh = NodeEmbedding(50, 4, "victim")
    graphemb.load(path, fresh, SparseAdam([fresh]))
    assert torch.equal(fresh.weight, old)


@pytest.mark.parametrize("sharded", [False, True])
def test_sigkill_during_save_keeps_the_previous_checkpoint(tmp_path, sharded):
    """A writer process is killed while the second checkpoint is half written."""
    path = tmp_path / "ckpt"
    job = subprocess.Popen(
        [sys.executable, str(TESTS / "checkpoint_writer_job.py"), str(path), str(int(sharded))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for line in job.stdout:
            if line.startswith("HALF-WRITTEN"):
                break
        else:
            pytest.fail(f"the writer never reached the second save (exit {job.wait()})")
        os.kill(job.pid, signal.SIGKILL)
    finally:
        job.kill()
        job.wait(timeout=30)
    assert [p for p in tmp_path.rglob("*") if ".tmp-" in p.name], "the kill came too late"
    fresh = NodeEmbedding(20000, 16, "big")
    graphemb.load(path, fresh)
    assert torch.equal(fresh.weight, torch.ones(20000, 16)), "not the first checkpoint"


# ---------------------------------------------------------------------- bad checkpoints
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


def test_lr_of_each_group_and_extra_survive(tmp_path):
    emb, opt = small_training("victim")
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    scheduler.step()
    model = torch.nn.Linear(3, 2)
    graphemb.save(
        tmp_path / "c",
        emb,
        opt,
        extra={"model": model.state_dict(), "scheduler": scheduler.state_dict()},
    )
    fresh = NodeEmbedding(50, 4, "victim")
    fresh_opt = SparseAdam([fresh], lr=0.1)
    meta = graphemb.load(tmp_path / "c", fresh, fresh_opt)
    assert fresh_opt.param_groups[0]["lr"] == pytest.approx(0.05)
    assert fresh_opt.param_groups[0]["betas"] == (0.9, 0.999)
    assert torch.equal(meta["extra"]["model"]["weight"], model.weight)
    assert meta["metadata"]["optimizer"]["class"] == "SparseAdam"
    assert meta["metadata"]["embeddings"]["victim"]["storage"] == "local"


def test_checkpoint_opens_with_the_safetensors_layout(tmp_path):
    """Our files follow the safetensors layout; read one back with a minimal independent
    parser of that layout (8-byte length, JSON header, raw little-endian data)."""
    import json
    import struct

    emb, opt = small_training("victim")
    graphemb.save(tmp_path / "c", emb, opt)
    data = (tmp_path / "c").read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    entry = header["embedding/victim/weight"]
    begin, end = entry["data_offsets"]
    weight = torch.frombuffer(
        bytearray(data[8 + length + begin : 8 + length + end]), dtype=torch.float32
    ).view(entry["shape"])
    assert entry["dtype"] == "F32" and torch.equal(weight, emb.weight)


@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyError("boom"), TypeError("boom")])
def test_any_exception_during_save_keeps_the_previous_checkpoint(
    tmp_path, monkeypatch, sharded, error
):
    emb, opt = small_training()
    path = tmp_path / "ckpt"
    graphemb.save(path, emb, opt, sharded=sharded)
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    emb.all_set_embedding(emb.all_get_embedding() + 100)

    def failing_write(self, name, rows):
        raise error

    monkeypatch.setattr(TensorFileWriter, "write", failing_write)
    with pytest.raises(type(error), match="boom"):
        graphemb.save(path, emb, opt, sharded=sharded)
    monkeypatch.undo()
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == files, "the previous checkpoint changed or files were left behind"


def test_an_extra_that_cannot_be_encoded_keeps_the_previous_checkpoint(tmp_path):
    emb, opt = small_training()
    graphemb.save(tmp_path / "c", emb, opt, extra={"epoch": 1})
    before = (tmp_path / "c").read_bytes()
    with pytest.raises(TypeError, match="weights_only"):
        graphemb.save(tmp_path / "c", emb, opt, extra={"epoch": 2, "bad": object()})
    assert (tmp_path / "c").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_checkpoint_uses_only_public_attributes_of_other_objects():
    """One owner per concern: the checkpoint reaches embeddings, storages and optimizers
    through their public interfaces, never through private attributes."""
    package = Path(graphemb.checkpoint.__file__).parent
    trees = [ast.parse(file.read_text()) for file in sorted(package.glob("*.py"))]
    private = sorted(
        {
            node.attr
            for tree in trees
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not (node.attr.startswith("__") and node.attr.endswith("__"))
            # its own objects' attributes are its own business (the tensor-file classes)
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        }
    )
    assert private == [], f"graphemb/checkpoint/ uses private attributes {private}"
