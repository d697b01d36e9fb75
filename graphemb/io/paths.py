"""Checks of the files a run reads and writes, made before any work: each error names the
user's path and what is wrong with it."""

from __future__ import annotations

import os

__all__ = ["check_readable_file", "check_writable_file"]


def check_readable_file(path: str | os.PathLike[str]) -> None:
    """Raise unless ``path`` is an existing file that this process may read.

    Raises
    ------
    FileNotFoundError, IsADirectoryError, PermissionError
        Naming ``path``.

    Examples
    --------
    >>> check_readable_file("no/such/edges.txt")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no such file: 'no/such/edges.txt'
    """
    name = os.fspath(path)
    if not os.path.exists(name):
        raise FileNotFoundError(f"no such file: {name!r}")
    if os.path.isdir(name):
        raise IsADirectoryError(f"{name!r} is a directory, not a file")
    if not os.access(name, os.R_OK):
        raise PermissionError(f"cannot read {name!r}: permission denied")


def check_writable_file(path: str | os.PathLike[str]) -> None:
    """Raise unless ``path`` can be written: its directory exists and may be written, and
    ``path`` is not a directory (an existing file is replaced).

    Raises
    ------
    FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError
        Naming ``path`` (and its directory).

    Examples
    --------
    >>> check_writable_file("no/such/folder/out.emb")
    Traceback (most recent call last):
    ...
    FileNotFoundError: cannot write 'no/such/folder/out.emb': no directory 'no/such/folder'
    """
    name = os.fspath(path)
    folder = os.path.dirname(name) or "."
    if not os.path.exists(folder):
        raise FileNotFoundError(f"cannot write {name!r}: no directory {folder!r}")
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"cannot write {name!r}: {folder!r} is not a directory")
    if os.path.isdir(name):
        raise IsADirectoryError(f"cannot write {name!r}: it is a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write {name!r}: directory {folder!r} is not writable")
    if os.path.exists(name) and not os.access(name, os.W_OK):
        raise PermissionError(f"cannot write {name!r}: the file is read-only")
