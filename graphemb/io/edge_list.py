"""Edge lists: one edge per line, ``source target [weight]``, whitespace- or comma-separated.

Where the edges start (a header line, the delimiter) is :mod:`graphemb.io.header`'s;
what is done with duplicate edges and self loops, :mod:`graphemb.io.edge_rules`'.

Files of integer node names take a compiled path where ``graphemb_kernels`` is built (the
file cut at line starts and parsed on all threads), else a vectorized one (numpy's C text
parser, no Python per line). The compiled parser takes only plain integer lines and gives
up on anything else, numpy's on anything it cannot read; any other file (string names)
and every malformed file then take a line-by-line path that maps names to ids as it goes,
and reports the first bad line. All three read a file they accept to the same arrays.
Where the compiled parser reads a file, an undirected graph is built in the memory of the
parsed edges: the peak memory is then about that of the graph's arrays (measured in
``benchmarks/bench_read_graph.py``).
"""

from __future__ import annotations

import os
import warnings
from array import array
from typing import Any, NamedTuple

import numpy as np
import torch

from .._compiled import compiled_module, disabled
from .edge_rules import apply_edge_rules, first_line_with_bad_id
from .errors import GraphFileError
from .fields import COMMENT, numbered_lines, split_fields
from .formats import Format, register
from .header import EdgeStart, edge_start, header_confirmed, header_note
from .loaded_graph import LoadedGraph, graph_from_edge_ids, refuse_bad_weights
from .node_names import NameIndex, pack_integer_names
from .read_options import ReadOptions, takes_read_options

__all__ = ["EdgeArrays", "parse_edge_list", "read_edge_list"]


class EdgeArrays(NamedTuple):
    """The edges of an edge-list file, with node names mapped to ids ``0 .. N-1``.

    Attributes
    ----------
    src, dst : int64 arrays, shape (E,)
        Endpoints of edge ``i`` (the ``i``-th edge line).
    node_names : numpy array, shape (N,)
        Original name of each id: int64 when every name is an integer, else str.
    weights : float64 array, shape (E,), or None
    """

    src: np.ndarray
    dst: np.ndarray
    node_names: np.ndarray
    weights: np.ndarray | None


@takes_read_options()
def read_edge_list(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    header: bool | None = None,
    options: ReadOptions,
) -> LoadedGraph:
    """A graph from an edge-list file.

    Parameters
    ----------
    path : str or PathLike
        Lines ``source target`` or ``source target weight``; ``#`` starts a comment, and so
        does ``%`` at the start of a line (Matrix Market, KONECT); blank lines are
        skipped. Node names are any tokens without blanks (or delimiters).
    delimiter : str, optional
        Default: ``","`` for ``.csv`` files and for files whose first line is
        comma-separated (:func:`~graphemb.io.fields.sniff_delimiter`), else any run of
        whitespace.
    header : bool, optional
        True: the first non-comment line names the columns and is skipped; False: it is an
        edge. Default None: it is a header when it does not parse as an edge while the
        next line does (the rule of :mod:`graphemb.io.header`), and the returned graph's
        ``notes`` say so.
    directed, weighted, merge_duplicates, drop_self_loops, implicit_ids
        See :class:`~graphemb.io.read_options.ReadOptions`: by default each line is an
        undirected edge, a weight where the first edge line has a third column; duplicate
        lines are parallel edges and self loops are kept.

    Returns
    -------
    LoadedGraph
        With ``weights`` when the file is weighted, and ``notes`` (a header skipped, self
        loops kept or dropped, duplicates merged).

    Raises
    ------
    GraphFileError
        Naming the line: a wrong number of columns, a weight that is not a number, is NaN,
        infinite or negative; or a file with no edges, or whose weights are all 0.
        Nothing is returned half-read.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "edges.txt"
    >>> _ = path.write_text("source target\\n1 2\\n2 3\\n2 3\\n")
    >>> loaded = read_edge_list(path, merge_duplicates=True)
    >>> loaded.node_names.tolist(), loaded.num_edges
    ([1, 2, 3], 4)
    >>> print(loaded.notes[0])  # doctest: +ELLIPSIS
    /.../edges.txt:1: read as a header, not an edge: 'source target'
    """
    path = os.fspath(path)
    edges, table, start = _parse(path, delimiter, options.weighted, header)
    return _loaded_graph(path, edges, table, start, options)


def _loaded_graph(
    path: str,
    edges: EdgeArrays,
    table: torch.Tensor | None,
    start: EdgeStart,
    options: ReadOptions,
) -> LoadedGraph:
    """The graph of parsed edges, ``options`` applied, with the notes for the user."""
    ruled = apply_edge_rules(
        path,
        edges.src,
        edges.dst,
        edges.node_names,
        edges.weights,
        options=options,
        first_bad_id_line=lambda: first_line_with_bad_id(
            path, start.delimiter, start.first_line, slice(0, 2)
        ),
    )
    graph, weights = graph_from_edge_ids(
        ruled.src,
        ruled.dst,
        len(ruled.node_names),
        directed=options.directed,
        weights=ruled.weights,
        # the graph is built in the memory of the parsed edges where they are unchanged
        edge_table=None if ruled.changed else table,
    )
    notes = tuple(n for n in (header_note(path, start),) if n) + ruled.notes
    return LoadedGraph(graph, ruled.node_names, weights, notes=notes)


register(
    Format(
        "edgelist",
        "graph",
        (".txt", ".edgelist", ".edges", ".el", ".tsv", ".csv"),
        read_edge_list,
        description="edge list, 'source target [weight]' lines",
    )
)


def parse_edge_list(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    weighted: bool | None = None,
    header: bool | None = None,
) -> EdgeArrays:
    """The edges of an edge-list file as id arrays (see :func:`read_edge_list`; every line
    an edge, none merged or dropped)."""
    return _parse(os.fspath(path), delimiter, weighted, header)[0]


def _parse(
    path: str, delimiter: str | None, weighted: bool | None, header: bool | None
) -> tuple[EdgeArrays, torch.Tensor | None, EdgeStart]:
    """The edges, the (2, E) tensor that ``src`` and ``dst`` are the rows of where the
    compiled parser read them (else None), and where they start."""
    start = edge_start(path, delimiter, header)
    edges, table = _parse_from(path, start, weighted)
    if header is None and start.header_line is not None:
        if not header_confirmed(start, edges.node_names):  # the line is an edge after all
            start = EdgeStart(start.delimiter, start.header_line, len(start.header_fields))
            edges, table = _parse_from(path, start, weighted)
    return edges, table, start


def _parse_from(
    path: str, start: EdgeStart, weighted: bool | None
) -> tuple[EdgeArrays, torch.Tensor | None]:
    """The edges from ``start.first_line`` on (see :func:`_parse`)."""
    delimiter, first_line, columns = start.delimiter, start.first_line, start.columns
    if weighted is None:
        weighted = columns == 3
    elif weighted and columns != 3:
        raise GraphFileError(
            path,
            f"no weight column: weighted reading needs 'source target weight' lines, this "
            f"one has {columns} columns",
            first_line,
        )
    parsed: tuple[EdgeArrays, torch.Tensor | None] | None = _parse_compiled(
        path, delimiter, first_line, columns, weighted
    )
    if parsed is None:  # no compiled parser, or lines it does not take
        arrays = _parse_integers(path, delimiter, first_line, columns, weighted)
        if arrays is None:  # string names, or a bad line to report
            arrays = _parse_lines(path, delimiter, first_line, columns, weighted)
        parsed = arrays, None
    refuse_bad_weights(
        path,
        parsed[0].weights,
        lambda edge: ("", _line_of_edge(path, delimiter, first_line, edge)),
    )
    return parsed


def _line_of_edge(path: str, delimiter: str | None, first_line: int, edge: int) -> int:
    """1-based line number of the ``edge``-th edge line (0-based), for error messages."""
    seen = 0
    for number, line in numbered_lines(path):
        if number >= first_line and split_fields(line, delimiter):
            if seen == edge:
                return number
            seen += 1
    raise AssertionError(f"{path} has no edge {edge}")  # the parsers read it from there


# Characters that may be part of a field the compiled parser reads: such a delimiter, or
# one that is not a single printable ASCII character, is left to the other paths.
_FIELD_CHARACTERS = " \t\r\n#+-.0123456789eE"


def _parse_compiled(
    path: str, delimiter: str | None, first_line: int, columns: int, weighted: bool
) -> tuple[EdgeArrays, torch.Tensor] | None:
    """The compiled parser (``graphemb_kernels.parse_integer_edges``): the edges and the
    (2, E) tensor of their ids; None where it is absent or disabled, for a delimiter it
    does not take, and for any file that is not a plain integer edge list."""
    module = compiled_module()
    parse = None if module is None or disabled() else getattr(module, "parse_integer_edges", None)
    if parse is None:
        return None
    if delimiter is not None and not (
        len(delimiter) == 1
        and delimiter.isascii()
        and delimiter.isprintable()
        and delimiter not in _FIELD_CHARACTERS
    ):
        return None
    parsed = parse(os.fsencode(path), first_line - 1, delimiter or "", columns, weighted)
    if parsed is None:
        return None
    table, weights, low, high, dense = parsed
    src, dst = table.numpy()
    if dense:  # every name of 0 .. high is there: the names are the ids
        names = np.arange(high + 1, dtype=np.int64)
    else:  # the ids written over the names: the table stays the edges' memory
        (src_ids, dst_ids), names = pack_integer_names([src, dst], (low, high))
        src[...], dst[...] = src_ids, dst_ids
    arrays = EdgeArrays(src, dst, names, None if weights is None else weights.numpy())
    return arrays, table


_INTEGER_VIA_FLOAT = ".*Parsing an integer via a float"


def _parse_integers(
    path: str, delimiter: str | None, first_line: int, columns: int, weighted: bool
) -> EdgeArrays | None:
    """The fast path: None unless every line is well formed with integer node names."""
    dtype: Any = (
        [("src", np.int64), ("dst", np.int64), ("weight", np.float64)] if columns == 3 else np.int64
    )
    try:
        with warnings.catch_warnings():
            # numpy < 2 reads an integer field that is not an integer through a float (an
            # id beyond int64 then becomes a wrong one): such names are the other path's.
            warnings.filterwarnings("error", _INTEGER_VIA_FLOAT, DeprecationWarning)
            table = np.loadtxt(
                path,
                dtype=dtype,
                comments=COMMENT,
                delimiter=delimiter,
                skiprows=first_line - 1,
                ndmin=2 if columns == 2 else 1,
                encoding="utf-8",
            )
    # TypeError: a delimiter numpy does not take (more than one character)
    except (ValueError, OverflowError, DeprecationWarning, TypeError):
        return None
    if columns == 3:
        src, dst = table["src"], table["dst"]
        weights = np.ascontiguousarray(table["weight"]) if weighted else None
    else:
        src, dst, weights = table[:, 0], table[:, 1], None
    (src_ids, dst_ids), names = pack_integer_names([src, dst])
    return EdgeArrays(src_ids, dst_ids, names, weights)


def _parse_lines(
    path: str, delimiter: str | None, first_line: int, columns: int, weighted: bool
) -> EdgeArrays:
    """Line by line: any node names; raises on the first malformed line."""
    index = NameIndex()
    src, dst = array("q"), array("q")
    weights = array("d")
    for number, line in numbered_lines(path):
        if number < first_line:
            continue
        fields = split_fields(line, delimiter)
        if not fields:
            continue
        if len(fields) != columns:
            raise GraphFileError(
                path,
                f"expected {columns} columns (as on line {first_line}), got "
                f"{len(fields)}: {line.strip()!r}",
                number,
            )
        src.append(index.id(fields[0]))
        dst.append(index.id(fields[1]))
        if weighted:
            try:
                weights.append(float(fields[2]))
            except ValueError:
                raise GraphFileError(
                    path, f"weight {fields[2]!r} is not a number", number
                ) from None
    (src_ids, dst_ids), names = index.pack(
        [np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)]
    )
    return EdgeArrays(
        src_ids, dst_ids, names, np.array(weights, dtype=np.float64) if weighted else None
    )
