"""A save that fails -- an exception from writing, an extra that cannot be encoded, a
SIGKILL of the writing process -- keeps the previous checkpoint, and leaves no temporary
file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from checkpoint_state import small_training

import graphemb
from graphemb import NodeEmbedding
from graphemb.checkpoint.tensorfile import TensorFileWriter
from graphemb.optim import SparseAdam

TESTS = Path(__file__).resolve().parents[1]  # the support modules (checkpoint_writer_job)


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
