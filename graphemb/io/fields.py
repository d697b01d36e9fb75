"""The fields of one line of a text file: the one tokenizer of every text format."""

from __future__ import annotations

__all__ = ["COMMENT", "split_fields"]

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
