"""Lines of text files and their fields: the one tokenizer of every text format."""

from __future__ import annotations

import os
from collections.abc import Iterator

from .errors import GraphFileError

__all__ = ["COMMENT", "numbered_lines", "split_fields"]

#: Everything from this character to the end of a line is a comment.
COMMENT = "#"


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
    """
    line = line.split(COMMENT, 1)[0]
    if delimiter is None:
        return line.split()
    stripped = line.strip()
    return [field.strip() for field in stripped.split(delimiter)] if stripped else []


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
