"""The streamed safetensors-layout files: nothing at ``path`` and no temporary file after any
failure of the writer, and readers that keep reading the file they validated."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
import torch

from graphemb.checkpoint.tensorfile import (
    CorruptFileError,
    TensorFileReader,
    TensorFileWriter,
    TensorSpec,
)

SPEC = TensorSpec("w", torch.float32, (4, 2))


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if ".tmp-" in p.name]


def write(path: Path, values: torch.Tensor) -> None:
    with TensorFileWriter(path, [TensorSpec("w", values.dtype, tuple(values.shape))], {}) as w:
        w.write("w", values)
        w.commit()


def test_failing_header_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def no_space(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TensorFileWriter, "_write_header", no_space)
    with pytest.raises(OSError, match="No space left"):
        TensorFileWriter(tmp_path / "t", [SPEC], {})
    assert leftovers(tmp_path) == [] and not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    "specs, metadata, message",
    [
        ([TensorSpec("w", torch.complex64, (2,))], {}, "complex64"),
        ([SPEC, SPEC], {}, "unique"),
        ([TensorSpec("w", torch.float32, (-1, 2))], {}, "shape"),
        ([SPEC], {"note": 3}, "note"),
    ],
)
def test_what_the_header_cannot_describe_is_refused_before_any_file(
    tmp_path, specs, metadata, message
):
    with pytest.raises(ValueError, match=message):
        TensorFileWriter(tmp_path / "t", specs, metadata)
    assert list(tmp_path.iterdir()) == []


def test_failing_commit_leaves_the_target_and_no_temporary_file(tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    (target / "keep").write_text("x")  # os.replace cannot replace a non-empty directory
    writer = TensorFileWriter(target, [SPEC], {})
    writer.write("w", torch.ones(4, 2))
    with pytest.raises(OSError):
        writer.commit()
    writer.abort()  # harmless after a failed commit
    assert leftovers(tmp_path) == [] and (target / "keep").read_text() == "x"


def test_leaving_the_block_without_commit_writes_nothing(tmp_path):
    path = tmp_path / "t"
    write(path, torch.zeros(4, 2))
    with pytest.raises(RuntimeError, match="interrupted"):
        with TensorFileWriter(path, [SPEC], {}) as writer:
            writer.write("w", torch.ones(2, 2))
            raise RuntimeError("interrupted")
    assert leftovers(tmp_path) == []
    with TensorFileReader(path) as reader:
        assert torch.equal(reader.read("w"), torch.zeros(4, 2))


def test_a_reader_keeps_the_file_it_validated_when_path_is_replaced(tmp_path):
    path = tmp_path / "t"
    first = torch.arange(8.0).view(4, 2)
    write(path, first)
    with TensorFileReader(path) as reader:
        reader.verify("w")
        write(path, torch.full((4, 2), -1.0))  # an atomic replacement by another save
        assert torch.equal(reader.read("w", 1, 3), first[1:3])
        reader.verify("w")
    with TensorFileReader(path) as reader:
        assert torch.equal(reader.read("w"), torch.full((4, 2), -1.0))


@pytest.mark.parametrize("header", [b"[1, 2]", b'{"w": 5}', b'{"__metadata__": [1]}'])
def test_malformed_headers_are_corrupt_files(tmp_path, header):
    path = tmp_path / "t"
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(CorruptFileError):
        TensorFileReader(path)


def test_header_layout_is_safetensors(tmp_path):
    """An independent reading of the layout: 8-byte little-endian length, JSON header."""
    path = tmp_path / "t"
    write(path, torch.arange(8.0).view(4, 2))
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    assert header["w"] == {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]}
    assert len(data) == 8 + length + 32 and os.path.getsize(path) == len(data)
