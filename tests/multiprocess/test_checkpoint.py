"""Checkpoints: exact round trips in every layout, loads across layouts and world sizes,
and what a checkpoint holds (every group's lr, the extra, the safetensors layout).

The training is the scenario of ``scenarios.py`` (five embeddings, four optimizer kinds)
with batches from 2 data ranks, so runs on 1, 2 or 3 processes train on the same data. A
save that fails: test_checkpoint_atomic.py; a bad checkpoint: test_checkpoint_refusals.py.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest
import scenarios
import torch
from _multiprocess import run_ranks
from checkpoint_state import small_training

import graphemb
from graphemb import NodeEmbedding, Partition
from graphemb.optim import SparseAdam

BEFORE, AFTER = 8, 6  # steps before the save, steps after it
DATA_WORLD = 2  # batches of 2 data ranks, whatever the number of processes


def _remainder(world: int, name: str) -> NodeEmbedding:
    return NodeEmbedding(
        scenarios.NUM,
        scenarios.DIM,
        name,
        timeout=30,
        partition=Partition.remainder(scenarios.NUM, world),
    )


LAYOUTS = {  # name -> (processes, make_embedding factory)
    "local": (1, lambda world, name: NodeEmbedding(scenarios.NUM, scenarios.DIM, name)),
    "shared2": (
        2,
        lambda world, name: NodeEmbedding(scenarios.NUM, scenarios.DIM, name, timeout=30),
    ),
    "remainder2": (2, _remainder),
    # a process group of one rank: every row here, nothing exchanged
    "remainder1": (1, _remainder),
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
    if layout == "local":  # no process group
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
        ("remainder1-single", "remainder2"),  # a group of one -> partitioned over 2
        ("range3-sharded", "remainder1"),  # sharded 3 -> a group of one
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


# ---------------------------------------------------------------------- what a checkpoint holds
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
