"""Embedding files: the word2vec text format (``.emb``, ``.txt``) and numpy ``.npy``.

* ``.emb`` / ``.txt``: a first line ``N D``, then one line per node, ``name v1 ... vD``
  (what the reference DeepWalk and node2vec tools write, and gensim's
  ``KeyedVectors.load_word2vec_format`` reads). Values are written with 9 significant
  digits, so float32 rows read back exactly.
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
from .formats import file_format

__all__ = ["EMBEDDING_FORMATS", "embedding_format", "read_embeddings", "write_embeddings"]

#: Formats by file suffix.
EMBEDDING_FORMATS = {".emb": "word2vec", ".txt": "word2vec", ".npy": "npy"}

_ROWS_PER_WRITE = 4096  # rows formatted per write: bounded memory, few system calls


def embedding_format(path: str | os.PathLike[str], format: str | None = None) -> str:
    """``"word2vec"`` or ``"npy"``: ``format`` if given, else guessed from the suffix."""
    return file_format(path, format, EMBEDDING_FORMATS, "embedding")


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
    format : {"word2vec", "npy"}, optional
        Default: from the suffix (:data:`EMBEDDING_FORMATS`).

    Raises
    ------
    ValueError
        A shape that is not (N, D), names of another length or with blanks, an unknown
        format. Nothing is written then.
    """
    kind = embedding_format(path, format)
    rows = _as_rows(embeddings)
    names = _checked_names(node_names, rows.shape[0])
    if kind == "npy":
        _write_npy(os.fspath(path), rows, names)
    else:
        _write_word2vec(os.fspath(path), rows, names)


def read_embeddings(
    path: str | os.PathLike[str], format: str | None = None
) -> tuple[torch.Tensor, np.ndarray]:
    """Embeddings and node names from a file written by :func:`write_embeddings` (or by
    any tool writing the word2vec text format).

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
    kind = embedding_format(path, format)
    path = os.fspath(path)
    if kind == "npy":
        rows = np.load(path, allow_pickle=False)
        if rows.ndim != 2:
            raise GraphFileError(path, f"expected an (N, D) array, got shape {rows.shape}")
        names_path = path + ".names"
        if os.path.exists(names_path):
            with open(names_path, encoding="utf-8") as stream:
                names = np.array(stream.read().split("\n")[: rows.shape[0]], dtype=str)
            if len(names) != rows.shape[0]:
                raise GraphFileError(
                    names_path, f"expected {rows.shape[0]} names, got {len(names)}"
                )
        else:
            names = np.arange(rows.shape[0]).astype(str)
        return torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)), names
    return _read_word2vec(path)


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
    value_format = "%.9g" if rows.dtype.kind == "f" else "%d"
    line_format = "%s" + (" " + value_format) * dim + "\n"
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as stream:
        stream.write(f"{count} {dim}\n")
        for start in range(0, count, _ROWS_PER_WRITE):
            block = rows[start : start + _ROWS_PER_WRITE].tolist()
            block_names = names[start : start + _ROWS_PER_WRITE].tolist()
            stream.write(
                "".join(line_format % (n, *r) for n, r in zip(block_names, block, strict=True))
            )


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
