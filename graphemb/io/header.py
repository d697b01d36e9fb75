"""Where an edge list's edges start: its delimiter and whether its first line is a header.

The rule (``header=None``): a first line that does not parse as an edge of the file, while
the line after it does, is a header and is skipped. It does not parse when

* neither of its node names is an integer while the next line's both are (``source
  target`` above ``1 2``);
* it has a third field that is not a number while the next line's third field is one
  (``a b weight`` above ``a b 0.5``);
* it has a column count of its own and no field that is a number (``from to`` above
  ``a b 1.5``, ``u v weight`` above ``1 2``);
* every field is a usual column name (``source``, ``target``, ``from``, ``to``, ``src``,
  ``dst``, ``node1``, ``weight``, ...) and neither of its two names is a node of the rest
  of the file (``source target`` above ``alice bob``).

Otherwise the first line is an edge. The reader confirms a header after reading the rest
(the rest's names must all be integers, or must not include the header's names) and
reads the line as an edge where they do not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from .errors import GraphFileError
from .fields import numbered_lines, sniff_delimiter, split_fields

__all__ = ["EdgeStart", "edge_start", "header_confirmed", "header_note"]

_INTEGER = re.compile(r"[+-]?\d+")
#: Column names of edge-list headers (lower case; ``_``, ``-`` and blanks removed).
_COLUMN_NAME = re.compile(
    r"(source|target|src|dst|dest|destination|from|to|node|vertex|id|u|v|i|j|head|tail|"
    r"start|end|sender|receiver|in|out|weight|w|value|cost|fromnode|tonode|"
    r"(from|to|source|target|src|dst|start|end)(node|vertex)?(id|name)?|node\d|vertex\d|"
    r"nodeid\d?|id\d|n\d|v\d)"
)


@dataclass(frozen=True)
class EdgeStart:
    """Where the edges of an edge-list file start.

    Attributes
    ----------
    delimiter : str or None
        The field separator to read the file with (None: runs of whitespace).
    first_line : int
        1-based number of the first edge line.
    columns : int
        Its number of fields (2 or 3).
    header_line : int or None
        The line read as a header (skipped), if any.
    header_reason : str
        Why it is a header: ``"forced"`` (``header=True``), ``"names"``, ``"weight"``,
        ``"columns"``, ``"words"`` (the rule of the module docstring), or ``""``.
    header_fields : tuple of str
        The header's fields.
    """

    delimiter: str | None
    first_line: int
    columns: int
    header_line: int | None = None
    header_reason: str = ""
    header_fields: tuple[str, ...] = ()


def edge_start(path: str, delimiter: str | None, header: bool | None) -> EdgeStart:
    """Find the first edge line of ``path``, its delimiter and header.

    Parameters
    ----------
    path : str
    delimiter : str or None
        None: ``","`` for a ``.csv`` file or a first line that :func:`sniff_delimiter`
        reads as comma-separated, else runs of whitespace.
    header : bool or None
        True: the first non-comment line is a header; False: it is an edge; None: the
        rule of the module docstring decides.

    Raises
    ------
    GraphFileError
        A file without edges, or a first edge line with other than 2 or 3 fields.
    """
    lines = _first_data_lines(path, 2)
    if not lines:
        raise GraphFileError(path, "no edges in the file")
    if delimiter is None and (path.lower().endswith(".csv") or sniff_delimiter(lines[0][1])):
        delimiter = ","
    fields = [split_fields(text, delimiter) for _, text in lines]
    reason = "forced" if header else ""
    if header is None and len(fields) == 2:
        reason = _header_reason(fields[0], fields[1])
    elif header is None and _all_column_names(fields[0]):  # a header and nothing else
        reason = "words"
    if not reason:
        return EdgeStart(delimiter, lines[0][0], _columns(path, lines[0], fields[0]))
    if len(lines) < 2:
        raise GraphFileError(path, f"no edges in the file (line {lines[0][0]} is a header)")
    return EdgeStart(
        delimiter,
        lines[1][0],
        _columns(path, lines[1], fields[1]),
        lines[0][0],
        reason,
        tuple(fields[0]),
    )


def header_confirmed(start: EdgeStart, node_names: np.ndarray) -> bool:
    """Whether the header that :func:`edge_start` found holds, given the node names of the
    lines after it (False: read the line as an edge after all)."""
    if start.header_reason == "names":  # the rest must have integer names only
        return node_names.dtype.kind in "iu"
    if start.header_reason == "words":  # its names must be no node of the rest
        names = np.asarray(node_names).astype(str)
        return not bool(np.isin(np.array(start.header_fields[:2]), names).any())
    return True


def _first_data_lines(path: str, count: int) -> list[tuple[int, str]]:
    """``(number, text)`` of the first ``count`` lines that are not blank or comments."""
    found: list[tuple[int, str]] = []
    for number, line in numbered_lines(path):
        if split_fields(line, None):
            found.append((number, line))
            if len(found) == count:
                break
    return found


def _columns(path: str, line: tuple[int, str], fields: list[str]) -> int:
    """The column count of the first edge line (2 or 3, else a GraphFileError)."""
    if len(fields) not in (2, 3):
        raise GraphFileError(
            path, f"expected 2 or 3 columns, got {len(fields)}: {line[1].strip()!r}", line[0]
        )
    return len(fields)


def _header_reason(first: list[str], second: list[str]) -> str:
    """Why ``first`` is not an edge of a file whose next line is ``second`` (a reason of
    :class:`EdgeStart`), or ``""``."""
    if len(second) not in (2, 3):
        return ""  # the next line is no edge either: the errors tell
    if _all_column_names(first):
        return "words"
    if len(first) != len(second):
        return "columns" if not any(_is_number(f) for f in first) else ""
    if all(_INTEGER.fullmatch(f) for f in second[:2]) and not any(
        _INTEGER.fullmatch(f) for f in first[:2]
    ):
        return "names"
    if len(first) == 3 and _is_number(second[2]) and not _is_number(first[2]):
        return "weight"
    return ""


def _all_column_names(fields: list[str]) -> bool:
    return len(fields) in (2, 3) and all(
        _COLUMN_NAME.fullmatch(re.sub(r"[\s_\-#]", "", f.lower())) for f in fields
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def header_note(path: str | os.PathLike[str], start: EdgeStart) -> str:
    """The line that tells the user a header was skipped (empty without one)."""
    if start.header_line is None:
        return ""
    text = " ".join(start.header_fields)
    return f"{os.fspath(path)}:{start.header_line}: read as a header, not an edge: {text!r}"
