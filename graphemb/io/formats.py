"""The file formats: one registry that the readers, the writers and the command line read.

A format is one :class:`Format` entry: its name, the kind of file (``"graph"``,
``"embedding"``, ``"label"``), its suffixes, a reader and (where there is one) a writer.
Each reader module registers its formats when it is imported (importing any part of
:mod:`graphemb.io` imports them all), so adding a format is one :func:`register` call
beside its reader: :func:`~graphemb.io.read_graph`, :func:`~graphemb.io.read_labels`,
:func:`~graphemb.io.read_node_features`, :func:`~graphemb.io.write_embeddings` /
:func:`~graphemb.io.read_embeddings` and the ``--format`` choices and help of
``python -m graphemb`` all look formats up here.

What a reader and a writer take, by kind:

* ``"graph"``: ``reader(path, *, directed, **options) -> LoadedGraph``.
* ``"embedding"`` (also node features): ``reader(path) -> (rows, names)`` (a float32
  tensor of shape (N, D) and a str array of shape (N,)); ``writer(path, rows, names)``
  with a numeric array of shape (N, D) and checked names of shape (N,).
* ``"label"``: ``reader(path, node_names, *, multi_label=None, **options) -> NodeLabels``.

Example
-------
>>> from graphemb.io import read_graph
>>> from graphemb.io.formats import Format, registered
>>> def read_pairs(path, *, directed=False):
...     from graphemb.io import read_edge_list
...     return read_edge_list(path, directed=directed, delimiter="-")
>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "g.pairs"
>>> _ = path.write_text("a-b\\nb-c\\n")
>>> with registered(Format("pairs", "graph", (".pairs",), read_pairs, description="a-b")):
...     read_graph(path)
LoadedGraph(num_nodes=3, num_edges=4)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Format",
    "SuffixFormats",
    "file_format",
    "find_format",
    "formats",
    "register",
    "registered",
    "unregister",
]


@dataclass(frozen=True)
class Format:
    """One file format.

    Attributes
    ----------
    name : str
        What ``format=`` and ``--format`` take (``"edgelist"``).
    kind : str
        What the file holds: ``"graph"``, ``"embedding"`` or ``"label"`` (any other name
        starts a new kind).
    suffixes : tuple of str
        Lower-case file suffixes with their dot (``(".txt", ".csv")``); may be empty (a
        format named only by ``format=``).
    reader : callable
        Reads a file of the format (the arguments of each kind: see the module docstring).
    writer : callable, optional
        Writes one; None for a format that is only read.
    description : str
        A few words for ``--help`` (``"edge list 'source target [weight]'"``).
    """

    name: str
    kind: str
    suffixes: tuple[str, ...]
    reader: Callable[..., Any]
    writer: Callable[..., None] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name or not self.kind:
            raise ValueError(f"a format needs a name and a kind, got {self.name!r}, {self.kind!r}")
        if isinstance(self.suffixes, str):
            raise TypeError(f"suffixes must be a tuple of str, got the str {self.suffixes!r}")
        bad = [s for s in self.suffixes if not s.startswith(".") or s != s.lower() or len(s) < 2]
        if bad:
            raise ValueError(f"suffixes must be lower case and start with '.', got {bad[0]!r}")


# kind -> name -> Format
_REGISTRY: dict[str, dict[str, Format]] = {}


def register(format: Format) -> Format:
    """Add a format; returns it.

    Raises
    ------
    ValueError
        A format of that kind with the same name, or one that already claims one of the
        suffixes (naming it). Nothing is registered then.
    """
    known = _REGISTRY.setdefault(format.kind, {})
    if format.name in known:
        raise ValueError(f"a {format.kind} format named {format.name!r} is already registered")
    for other in known.values():
        taken = sorted(set(format.suffixes) & set(other.suffixes))
        if taken:
            raise ValueError(
                f"{format.kind} format {format.name!r}: suffix {taken[0]!r} already belongs "
                f"to {other.name!r}"
            )
    known[format.name] = format
    return format


def unregister(format: Format) -> None:
    """Remove a format registered with :func:`register` (KeyError if it is not)."""
    known = _REGISTRY.get(format.kind, {})
    if known.get(format.name) is not format:
        raise KeyError(f"{format.kind} format {format.name!r} is not registered")
    del known[format.name]


@contextmanager
def registered(format: Format) -> Iterator[Format]:
    """Register ``format`` for the ``with`` block only (tests, one-off readers)."""
    register(format)
    try:
        yield format
    finally:
        unregister(format)


def formats(kind: str) -> tuple[Format, ...]:
    """The registered formats of a kind, by name."""
    return tuple(sorted(_REGISTRY.get(kind, {}).values(), key=lambda f: f.name))


def find_format(
    kind: str,
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    default: str | None = None,
) -> Format:
    """The format named ``format``, else the one whose suffix ``path`` has.

    Parameters
    ----------
    kind : str
        ``"graph"``, ``"embedding"``, ``"label"``.
    path : str or PathLike
    format : str, optional
        A registered name of that kind.
    default : str, optional
        The format of a path whose suffix no format claims; None: such a path is an error.

    Raises
    ------
    ValueError
        An unknown ``format`` (naming the known ones), or a suffix no format claims and no
        ``default`` (naming the file and the known suffixes).
    """
    known = _REGISTRY.get(kind, {})
    names = sorted(known)
    if format is not None:
        if format not in known:
            raise ValueError(f"{kind} format must be one of {names}, got {format!r}")
        return known[format]
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    for candidate in known.values():
        if suffix in candidate.suffixes:
            return candidate
    if default is not None:
        return known[default]
    suffixes = sorted(s for f in known.values() for s in f.suffixes)
    raise ValueError(
        f"cannot tell the {kind} format of {os.fspath(path)!r} from its suffix "
        f"(known: {', '.join(suffixes)}); pass format= one of {names}"
    )


def file_format(path: str | os.PathLike[str], format: str | None, kind: str) -> str:
    """The name of :func:`find_format`'s answer (no default)."""
    return find_format(kind, path, format).name


class SuffixFormats(Mapping[str, str]):
    """Format names by file suffix of one kind: a live, read-only view of the registry
    (``GRAPH_FORMATS[".txt"] == "edgelist"``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def _table(self) -> dict[str, str]:
        return {s: f.name for f in formats(self.kind) for s in f.suffixes}

    def __getitem__(self, suffix: str) -> str:
        return self._table()[suffix]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return f"SuffixFormats({self.kind!r}: {self._table()})"
