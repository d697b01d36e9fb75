"""Reading users' graphs and writing embeddings.

* :func:`read_graph`: edge lists, adjacency lists, MATLAB ``.mat`` (``network`` and
  ``group``), scipy ``.npz``, Matrix Market ``.mtx``; :func:`from_networkx` and
  :func:`from_pyg` convert graphs in memory. A first line that is not an edge while the
  next one is becomes a header (:mod:`graphemb.io.header`); duplicate edges and self loops
  are kept unless asked, as every reader's other shared options say (:class:`ReadOptions`).
  Node names (strings or sparse integers) map to ids ``0 .. N-1``; the names are kept for
  output.
* :func:`read_labels`: node labels from a text file (single- or multi-label) or a
  ``.mat`` file's ``group``;
  :func:`read_node_features`: feature rows matched to the nodes by name.
* :func:`write_embeddings` / :func:`read_embeddings`: the word2vec text format
  (``.emb``) and ``.npy``.

Every format is one entry of :mod:`graphemb.io.formats` (name, suffixes, reader, writer):
the functions above and the command line's choices read that registry.

Malformed files raise :class:`GraphFileError`, naming the file, the line and the problem;
nothing is returned or written half-done.

Example
-------
>>> import pathlib, tempfile, torch
>>> from graphemb.io import read_graph, write_embeddings, read_embeddings
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "edges.txt").write_text("10 20\\n20 30\\n")
>>> loaded = read_graph(folder / "edges.txt")
>>> loaded.node_names.tolist(), loaded.graph.num_edges
([10, 20, 30], 4)
>>> rows = torch.tensor([[1, -0.5], [0, 2], [3, 4]])
>>> write_embeddings(folder / "out.emb", rows, loaded.node_names)
>>> print((folder / "out.emb").read_text(), end="")
3 2
10 1.000000000e+00 -5.00000000e-01
20 0.000000000e+00 2.000000000e+00
30 3.000000000e+00 4.000000000e+00
"""

from .adjacency_list import read_adjacency_list
from .adjacency_matrix import graph_from_adjacency
from .edge_list import EdgeArrays, parse_edge_list, read_edge_list
from .embeddings import EMBEDDING_FORMATS, read_embeddings, write_embeddings
from .errors import GraphFileError
from .features import read_node_features
from .labels import NodeLabels, read_labels
from .loaded_graph import LoadedGraph
from .matrix_market import read_mtx
from .objects import from_networkx, from_pyg
from .read import GRAPH_FORMATS, graph_format, read_graph
from .read_options import ReadOptions
from .sparse_matrix import read_mat, read_mat_labels, read_npz

__all__ = [
    "EMBEDDING_FORMATS",
    "GRAPH_FORMATS",
    "EdgeArrays",
    "GraphFileError",
    "LoadedGraph",
    "NodeLabels",
    "ReadOptions",
    "from_networkx",
    "from_pyg",
    "graph_format",
    "graph_from_adjacency",
    "parse_edge_list",
    "read_adjacency_list",
    "read_edge_list",
    "read_embeddings",
    "read_graph",
    "read_labels",
    "read_mat",
    "read_mat_labels",
    "read_mtx",
    "read_node_features",
    "read_npz",
    "write_embeddings",
]
