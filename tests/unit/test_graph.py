"""graphemb.graph.Graph: constructors agree with each other and with scipy, networkx and DGL
as oracles (degrees, edge multisets, edge ids); transforms against set-based oracles; bad
input raises a clear error."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import CUDA, DEVICES

from graphemb import _compiled
from graphemb.datasets import stochastic_block_model
from graphemb.graph import Graph


def random_edges(seed=0, num_nodes=40, num_edges=300) -> tuple[np.ndarray, np.ndarray]:
    """A random multigraph: parallel edges, self-loops, nodes without in- or out-edges."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes - 3, num_edges)  # the last 3 nodes have no out-edges
    dst = rng.integers(3, num_nodes, num_edges)  # the first 3 nodes have no in-edges
    src = np.concatenate([src, [5, 5, 5, 9]])  # three parallel edges and a self-loop
    dst = np.concatenate([dst, [7, 7, 7, 9]])
    return src, dst


def edge_multiset(graph: Graph) -> Counter:
    src, dst = graph.edges()
    return Counter(zip(src.tolist(), dst.tolist(), strict=True))


def check_edge_ids(graph: Graph, src: np.ndarray, dst: np.ndarray) -> None:
    """Every stored edge is the input edge its id names, and every id appears once."""
    stored_src, stored_dst = graph.edges()
    ids = graph.edge_ids.cpu().numpy()
    assert sorted(ids.tolist()) == list(range(len(src)))
    np.testing.assert_array_equal(stored_src.cpu().numpy(), src[ids])
    np.testing.assert_array_equal(stored_dst.cpu().numpy(), dst[ids])


# ---------------------------------------------------------------------------- constructors
@pytest.mark.parametrize("device", DEVICES)
def test_from_edges_matches_scipy(device):
    src, dst = random_edges()
    n = 40
    graph = Graph.from_edges(torch.from_numpy(src), torch.from_numpy(dst), n, device=device)
    assert graph.device.type == device and (graph.num_nodes, graph.num_edges) == (n, len(src))
    adjacency = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)).tocsc()
    # scipy sums duplicate entries: column sums are in-degrees, row sums out-degrees
    np.testing.assert_array_equal(graph.in_degrees().cpu().numpy(), adjacency.sum(0).A1)
    np.testing.assert_array_equal(graph.out_degrees().cpu().numpy(), adjacency.sum(1).A1)
    assert edge_multiset(graph) == Counter(zip(src.tolist(), dst.tolist(), strict=True))
    check_edge_ids(graph, src, dst)
    for node in (0, 7, 9, n - 1):
        expected = sorted(src[dst == node].tolist())
        assert sorted(graph.in_neighbors(node).tolist()) == expected
    picked = torch.tensor([7, 0, 9], device=graph.device)
    assert graph.in_degrees(picked).tolist() == [int((dst == v).sum()) for v in (7, 0, 9)]
    assert graph.indptr.dtype == graph.indices.dtype == graph.edge_ids.dtype == torch.int64


# The two ways of building the CSC arrays, each against the same oracles: the compiled
# counting sort (CPU, where graphemb_kernels is built from these sources) and the pure-torch
# stable sort (CPU with GRAPHEMB_DISABLE_KERNELS, and CUDA).
COUNTING_SORT = getattr(_compiled.compiled_module(), "csc_from_edges", None)
BUILDS = [
    pytest.param(
        "cpu-compiled",
        marks=pytest.mark.skipif(
            COUNTING_SORT is None,
            reason="graphemb_kernels without csc_from_edges here (rebuild it: make kernels)",
        ),
    ),
    "cpu-torch",
    CUDA,
]


@pytest.fixture(params=BUILDS)
def build_device(request, monkeypatch):
    """The device to build on, with the compiled path switched off for ``cpu-torch``."""
    if request.param == "cpu-torch":
        monkeypatch.setenv(_compiled.DISABLE_VARIABLE, "1")
        return "cpu"
    monkeypatch.delenv(_compiled.DISABLE_VARIABLE, raising=False)
    return request.param.split("-")[0]


def stored_edges_oracle(src, dst, num_nodes, undirected):
    """CSC arrays by numpy's lexsort of the stored edges (destination, then edge id), the
    reverses written out one by one: ``(indptr, indices, edge_ids)``."""
    stored = [(int(u), int(v)) for u, v in zip(src, dst, strict=True)]
    if undirected:
        stored += [(int(v), int(u)) for u, v in zip(src, dst, strict=True) if u != v]
    ids = np.arange(len(stored), dtype=np.int64)
    sources = np.array([u for u, _ in stored], dtype=np.int64)
    targets = np.array([v for _, v in stored], dtype=np.int64)
    order = np.lexsort((ids, targets))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.add.at(indptr, targets + 1, 1)
    return np.cumsum(indptr), sources[order], ids[order]


@pytest.mark.parametrize("undirected", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_from_edges_matches_the_sorted_edge_list_and_scipy(build_device, undirected, seed):
    """Self-loops, parallel edges (also a pair and its reverse), isolated nodes."""
    src, dst = random_edges(seed, num_nodes=60, num_edges=500)
    src = np.concatenate([src, [8, 8, 8, 4, 4]])  # a looped node with parallel loops
    dst = np.concatenate([dst, [8, 8, 4, 8, 8]])
    n = 65  # 60..64 are isolated
    graph = Graph.from_edges(src, dst, n, device=build_device, undirected=undirected)

    indptr, indices, edge_ids = stored_edges_oracle(src, dst, n, undirected)
    assert graph.device.type == build_device
    np.testing.assert_array_equal(graph.indptr.cpu().numpy(), indptr)
    np.testing.assert_array_equal(graph.indices.cpu().numpy(), indices)
    np.testing.assert_array_equal(graph.edge_ids.cpu().numpy(), edge_ids)
    # scipy: the symmetrized adjacency (a loop counted once), duplicates summed
    adjacency = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)).tocsc()
    if undirected:
        adjacency = adjacency + adjacency.T - sp.diags(adjacency.diagonal())
    counts = sp.csc_matrix(
        (np.ones(graph.num_edges), graph.indices.cpu().numpy(), graph.indptr.cpu().numpy()),
        shape=(n, n),
    )
    assert (counts != adjacency).nnz == 0
    assert graph.in_degrees()[60:].tolist() == [0] * 5


@pytest.mark.parametrize("undirected", [False, True])
def test_from_edges_reads_strided_columns_and_edge_cases(build_device, undirected):
    table = torch.from_numpy(np.random.default_rng(3).integers(0, 30, (400, 2)))
    graph = Graph.from_edges(table[:, 0], table[:, 1], 30, build_device, undirected=undirected)
    expected = stored_edges_oracle(table[:, 0].numpy(), table[:, 1].numpy(), 30, undirected)
    for got, want in zip((graph.indptr, graph.indices, graph.edge_ids), expected, strict=True):
        np.testing.assert_array_equal(got.cpu().numpy(), want)
    for src, dst, n in (([], [], 3), ([2, 2, 0], [2, 2, 0], 4), ([1], [0], 2)):
        graph = Graph.from_edges(src, dst, n, build_device, undirected=undirected)
        expected = stored_edges_oracle(src, dst, n, undirected)
        for got, want in zip((graph.indptr, graph.indices, graph.edge_ids), expected, strict=True):
            np.testing.assert_array_equal(got.cpu().numpy(), want)


@pytest.mark.skipif(COUNTING_SORT is None, reason="graphemb_kernels without csc_from_edges")
def test_counting_sort_checks_ids_before_allocating_and_what_it_is_given():
    asked = []

    def allocate(size):
        asked.append(size)
        return torch.full((size,), -7), torch.full((size,), -7)

    src, dst = torch.tensor([0, 1, 2]), torch.tensor([1, 5, 0])
    with pytest.raises(IndexError, match=r"dst\[1\] = 5 is out of range for 3 nodes"):
        COUNTING_SORT(src, dst, 3, False, allocate)
    with pytest.raises(TypeError, match="src must be int64"):
        COUNTING_SORT(src.int(), dst, 3, False, allocate)
    assert asked == []
    with pytest.raises(ValueError, match="allocate must return contiguous indices of 6"):
        COUNTING_SORT(src, torch.tensor([1, 2, 0]), 3, True, lambda size: allocate(size - 1))
    # through Graph.from_edges: the usual message, naming the first bad id
    with pytest.raises(ValueError, match=r"node id 5 out of range \[0, 3\) at dst\[1\]"):
        Graph.from_edges(src, dst, 3)


def sorted_stored_edges(src, dst, num_nodes, undirected):
    """The oracle above, vectorized for large graphs: numpy's stable sort by destination."""
    if undirected:
        loops = src == dst
        src, dst = np.concatenate([src, dst[~loops]]), np.concatenate([dst, src[~loops]])
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(dst, minlength=num_nodes))
    return indptr, src[order], order


@pytest.mark.skipif(COUNTING_SORT is None, reason="graphemb_kernels without csc_from_edges")
@pytest.mark.parametrize("undirected", [False, True])
def test_counting_sort_of_a_large_graph_in_parallel_parts(undirected):
    """Millions of edges: counted in parts on all threads, placed through buckets (the
    paths small graphs do not take); a hub node makes one bucket large."""
    rng = np.random.default_rng(7)
    n, e = 200_000, 4_500_000
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    src[::1000] = dst[::1000]  # self-loops
    dst[::97] = 12_345  # a hub: 46k in-edges
    graph = Graph.from_edges(torch.from_numpy(src), torch.from_numpy(dst), n, undirected=undirected)
    for got, want in zip(
        (graph.indptr, graph.indices, graph.edge_ids),
        sorted_stored_edges(src, dst, n, undirected),
        strict=True,
    ):
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("kernels", ["compiled", "pure torch"])
@pytest.mark.parametrize(
    ("n", "e", "hub"),
    [(50, 400, False), (200_000, 4_500_000, False), (200_000, 2_500_000, True)],
    ids=["small", "large", "large-with-a-hub"],
)
def test_from_edge_table_in_place_matches_the_oracle(monkeypatch, kernels, n, e, hub):
    """Small graphs and hubs take the placements that write edge ids as they go (the edges
    copied first); large ones pack the ids into step 1's entries."""
    if kernels == "pure torch":
        if e > 1000:
            pytest.skip("from_edges itself, tested above")
        monkeypatch.setenv(_compiled.DISABLE_VARIABLE, "1")
    elif COUNTING_SORT is None:
        pytest.skip("graphemb_kernels without csc_from_edges")
    else:
        monkeypatch.delenv(_compiled.DISABLE_VARIABLE, raising=False)
    rng = np.random.default_rng(9)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    src[::50] = dst[::50]  # self-loops
    if hub:
        dst[: e // 3] = 17  # one bucket holds a third of the graph: no buckets
    table = torch.from_numpy(np.stack([src, dst]))
    graph = Graph.from_edge_table_in_place(table, n)
    for got, want in zip(
        (graph.indptr, graph.indices, graph.edge_ids),
        sorted_stored_edges(src, dst, n, undirected=True),
        strict=True,
    ):
        np.testing.assert_array_equal(got.numpy(), want)
    reused = graph.edge_ids.data_ptr() == table.data_ptr()
    assert reused == (
        kernels == "compiled"
        and hasattr(_compiled.compiled_module(), "CSC_EDGE_IDS_MAY_HOLD_EDGES")
    )


def test_from_edge_table_in_place_checks_ids_before_writing():
    table = torch.tensor([[0, 1, 2], [1, 5, 0]])
    with pytest.raises(ValueError, match=r"node id 5 out of range \[0, 3\) at dst\[1\]"):
        Graph.from_edge_table_in_place(table, 3)
    assert table.tolist() == [[0, 1, 2], [1, 5, 0]]


@pytest.mark.skipif(COUNTING_SORT is None, reason="graphemb_kernels without csc_from_edges")
def test_counting_sort_names_the_first_bad_id_of_all_parts():
    n, e = 1000, 3_000_000
    src = torch.from_numpy(np.random.default_rng(8).integers(0, n, e))
    dst = src.flip(0).clone()
    src[2_900_000], dst[2_000_000] = n, -1  # both in the last part
    with pytest.raises(IndexError, match=r"dst\[2000000\] = -1 is out of range for 1000"):
        COUNTING_SORT(src, dst, n, True, lambda size: pytest.fail("allocated"))
    src[7] = n + 5  # in the first part
    with pytest.raises(IndexError, match=r"src\[7\] = 1005 is out of range for 1000"):
        COUNTING_SORT(src, dst, n, True, lambda size: pytest.fail("allocated"))


def test_from_edges_accepts_arrays_lists_and_numpy_sizes():
    src, dst = random_edges()
    reference = Graph.from_edges(torch.from_numpy(src), torch.from_numpy(dst), 40)
    for graph in (
        Graph.from_edges(src, dst, np.int64(40)),
        Graph.from_edges(src.tolist(), dst.tolist(), 40),
        Graph.from_edges(src.astype(np.int32), dst.astype(np.uint16), torch.tensor(40)),
        Graph.from_edges(torch.from_numpy(src).int(), torch.from_numpy(dst).int(), 40),
    ):
        assert torch.equal(graph.indptr, reference.indptr)
        assert torch.equal(graph.indices, reference.indices)
        assert torch.equal(graph.edge_ids, reference.edge_ids)
    inferred = Graph.from_edges(src, dst)  # num_nodes = largest id + 1
    assert inferred.num_nodes == max(src.max(), dst.max()) + 1
    empty = Graph.from_edges([], [], 4)
    assert (empty.num_nodes, empty.num_edges, empty.in_degrees().tolist()) == (4, 0, [0] * 4)
    assert Graph.from_edges([], []).num_nodes == 0


def test_from_scipy_matches_from_edges_and_counts_stored_zeros():
    src, dst = random_edges(seed=1)
    n = 40
    values = np.ones(len(src))
    values[:4] = 0.0  # stored zeros are edges, as in DGL
    for matrix in (
        sp.coo_matrix((values, (src, dst)), shape=(n, n)),
        sp.csr_matrix((values, (src, dst)), shape=(n, n)),
    ):
        graph = Graph.from_scipy(matrix)
        coo = matrix.tocoo()
        assert graph.num_edges == coo.nnz
        assert edge_multiset(graph) == Counter(zip(coo.row.tolist(), coo.col.tolist(), strict=True))
    # a COO matrix keeps its duplicates: the same multigraph as the edge list
    assert edge_multiset(Graph.from_scipy(sp.coo_matrix((values, (src, dst)), shape=(n, n)))) == (
        edge_multiset(Graph.from_edges(src, dst, n))
    )


def test_from_networkx_matches_networkx():
    src, dst = random_edges(seed=2)
    n = 40
    directed = nx.MultiDiGraph()
    directed.add_nodes_from(range(n))
    directed.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    graph = Graph.from_networkx(directed)
    assert graph.in_degrees().tolist() == [directed.in_degree(v) for v in range(n)]
    assert graph.out_degrees().tolist() == [directed.out_degree(v) for v in range(n)]
    assert edge_multiset(graph) == Counter(list(directed.edges()))

    simple = nx.Graph()  # undirected, with a self-loop: both directions, one loop edge
    simple.add_nodes_from(range(n))
    simple.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    assert simple.has_edge(9, 9)
    graph = Graph.from_networkx(simple)
    as_directed = simple.to_directed()
    assert edge_multiset(graph) == Counter(list(as_directed.edges()))
    assert graph.in_degrees().tolist() == [as_directed.in_degree(v) for v in range(n)]


def test_from_dataset_matches_from_edges():
    data = stochastic_block_model(500, 4, avg_degree=6.0, seed=3)
    graph = Graph.from_dataset(data)
    assert graph.num_nodes == data.num_nodes and graph.num_edges == data.src.numel()
    check_edge_ids(graph, data.src.numpy(), data.dst.numpy())


@pytest.mark.dgl
def test_from_dgl_matches_dgl():
    dgl = pytest.importorskip("dgl", reason="needs DGL (the dgl stack)")
    src, dst = random_edges(seed=4)
    dgl_graph = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=40)
    graph = Graph.from_dgl(dgl_graph)
    assert torch.equal(graph.in_degrees(), dgl_graph.in_degrees())
    assert torch.equal(graph.out_degrees(), dgl_graph.out_degrees())
    dgl_src, dgl_dst, dgl_ids = dgl_graph.edges(form="all", order="eid")
    check_edge_ids(graph, dgl_src.numpy(), dgl_dst.numpy())
    assert torch.equal(graph.edge_ids.sort().values, dgl_ids)
    # DGL's in-edges of a node, by id, are ours
    for node in (0, 7, 9):
        _, _, ids = dgl_graph.in_edges(node, form="all")
        start, end = graph.indptr[node], graph.indptr[node + 1]
        assert sorted(graph.edge_ids[start:end].tolist()) == sorted(ids.tolist())


# ---------------------------------------------------------------------------- derived views
def test_csr_lists_out_neighbours_with_their_edge_ids():
    src, dst = random_edges(seed=5)
    graph = Graph.from_edges(src, dst, 40)
    indptr, indices, edge_ids = graph.csr()
    assert graph.csr()[0] is indptr  # cached
    np.testing.assert_array_equal(
        (indptr[1:] - indptr[:-1]).numpy(), np.bincount(src, minlength=40)
    )
    for node in range(40):
        ids = edge_ids[indptr[node] : indptr[node + 1]].numpy()
        assert (src[ids] == node).all()
        np.testing.assert_array_equal(indices[indptr[node] : indptr[node + 1]].numpy(), dst[ids])
    assert sorted(edge_ids.tolist()) == list(range(len(src)))


def test_reverse_keeps_edge_ids():
    src, dst = random_edges(seed=6)
    reverse = Graph.from_edges(src, dst, 40).reverse()
    check_edge_ids(reverse, dst, src)


def test_add_reverse_edges():
    src, dst = random_edges(seed=7)
    both = Graph.from_edges(src, dst, 40).add_reverse_edges()
    check_edge_ids(both, np.concatenate([src, dst]), np.concatenate([dst, src]))


def test_self_loop_helpers():
    src, dst = random_edges(seed=8)
    graph = Graph.from_edges(src, dst, 40)
    pairs = Counter(zip(src.tolist(), dst.tolist(), strict=True))
    without = Counter({(u, v): c for (u, v), c in pairs.items() if u != v})
    assert edge_multiset(graph.remove_self_loops()) == without
    with_loops = without + Counter({(v, v): 1 for v in range(40)})
    assert edge_multiset(graph.add_self_loops()) == with_loops
    assert graph.add_self_loops().in_degrees().tolist() == [
        sum(c for (_, v), c in with_loops.items() if v == node) for node in range(40)
    ]


def test_to_same_device_returns_the_graph():
    graph = Graph.from_edges([0, 1], [1, 2])
    assert graph.to("cpu") is graph and graph.to(torch.device("cpu")) is graph
    assert repr(graph) == "Graph(num_nodes=3, num_edges=2, device=cpu)"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_to_cuda_and_back():
    src, dst = random_edges(seed=9)
    graph = Graph.from_edges(src, dst, 40)
    moved = graph.to("cuda")
    assert moved.device.type == "cuda" and moved.indptr.device == moved.edge_ids.device
    back = moved.to("cpu")
    for name in ("indptr", "indices", "edge_ids"):
        assert torch.equal(getattr(back, name), getattr(graph, name))
    assert torch.equal(moved.csr()[1].cpu(), graph.csr()[1])


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "src, dst, num_nodes, error, message",
    [
        ([0, -1], [1, 2], 4, ValueError, "node id -1"),
        ([0, 1], [1, 4], 4, ValueError, "node id 4 out of range \\[0, 4\\) at dst\\[1\\]"),
        ([0.0, 1.0], [1, 2], 4, TypeError, "integer node ids"),
        (torch.tensor([0.0, 1.0]), [1, 2], 4, TypeError, "float"),
        (torch.tensor([True, False]), [1, 2], 4, TypeError, "bool"),
        ([0, 1, 2], [1, 2], 4, ValueError, "same length, got 3 and 2"),
        ([[0, 1]], [[1, 2]], 4, ValueError, "1-dimensional"),
        (torch.tensor([[0, 1]]), torch.tensor([[1, 2]]), 4, ValueError, "1-dimensional"),
        ([0, 1], [1, 2], 2.0, ValueError, "num_nodes"),
        ([0, 1], [1, 2], True, ValueError, "num_nodes"),
        ([0, 1], [1, 2], -3, ValueError, "num_nodes"),
        (["a", "b"], [1, 2], 4, TypeError, "integer node ids"),
    ],
)
def test_from_edges_rejects_bad_input(src, dst, num_nodes, error, message):
    with pytest.raises(error, match=message):
        Graph.from_edges(src, dst, num_nodes)


def test_constructor_and_converters_reject_bad_input():
    with pytest.raises(ValueError, match="indptr must start at 0"):
        Graph(torch.tensor([1, 2]), torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="non-decreasing"):
        Graph(torch.tensor([0, 2, 1, 3]), torch.tensor([0, 0, 0]))
    with pytest.raises(ValueError, match="node id 5"):
        Graph(torch.tensor([0, 1]), torch.tensor([5]))
    with pytest.raises(ValueError, match="edge_ids has 1 entries but there are 2 edges"):
        Graph(torch.tensor([0, 2]), torch.tensor([0, 0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="square"):
        Graph.from_scipy(sp.coo_matrix((2, 3)))
    with pytest.raises(TypeError, match="scipy sparse matrix"):
        Graph.from_scipy(np.zeros((2, 2)))
    labelled = nx.DiGraph([("a", "b")])
    with pytest.raises(ValueError, match="convert_node_labels_to_integers"):
        Graph.from_networkx(labelled)
    with pytest.raises(TypeError, match="DGLGraph"):
        Graph.from_dgl(object())
    graph = Graph.from_edges([0, 1], [1, 2])
    with pytest.raises(ValueError, match="node 3 out of range"):
        graph.in_neighbors(3)


def test_one_node_id_check_names_the_first_bad_id_and_its_position():
    from graphemb._checks import check_node_ids

    ids = torch.tensor([[0, 4], [7, -2]])  # 7 and -2 are bad; 7 comes first in storage order
    with pytest.raises(ValueError, match=r"^node id 7 out of range \[0, 5\) at ids\[1, 0\]$"):
        check_node_ids(ids, 5, "ids")
    with pytest.raises(IndexError, match=r"^table: node id -2 out of range \[0, 5\) at ids\[3\]$"):
        check_node_ids(torch.tensor([0, 1, 4, -2]), 5, "ids", error=IndexError, context="table: ")
    check_node_ids(torch.tensor([0, 4]), 5, "ids")  # valid ids pass
    check_node_ids(torch.empty(0, dtype=torch.int64), 0, "ids")
