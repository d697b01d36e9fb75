"""Collective save/load fail fast: a failure on ONE rank, at any stage, makes every rank raise.

Two ranks (shared memory and partitioned), both checkpoint layouts. A failure is injected on
one rank at each stage -- encoding ``extra`` (a natural failure: only rank 0 encodes it),
writing, validating, reading -- with exception types that are not OSError/ValueError. Every
rank must raise (the failed rank its own error, the other an error naming the failed rank
and its message) instead of waiting for the failed rank until the 10-minute timeout: the
job is bounded by the harness's 120 s, so a rank that waits fails the test. The previous
checkpoint stays byte for byte what it was (and loadable), no temporary file is left, and the
live table, optimizer state, param groups and step counter are unchanged.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
from pathlib import Path

import pytest
import torch
from _multiprocess import run_ranks

import graphemb
import graphemb.checkpoint.loader
from graphemb import NodeEmbedding, Partition
from graphemb.checkpoint.tensorfile import TensorFileReader, TensorFileWriter
from graphemb.optim import SparseAdam

pytestmark = pytest.mark.multiprocess

NUM, DIM, WORLD = 23, 3, 2


class InjectedFailure(RuntimeError):
    """Not an OSError/ValueError: the old code let such errors escape the agreement."""


@contextlib.contextmanager
def patched(owner, name, make, active: bool):
    """Replace ``owner.name`` by ``make(original)`` while inside, if ``active``."""
    original = getattr(owner, name)
    if active:
        setattr(owner, name, make(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def failing_after(calls: int, message: str, *, skip_extra: bool = False):
    """A wrapper factory: the wrapped function raises InjectedFailure on call ``calls``."""

    def make(original):
        count = {"n": 0}

        def wrapper(*args, **kwargs):
            if skip_extra and args[1] == "extra":
                return original(*args, **kwargs)
            count["n"] += 1
            if count["n"] >= calls:
                raise InjectedFailure(message)
            return original(*args, **kwargs)

        return wrapper

    return make


def build(storage: str, name: str = "victim"):
    partition = Partition.remainder(NUM, WORLD) if storage == "partitioned" else None
    emb = NodeEmbedding(NUM, DIM, name, partition=partition)
    emb.all_set_embedding(torch.arange(NUM * DIM, dtype=torch.float32).view(NUM, DIM) / 10)
    opt = SparseAdam([emb], lr=0.1)
    return emb, opt


def train(emb, opt, rank, steps):
    for step in steps:
        ids = torch.tensor([step % NUM, 5, 5, (7 * step + rank) % NUM])
        emb(ids).pow(2).sum().backward()
        opt.step()


def snapshot(emb, opt):
    return {"weight": emb.all_get_embedding(), "optimizer": opt.state_dict()}


def same(a, b) -> bool:
    if not torch.equal(a["weight"], b["weight"]):
        return False
    sa, sb = a["optimizer"], b["optimizer"]
    if sa["param_groups"] != sb["param_groups"] or sa["steps_taken"] != sb["steps_taken"]:
        return False
    return all(torch.equal(sa["state"][0][k], sb["state"][0][k]) for k in sa["state"][0])


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# (stage, layout, failing rank, make the injection, expected message fragment)
def cases():
    writer = (TensorFileWriter, "write")
    validation = (graphemb.checkpoint.loader, "_check_files")
    reader = (TensorFileReader, "read")
    return [
        # encode: only rank 0 encodes extra; torch.load(weights_only=True) refuses object()
        ("encode", "single", 0, None, "weights_only"),
        ("encode", "sharded", 0, None, "weights_only"),
        # write: rank 0 writes the single file; in the sharded layout each rank its shard
        ("write", "single", 0, (*writer, failing_after(2, "injected write failure")), "injected"),
        ("write", "sharded", 1, (*writer, failing_after(2, "injected write failure")), "injected"),
        ("write", "sharded", 0, (*writer, failing_after(1, "injected write failure")), "injected"),
        # validate: rank 0 validates the single file; every rank a share of the shards
        (
            "validate",
            "single",
            0,
            (*validation, failing_after(1, "injected validation")),
            "injected",
        ),
        (
            "validate",
            "sharded",
            1,
            (*validation, failing_after(1, "injected validation")),
            "injected",
        ),
        # read: the first read of rows (before any row is written)
        (
            "read",
            "single",
            0,
            (*reader, failing_after(1, "injected read", skip_extra=True)),
            "injected",
        ),
        (
            "read",
            "sharded",
            1,
            (*reader, failing_after(1, "injected read", skip_extra=True)),
            "injected",
        ),
        # read: the extra, read before any row is written
        ("read extra", "single", 0, (*reader, failing_after(1, "injected extra read")), "injected"),
    ]


def failure_worker(rank, world_size, storage, root):
    root = Path(root)
    emb, opt = build(storage)
    train(emb, opt, rank, range(3))
    paths = {"single": root / "single.ckpt", "sharded": root / "sharded"}
    for layout, path in paths.items():
        graphemb.save(path, emb, opt, sharded=layout == "sharded", extra={"epoch": 3})
    saved = snapshot(emb, opt)
    train(emb, opt, rank, range(3, 5))  # the live state now differs from the checkpoints
    live = snapshot(emb, opt)
    files_before = digest(root) if rank == 0 else None

    outcomes = []
    for stage, layout, failing, injection, _ in cases():
        path = paths[layout]
        extra = {"epoch": 5}
        if stage == "encode":
            extra = {"epoch": 5, "bad": object()}
        patch = contextlib.nullcontext()
        if injection is not None:
            owner, name, make = injection
            patch = patched(owner, name, make, active=rank == failing)
        error = None
        with patch:
            try:
                if stage in ("encode", "write"):
                    graphemb.save(path, emb, opt, sharded=layout == "sharded", extra=extra)
                else:
                    graphemb.load(path, emb, opt)
            except Exception as err:  # noqa: BLE001 - the test inspects it
                error = (type(err).__name__, str(err))
        outcomes.append({"error": error, "unchanged": same(snapshot(emb, opt), live)})

    files_after = digest(root) if rank == 0 else None
    # The previous checkpoints still load, into fresh objects, as what was saved.
    del emb, opt
    gc.collect()  # a shared-memory name is free again once its table is gone
    loaded = {}
    for layout, path in paths.items():
        emb, opt = build(storage)
        graphemb.load(path, emb, opt)
        loaded[layout] = same(snapshot(emb, opt), saved)
        del emb, opt
        gc.collect()
    return {"outcomes": outcomes, "files": (files_before, files_after), "loaded": loaded}


@pytest.mark.parametrize("storage", ["shared", "partitioned"])
def test_a_failure_on_one_rank_raises_on_every_rank_and_changes_nothing(storage, tmp_path):
    results = run_ranks(failure_worker, WORLD, storage, str(tmp_path), timeout=120)
    for index, (stage, layout, failing, _, fragment) in enumerate(cases()):
        for rank, result in enumerate(results):
            outcome = result["outcomes"][index]
            label = f"{stage}/{layout}, failure on rank {failing}, seen by rank {rank}"
            assert outcome["error"] is not None, f"{label}: no error"
            kind, message = outcome["error"]
            assert fragment in message, f"{label}: {kind}: {message}"
            if rank == failing:
                expected = "TypeError" if stage == "encode" else "InjectedFailure"
                assert kind == expected, f"{label}: {kind}: {message}"
            else:
                expected = "TypeError" if stage == "encode" else "CoordinationError"
                assert kind == expected, f"{label}: {kind}: {message}"
                assert f"failed on rank {failing}" in message, f"{label}: {message}"
            assert outcome["unchanged"], f"{label}: live table or optimizer changed"
    before, after = results[0]["files"]
    assert before == after, "a failed save changed the previous checkpoint"
    assert not [name for name in after if ".tmp-" in name], "temporary files left"
    for result in results:
        assert result["loaded"] == {"single": True, "sharded": True}


def mid_stream_worker(rank, world_size, storage, root):
    """A read that fails in a later round (rows of earlier rounds are loaded already):
    every rank still raises at once."""
    path = Path(root) / "c"
    emb, opt = build(storage)
    train(emb, opt, rank, range(2))
    graphemb.save(path, emb, opt, sharded=True)
    inject = patched(
        TensorFileReader, "read", failing_after(3, "injected late read"), active=rank == 1
    )
    with inject:
        try:
            graphemb.load(path, emb, opt, chunk_bytes=100)  # 2 rows per round: many rounds
        except Exception as err:  # noqa: BLE001
            return type(err).__name__, str(err)
    return None


def test_a_late_read_failure_on_one_rank_raises_on_every_rank(tmp_path):
    zero, one = run_ranks(mid_stream_worker, WORLD, "partitioned", str(tmp_path), timeout=120)
    assert one == ("InjectedFailure", "injected late read")
    assert zero is not None and zero[0] == "CoordinationError"
    assert "failed on rank 1" in zero[1] and "injected late read" in zero[1]
