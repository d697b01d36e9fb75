"""Lines of text files and their fields: the one tokenizer of every text format.

Comments: ``#`` starts one anywhere on a line; a line whose first non-blank character is
``%`` is one whole (Matrix Market and KONECT files; a ``%`` inside a name is kept).
Fields: split on runs of whitespace, or on a delimiter; :func:`sniff_delimiter` tells a
comma-separated line from a whitespace-separated one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from .errors import GraphFileError

__all__ = ["COMMENT", "LINE_COMMENT", "numbered_lines", "sniff_delimiter", "split_fields"]

#: Everything from this character to the end of a line is a comment.
COMMENT = "#"
#: A line whose first non-blank character is this one is a comment.
LINE_COMMENT = "%"


def split_fields(line: str, delimiter: str | None) -> list[str]:
    """The fields of ``line`` with its comment and surrounding blanks removed.

    Parameters
    ----------
    line : str
    delimiter : str, optional
        Field separator (e.g. ``","``); None splits on runs of whitespace.

    Returns
    -------
    list of str
        Empty for a blank or comment-only line.

    Examples
    --------
    >>> split_fields("a  b 2.5  # note", None), split_fields(" a, b ,1\\n", ",")
    (['a', 'b', '2.5'], ['a', 'b', '1'])
    >>> split_fields("% 12 30 30", None), split_fields("50%off x", None)
    ([], ['50%off', 'x'])
    """
    stripped = line.split(COMMENT, 1)[0].strip()
    if not stripped or stripped.startswith(LINE_COMMENT):
        return []
    if delimiter is None:
        return stripped.split()
    return [field.strip() for field in stripped.split(delimiter)]


def sniff_delimiter(line: str) -> str | None:
    """``","`` when ``line`` reads as comma-separated fields, else None (whitespace).

    A line is comma-separated when it holds a comma and every comma-separated field is
    non-empty and without blanks inside: ``a,b,1`` and ``a, b`` are, ``a,b c`` (a name
    with a comma, then a blank) and ``a b`` are not. Comments and blanks around are ignored.

    Examples
    --------
    >>> sniff_delimiter("1,2,0.5\\n"), sniff_delimiter("n1, c0"), sniff_delimiter("a,b c")
    (',', ',', None)
    """
    fields = split_fields(line, ",")
    if len(fields) < 2 or not all(fields) or any(len(f.split()) != 1 for f in fields):
        return None
    return ","


def numbered_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """``(number, line)`` of each line of a UTF-8 text file, numbered from 1.

    Raises
    ------
    GraphFileError
        Bytes that are not UTF-8, naming the line that holds them.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "bad.txt"
    >>> _ = path.write_bytes(b"a b\\nc \\xff\\n")
    >>> list(numbered_lines(path))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphemb.io.errors.GraphFileError: .../bad.txt:2: not UTF-8 text: byte 0xff at column 3
    """
    with open(path, encoding="utf-8") as stream:
        try:
            yield from enumerate(stream, 1)
        except UnicodeDecodeError:
            # The decoder reads ahead in blocks: find the line that holds the bad byte.
            number, column, byte = _first_undecodable(path)
            raise GraphFileError(
                path, f"not UTF-8 text: byte 0x{byte:02x} at column {column}", number
            ) from None


def _first_undecodable(path: str | os.PathLike[str]) -> tuple[int, int, int]:
    """Line number, 1-based column and value of the first byte that is not UTF-8."""
    with open(path, "rb") as stream:
        for number, raw in enumerate(stream, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as error:
                return number, error.start + 1, raw[error.start]
    raise AssertionError("no undecodable byte found")  # only called after a decode error
