"""The one error raised for bad input files: it names the file, the line and the problem."""

from __future__ import annotations

import os

__all__ = ["GraphFileError"]


class GraphFileError(ValueError):
    """A file that cannot be read as asked, e.g. ``edges.txt:17: expected 2 or 3 columns,
    got 4: 'a b c d'``.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    problem : str
        What is wrong, naming the bad value.
    line : int, optional
        1-based line number of the bad line (text formats).

    Attributes
    ----------
    path, line, problem
        As given.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str, line: int | None = None):
        self.path = os.fspath(path)
        self.line = line
        self.problem = problem
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {problem}")
