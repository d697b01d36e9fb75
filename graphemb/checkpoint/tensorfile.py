"""Files of named tensors in the safetensors layout, written and read row chunk by chunk.

Layout (https://github.com/huggingface/safetensors): 8 bytes little-endian header length,
a JSON header ``{name: {"dtype", "shape", "data_offsets"}, "__metadata__": {str: str}}``
padded with spaces to a multiple of 8 bytes, then the raw little-endian bytes of every
tensor, back to back. The file holds no pickled objects, so reading it cannot run code,
and ``safetensors.torch.load_file`` can open it too.

Why not ``safetensors`` itself: its writer needs every tensor in memory at once, and a
checkpoint of a table larger than one rank's memory must be streamed. The writer here
appends rows in chunks, keeps a CRC-32 of each tensor in the metadata, writes to a
temporary file and renames it over ``path`` only when everything is on disk (atomic).
"""

from __future__ import annotations

import json
import math
import os
import secrets
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["TensorSpec", "TensorFileWriter", "TensorFileReader", "CorruptFileError"]

_DTYPE_CODES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
_DTYPES = {code: dtype for dtype, code in _DTYPE_CODES.items()}
_CRC_KEY = "crc32"  # metadata entry: JSON {tensor name: 8 hex digits}
_MAX_HEADER = 64 << 20


class CorruptFileError(ValueError):
    """The file is truncated, malformed or fails its checksum."""


@dataclass(frozen=True)
class TensorSpec:
    """Name, dtype and shape of one tensor of a file (rows = the first dimension)."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def row_nbytes(self) -> int:
        return math.prod(self.shape[1:]) * _itemsize(self.dtype)

    @property
    def nbytes(self) -> int:
        return (self.shape[0] if self.shape else 1) * self.row_nbytes


class TensorFileWriter:
    """Stream tensors into ``path``; nothing appears at ``path`` until :meth:`commit`.

    Tensors are written in the order of ``specs``, each as consecutive row chunks.

    Example
    -------
    >>> import torch, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.safetensors")
    >>> spec = TensorSpec("w", torch.float32, (4, 2))
    >>> with TensorFileWriter(path, [spec], {"note": "demo"}) as writer:
    ...     writer.write("w", torch.zeros(3, 2))
    ...     writer.write("w", torch.ones(1, 2))
    ...     writer.commit()
    >>> TensorFileReader(path).read("w")[:, 0].tolist()
    [0.0, 0.0, 0.0, 1.0]
    """

    def __init__(
        self, path: str | os.PathLike, specs: Sequence[TensorSpec], metadata: dict[str, str]
    ) -> None:
        self.path = Path(path)
        self._specs = list(specs)
        self._metadata = dict(metadata)
        _check_specs(self._specs, self._metadata)
        self._crcs = {spec.name: 0 for spec in self._specs}
        self._written = {spec.name: 0 for spec in self._specs}
        self._position = 0  # index of the tensor being written
        self._tmp = self.path.with_name(f"{self.path.name}.tmp-{secrets.token_hex(4)}")
        self._file = open(self._tmp, "wb")
        self._header_length = 0
        try:
            self._write_header()  # placeholder CRCs, same length as the final ones
        except BaseException:
            self.abort()  # nobody else knows the temporary file: remove it now
            raise

    def __enter__(self) -> TensorFileWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self._file.closed:  # left without commit(): nothing appears at path
            self.abort()

    def write(self, name: str, rows: torch.Tensor) -> None:
        """Append ``rows`` (shape (k, *spec.shape[1:])) to tensor ``name``."""
        spec = self._specs[self._position]
        while self._written[spec.name] == spec.nbytes and spec.name != name:
            self._position += 1  # the previous tensor is complete
            spec = self._specs[self._position]
        if spec.name != name:
            raise ValueError(f"tensor {name!r} written out of order (expected {spec.name!r})")
        data = _as_bytes(rows.detach().to("cpu", spec.dtype))
        if self._written[name] + len(data) > spec.nbytes:
            raise ValueError(f"too many rows written to tensor {name!r}")
        self._file.write(data)
        self._crcs[name] = zlib.crc32(data, self._crcs[name])
        self._written[name] += len(data)

    def commit(self) -> None:
        """Finish the file and atomically move it to ``path``.

        On failure the temporary file is removed and ``path`` is left as it was.
        """
        incomplete = [s.name for s in self._specs if self._written[s.name] != s.nbytes]
        if incomplete:
            raise ValueError(f"tensors not fully written: {incomplete}")
        try:
            self._write_header()
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        _fsync_directory(self.path.parent)

    def abort(self) -> None:
        """Drop the temporary file; ``path`` is left as it was."""
        try:
            self._file.close()
        finally:
            self._tmp.unlink(missing_ok=True)

    def _write_header(self) -> None:
        header, offset = {}, 0
        for spec in self._specs:
            header[spec.name] = {
                "dtype": _DTYPE_CODES[spec.dtype],
                "shape": list(spec.shape),
                "data_offsets": [offset, offset + spec.nbytes],
            }
            offset += spec.nbytes
        crcs = {name: f"{crc:08x}" for name, crc in self._crcs.items()}
        header["__metadata__"] = {**self._metadata, _CRC_KEY: json.dumps(crcs)}
        encoded = json.dumps(header).encode()
        encoded += b" " * (-len(encoded) % 8)
        if self._header_length and len(encoded) != self._header_length:
            raise AssertionError("header length changed")  # CRCs are fixed-width
        self._header_length = len(encoded)
        position = self._file.tell()
        self._file.seek(0)
        self._file.write(struct.pack("<Q", len(encoded)) + encoded)
        if position > 0:
            self._file.seek(position)


class TensorFileReader:
    """Read tensors of a file written by :class:`TensorFileWriter` (or safetensors).

    The header is validated on open: a truncated or malformed file raises
    :class:`CorruptFileError` naming what is wrong. :meth:`verify` checks a tensor's CRC.

    The file stays open until :meth:`close` (or the end of a ``with`` block): every read
    sees the file that was validated, even if another writer atomically replaces ``path``
    meanwhile.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"checkpoint file {str(self.path)!r} does not exist")
        self._file = open(self.path, "rb")
        try:
            self._parse_header()
        except BaseException:
            self._file.close()
            raise

    def __enter__(self) -> TensorFileReader:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (reads raise afterwards)."""
        self._file.close()

    def _parse_header(self) -> None:
        f = self._file
        size = os.fstat(f.fileno()).st_size
        prefix = f.read(8)
        if len(prefix) < 8:
            raise CorruptFileError(f"{self.path}: truncated (no header)")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(size - 8, _MAX_HEADER):
            raise CorruptFileError(f"{self.path}: truncated or corrupt header (length {length})")
        try:
            header = json.loads(f.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CorruptFileError(f"{self.path}: header is not valid JSON ({err})") from None
        self._data_start = 8 + length
        metadata = header.pop("__metadata__", {}) if isinstance(header, dict) else {}
        if not isinstance(header, dict) or not isinstance(metadata, dict):
            raise CorruptFileError(f"{self.path}: header is not a JSON object of tensors")
        self.metadata: dict[str, str] = dict(metadata)
        self.specs: dict[str, TensorSpec] = {}
        self._offsets: dict[str, int] = {}
        end = 0
        for name, entry in header.items():
            try:
                spec = TensorSpec(
                    name, _DTYPES[entry["dtype"]], tuple(int(d) for d in entry["shape"])
                )
                begin, stop = (int(v) for v in entry["data_offsets"])
            except (KeyError, TypeError, ValueError, AttributeError):
                raise CorruptFileError(
                    f"{self.path}: bad header entry for tensor {name!r}"
                ) from None
            if stop - begin != spec.nbytes or begin != end:
                raise CorruptFileError(f"{self.path}: inconsistent offsets of tensor {name!r}")
            self.specs[name], self._offsets[name], end = spec, begin, stop
        if self._data_start + end != size:
            raise CorruptFileError(
                f"{self.path}: {size} bytes on disk, header describes {self._data_start + end} "
                "(truncated or appended to)"
            )
        try:
            self._crcs = json.loads(self.metadata.get(_CRC_KEY, "{}"))
        except (TypeError, json.JSONDecodeError):
            raise CorruptFileError(f"{self.path}: bad checksum table") from None
        if not isinstance(self._crcs, dict):
            raise CorruptFileError(f"{self.path}: bad checksum table")

    def read(self, name: str, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """Rows ``[start, stop)`` of tensor ``name`` as a new CPU tensor."""
        spec = self.specs[name]
        rows = spec.shape[0] if spec.shape else 1
        stop = rows if stop is None else min(stop, rows)
        count = max(0, stop - start)
        out = torch.empty((count, *spec.shape[1:]) if spec.shape else (), dtype=spec.dtype)
        self._file.seek(self._data_start + self._offsets[name] + start * spec.row_nbytes)
        got = self._file.readinto(memoryview(_as_bytes(out)))
        if got != count * spec.row_nbytes:
            raise CorruptFileError(f"{self.path}: tensor {name!r} is truncated")
        return out

    def verify(self, name: str, chunk_bytes: int = 64 << 20) -> None:
        """Raise :class:`CorruptFileError` unless tensor ``name`` matches its CRC-32."""
        spec, crc = self.specs[name], 0
        if name not in self._crcs:
            raise CorruptFileError(f"{self.path}: no checksum for tensor {name!r}")
        f = self._file
        f.seek(self._data_start + self._offsets[name])
        left = spec.nbytes
        while left:
            data = f.read(min(chunk_bytes, left))
            if not data:
                raise CorruptFileError(f"{self.path}: tensor {name!r} is truncated")
            crc = zlib.crc32(data, crc)
            left -= len(data)
        if f"{crc:08x}" != self._crcs[name]:
            raise CorruptFileError(f"{self.path}: tensor {name!r} fails its checksum (corrupt)")


def _check_specs(specs: Sequence[TensorSpec], metadata: dict[str, str]) -> None:
    """Refuse what the header could not describe, before any file is created."""
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"tensor names must be unique, got {names}")
    for spec in specs:
        if spec.dtype not in _DTYPE_CODES:
            raise ValueError(f"tensor {spec.name!r}: dtype {spec.dtype} cannot be stored")
        if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in spec.shape):
            raise ValueError(f"tensor {spec.name!r}: bad shape {spec.shape}")
    bad = [k for k, v in metadata.items() if not (isinstance(k, str) and isinstance(v, str))]
    if bad:
        raise ValueError(f"metadata must map str to str, got non-str entries under {bad}")


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _as_bytes(t: torch.Tensor):
    """A writable byte view (numpy) of a contiguous CPU tensor of any dtype."""
    t = t.contiguous()
    return t.reshape(-1).view(torch.uint8).numpy()


def _fsync_directory(directory: Path) -> None:
    """Make a rename durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
