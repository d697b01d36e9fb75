"""A file's format: the one named, else the one its suffix stands for."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["file_format"]


def file_format(
    path: str | os.PathLike[str], format: str | None, formats: Mapping[str, str], kind: str
) -> str:
    """``format`` if given (checked), else ``formats[suffix of path]``.

    Parameters
    ----------
    path : str or PathLike
    format : str, optional
        The format named by the caller: one of the values of ``formats``.
    formats : mapping of str to str
        Format names by lower-case file suffix (``".txt"``).
    kind : str
        What the file holds (``"graph"``), for the error messages.

    Raises
    ------
    ValueError
        For a ``format`` that is not one of ``formats``' values, or a suffix that is not
        one of its keys, naming the value and the known ones.
    """
    known = sorted(set(formats.values()))
    if format is not None:
        if format not in known:
            raise ValueError(f"{kind} format must be one of {known}, got {format!r}")
        return format
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in formats:
        raise ValueError(
            f"cannot tell the {kind} format of {os.fspath(path)!r} from its suffix "
            f"(known: {', '.join(sorted(formats))}); pass format= one of {known}"
        )
    return formats[suffix]
