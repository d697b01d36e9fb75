"""Embedding files: the word2vec text format (``.emb``, ``.txt``) and numpy ``.npy``.

* ``.emb`` / ``.txt``: a first line ``N D``, then one line per node, ``name v1 ... vD``
  (what the reference DeepWalk and node2vec tools write, and gensim's
  ``KeyedVectors.load_word2vec_format`` reads). Float values are written in scientific
  notation with 9 significant digits when negative (``-1.23456791e-01``), 10 otherwise
  (``1.234567910e-01``: one width for all), so float32 rows read back exactly; they are
  formatted in bulk by numpy (digits from tables), not one Python ``%`` per value.
* ``.npy``: the ``(N, D)`` rows in node-id order; when the node names are not simply
  ``0 .. N-1``, they go to a text file beside it, ``<path>.names`` (one name a line).

Files are written whole or not at all (a temporary file, then a rename).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from .atomic import atomic_path
from .errors import GraphFileError
from .fields import numbered_lines
from .formats import Format, SuffixFormats, file_format, find_format, register

__all__ = ["EMBEDDING_FORMATS", "embedding_format", "read_embeddings", "write_embeddings"]

#: Embedding formats by file suffix (a live view of :mod:`graphemb.io.formats`).
EMBEDDING_FORMATS = SuffixFormats("embedding")

# Values formatted per write (rows x D): the block's temporaries (about ten arrays of 8
# bytes a value) stay in the CPU caches (measured at 100k x 128: 0.55 s against 1.3 s with
# blocks of 4096 rows).
_VALUES_PER_WRITE = 1 << 15
_SIGNIFICANT = 9  # digits: every float32 reads back exactly (FLT_DECIMAL_DIG)


def embedding_format(path: str | os.PathLike[str], format: str | None = None) -> str:
    """The format's name (``"word2vec"``, ``"npy"``): ``format`` if given (checked), else
    the one of the suffix."""
    return file_format(path, format, "embedding")


def write_embeddings(
    path: str | os.PathLike[str],
    embeddings: torch.Tensor | np.ndarray,
    node_names: np.ndarray | Sequence[object] | None = None,
    format: str | None = None,
) -> None:
    """Write one embedding row per node.

    Parameters
    ----------
    path : str or PathLike
    embeddings : Tensor or array of float, shape (N, D)
        Row ``i`` belongs to node ``i``.
    node_names : array or sequence, shape (N,), optional
        Original node names (``LoadedGraph.node_names``). Default: ``0 .. N-1``. A name
        must not contain whitespace (it would break the text format).
    format : str, optional
        A registered embedding format (``"word2vec"``, ``"npy"``). Default: from the
        suffix (:data:`EMBEDDING_FORMATS`).

    Raises
    ------
    ValueError
        A shape that is not (N, D), names of another length or with blanks, an unknown
        format or one that is only read. Nothing is written then.
    """
    chosen = find_format("embedding", path, format)
    if chosen.writer is None:
        raise ValueError(f"embedding format {chosen.name!r} is read only: cannot write {path}")
    rows = _as_rows(embeddings)
    names = _checked_names(node_names, rows.shape[0])
    chosen.writer(os.fspath(path), rows, names)


def read_embeddings(
    path: str | os.PathLike[str], format: str | None = None
) -> tuple[torch.Tensor, np.ndarray]:
    """Embeddings and node names from a file written by :func:`write_embeddings` (or by
    any tool writing the word2vec text format).

    Parameters
    ----------
    path : str or PathLike
    format : str, optional
        A registered embedding format; default: from the suffix.

    Returns
    -------
    embeddings : Tensor of float32, shape (N, D)
    node_names : numpy str array, shape (N,)
        For ``.npy`` without a names file: ``"0" .. "N-1"``.

    Raises
    ------
    GraphFileError
        A malformed header or row (naming its line), or a row count that differs from the
        header's.
    """
    reader = find_format("embedding", path, format).reader
    rows, names = reader(os.fspath(path))
    return rows, names


def _read_npy(path: str) -> tuple[torch.Tensor, np.ndarray]:
    rows = np.load(path, allow_pickle=False)
    if rows.ndim != 2:
        raise GraphFileError(path, f"expected an (N, D) array, got shape {rows.shape}")
    names_path = path + ".names"
    if os.path.exists(names_path):
        with open(names_path, encoding="utf-8") as stream:
            names = np.array(stream.read().split("\n")[: rows.shape[0]], dtype=str)
        if len(names) != rows.shape[0]:
            raise GraphFileError(names_path, f"expected {rows.shape[0]} names, got {len(names)}")
    else:
        names = np.arange(rows.shape[0]).astype(str)
    return torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)), names


def _as_rows(embeddings: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(embeddings, torch.Tensor):
        embeddings = embeddings.detach().cpu().numpy()
    rows = np.asarray(embeddings)
    if rows.ndim != 2 or rows.dtype.kind not in "fiu":
        raise ValueError(
            f"embeddings must be a numeric array of shape (N, D), got shape {rows.shape} "
            f"and dtype {rows.dtype}"
        )
    return rows


def _checked_names(node_names: object, count: int) -> np.ndarray:
    if node_names is None:
        return np.arange(count).astype(str)
    names = np.asarray(node_names).astype(str)
    if names.shape != (count,):
        raise ValueError(f"node_names must have shape ({count},), got {names.shape}")
    blank = np.char.find(names, " ") >= 0
    for space in ("\t", "\n", "\r"):
        blank |= np.char.find(names, space) >= 0
    blank |= np.char.str_len(names) == 0
    if blank.any():
        bad = str(names[np.flatnonzero(blank)[0]])
        raise ValueError(f"node name {bad!r} is empty or contains whitespace")
    return names


def _write_word2vec(path: str, rows: np.ndarray, names: np.ndarray) -> None:
    count, dim = rows.shape
    with atomic_path(path) as temporary, open(temporary, "wb") as stream:
        stream.write(f"{count} {dim}\n".encode())
        step = max(1, _VALUES_PER_WRITE // max(dim, 1))
        for start in range(0, count, step):
            block = rows[start : start + step]
            block_names = names[start : start + step]
            lines = None
            if block.dtype.kind == "f" and np.isfinite(block).all():
                lines = _word2vec_lines(block_names.tolist(), block)
            if lines is not None:
                stream.write(lines)
            else:  # integers, inf, nan, huge float64: Python's formatting, row by row
                value_format = "%.9g" if block.dtype.kind == "f" else "%d"
                line_format = "%s" + (" " + value_format) * dim + "\n"
                text = "".join(
                    line_format % (n, *r)
                    for n, r in zip(block_names.tolist(), block.tolist(), strict=True)
                )
                stream.write(text.encode("utf-8"))


def _word2vec_lines(names: list[str], rows: np.ndarray) -> bytes | None:
    """``name v1 ... vD`` lines of finite float rows, in UTF-8; None if a value needs a
    three-digit exponent (float64 beyond float32's range: the caller formats those).

    Every value takes 16 bytes, built in bulk as four little-endian uint32 words (digits
    four at a time from tables): `` -d.dddddddde+XX`` (9 significant digits) when negative,
    `` d.ddddddddde+XX`` (10) otherwise -- at least the 9 correctly rounded digits a
    float32 needs to read back exactly, and rows of one fixed width, joined to their names
    without a per-value step.
    """
    count, dim = rows.shape
    magnitude = np.abs(rows.astype(np.float64))
    negative = np.signbit(rows)
    digits = np.where(negative, _SIGNIFICANT, _SIGNIFICANT + 1)
    nonzero = magnitude > 0
    exponent = np.floor(np.log10(np.where(nonzero, magnitude, 1.0))).astype(np.int64)
    # log10 may be one off next to a power of ten, and rounding may carry to 10^digits:
    # each fix-up moves the exponent so that the mantissa has exactly `digits` digits.
    smallest, above = 10 ** (digits - 1), 10**digits
    for _ in range(3):
        if int(np.abs(exponent).max(initial=0)) >= 100:
            return None
        scale = _POWERS_OF_TEN[digits - 1 - exponent + _POWER_OFFSET]
        mantissa = np.rint(magnitude * scale).astype(np.int64)
        low = nonzero & (mantissa < smallest)
        high = mantissa >= above
        if not (low.any() or high.any()):
            break
        exponent += high.astype(np.int64) - low.astype(np.int64)
    exponent[~nonzero] = 0
    if int(np.abs(exponent).max(initial=0)) >= 100:
        return None

    lead, rest = np.divmod(mantissa, 10**8)  # 1 digit (negative) or 2
    middle, last = np.divmod(rest, 10**4)
    words = np.empty((count, dim, 4), dtype="<u4")
    words[..., 0] = np.where(negative, _LEAD_NEGATIVE[lead], _LEAD_POSITIVE[lead])
    words[..., 1] = _FOUR_DIGITS[middle]
    words[..., 2] = _FOUR_DIGITS[last]
    words[..., 3] = _EXPONENTS[np.where(exponent < 0, 100 - exponent, exponent)]
    body = words.tobytes()
    width = dim * 16
    return b"".join(
        b"%s%s\n" % (name.encode("utf-8"), body[row * width : (row + 1) * width])
        for row, name in enumerate(names)
    )


def _words(texts: list[str]) -> np.ndarray:
    """Four-character ASCII texts as the little-endian uint32 words that hold them."""
    return np.frombuffer("".join(texts).encode("ascii"), dtype="<u4").copy()


# Tables of the uint32 words of a value: its first four bytes by leading digits (" -d."
# below 10, " d.d" from 10), four digits "dddd", an exponent "e+XX" (XX) / "e-XX" (100 + XX).
_LEAD_NEGATIVE = _words([f" -{n % 10}." for n in range(100)])
_LEAD_POSITIVE = _words([f" {n // 10}.{n % 10}" for n in range(100)])
_FOUR_DIGITS = _words([f"{n:04d}" for n in range(10**4)])
_EXPONENTS = _words([f"e+{n:02d}" for n in range(100)] + [f"e-{n:02d}" for n in range(100)])
_POWER_OFFSET = 120  # powers of ten 10^-120 .. 10^120: enough for two-digit exponents
_POWERS_OF_TEN = 10.0 ** np.arange(-_POWER_OFFSET, _POWER_OFFSET + 1)


def _write_npy(path: str, rows: np.ndarray, names: np.ndarray) -> None:
    identity = bool((names == np.arange(len(names)).astype(str)).all())
    names_path = path + ".names"
    with atomic_path(path) as temporary:
        with open(temporary, "wb") as stream:
            np.save(stream, rows)
        if identity:
            if os.path.exists(names_path):
                os.remove(names_path)  # a stale one would mislabel these rows
        else:
            with atomic_path(names_path) as names_temporary:
                with open(names_temporary, "w", encoding="utf-8") as stream:
                    stream.write("\n".join(names.tolist()))


def _read_word2vec(path: str) -> tuple[torch.Tensor, np.ndarray]:
    lines = numbered_lines(path)
    header = next(lines, (1, ""))[1].split()
    try:
        count, dim = (int(v) for v in header)
    except ValueError:
        raise GraphFileError(path, f"expected a header 'N D', got {header}", 1) from None
    names: list[str] = []
    rows = np.empty((count, dim), dtype=np.float32)
    for number, line in lines:
        fields = line.split()
        if not fields:
            continue
        row = len(names)
        if row == count:
            raise GraphFileError(path, f"more rows than the {count} of the header", number)
        if len(fields) != dim + 1:
            raise GraphFileError(
                path, f"expected a name and {dim} values, got {len(fields)} fields", number
            )
        try:
            rows[row] = [float(v) for v in fields[1:]]
        except ValueError:
            raise GraphFileError(
                path, f"a value is not a number: {line.strip()!r}", number
            ) from None
        names.append(fields[0])
    if len(names) != count:
        raise GraphFileError(path, f"the header announces {count} rows, the file has {len(names)}")
    return torch.from_numpy(rows), np.array(names, dtype=str)


register(
    Format(
        "word2vec",
        "embedding",
        (".emb", ".txt"),
        _read_word2vec,
        _write_word2vec,
        description="word2vec text format, 'N D' then 'name v1 ... vD' lines",
    )
)
register(
    Format(
        "npy",
        "embedding",
        (".npy",),
        _read_npy,
        _write_npy,
        description="numpy rows in node-id order, names in FILE.names unless 0..N-1",
    )
)
