"""Random walks (graphemb.sampling.walks): structural invariants, and the distribution of
steps against the formulas -- 1/out-degree for uniform walks, node2vec's 1/p, 1, 1/q
weights otherwise -- with chi-square tests (scipy), plus DGL's samplers on the dgl stack.

Every statistical test draws from a seeded generator, so it is deterministic; its
threshold (p-value > 1e-3) is checked to reject a slightly wrong distribution as well.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from helpers import DEVICES
from sampling_cases import walker_path  # noqa: F401 (a fixture)
from scipy import stats

from graphemb.graph import Graph
from graphemb.sampling.walks import PAD, RandomWalker, random_walks

P_VALUE = 1e-3


pytestmark = pytest.mark.usefixtures(
    "one_thread", "walker_path"
)  # conftest: every test on one torch thread


def seeded(device, seed=0) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def directed_graph(device="cpu") -> Graph:
    """Random directed multigraph: parallel edges, self-loops, and sinks (no out-edges)."""
    gen = torch.Generator().manual_seed(7)
    num_nodes = 30
    src = torch.randint(0, 25, (120,), generator=gen)  # nodes 25..29 have no out-edges
    dst = torch.randint(0, num_nodes, (120,), generator=gen)
    src = torch.cat([src, torch.tensor([3, 3, 4])])  # parallel edges and a self-loop
    dst = torch.cat([dst, torch.tensor([7, 7, 4])])
    return Graph.from_edges(src, dst, num_nodes, device=device)


def edge_list(graph: Graph) -> tuple[list[int], list[int]]:
    src, dst = graph.edges()
    return src.tolist(), dst.tolist()


def transitions(walks: torch.Tensor, first_step: int = 0) -> torch.Tensor:
    """(from, to) of every step of every walk from column ``first_step`` on, PAD excluded."""
    left, right = walks[:, first_step:-1].reshape(-1), walks[:, first_step + 1 :].reshape(-1)
    keep = right != PAD
    return torch.stack([left[keep], right[keep]], 1)


# ---------------------------------------------------------------------------- invariants
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p, q", [(1.0, 1.0), (0.5, 2.0), (3.0, 0.3)])
def test_every_step_is_an_edge_and_padding_follows_sinks(device, p, q):
    graph = directed_graph(device)
    src, dst = edge_list(graph)
    edges = set(zip(src, dst, strict=True))
    out_degree = Counter(src)
    start = torch.arange(graph.num_nodes, device=device).repeat(20)
    walks = RandomWalker(graph, p, q)(start, 12, generator=seeded(device))

    assert walks.shape == (start.numel(), 13) and walks.dtype == torch.int64
    assert walks.device.type == torch.device(device).type
    walks = walks.cpu()
    assert torch.equal(walks[:, 0], start.cpu())
    for row in walks.tolist():
        length = row.index(PAD) if PAD in row else len(row)
        assert all(v == PAD for v in row[length:])  # once stopped, stopped for good
        assert all((a, b) in edges for a, b in zip(row[: length - 1], row[1:length], strict=True))
        if length < len(row):  # stopped early: only on a node without out-edges
            assert out_degree[row[length - 1]] == 0
        else:
            assert all(out_degree[v] > 0 for v in row[:-1])


@pytest.mark.parametrize("device", DEVICES)
def test_seeded_walks_repeat_and_differ_across_seeds(device):
    graph = directed_graph(device)
    start = torch.arange(graph.num_nodes, device=device)
    for p, q in [(1.0, 1.0), (0.5, 2.0)]:
        walker = RandomWalker(graph, p, q)
        first = walker(start, 8, generator=seeded(device, 1))
        assert torch.equal(first, walker(start, 8, generator=seeded(device, 1)))
        assert not torch.equal(first, walker(start, 8, generator=seeded(device, 2)))
        assert torch.equal(
            first, random_walks(graph, start, 8, p=p, q=q, generator=seeded(device, 1))
        )


def test_degenerate_inputs():
    graph = directed_graph()
    walker = RandomWalker(graph)
    assert torch.equal(walker(torch.tensor([3, 26]), 0), torch.tensor([[3], [26]]))
    assert walker(torch.empty(0, dtype=torch.long), 5).shape == (0, 6)
    assert torch.equal(walker(torch.tensor([26]), 3), torch.tensor([[26, PAD, PAD, PAD]]))
    no_edges = Graph.from_edges(
        torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long), 4
    )
    for p in (1.0, 2.0):
        assert torch.equal(
            RandomWalker(no_edges, p=p)(torch.tensor([0, 3]), 2),
            torch.tensor([[0, PAD, PAD], [3, PAD, PAD]]),
        )
    # start ids of another integer dtype are fine
    assert walker(torch.tensor([1, 2], dtype=torch.int32), 2).dtype == torch.int64


def graph_storages(graph: Graph) -> set[int]:
    """Where the graph's own arrays live: its CSC arrays and, for a directed graph, the CSR
    it caches (built here, as a walker would)."""
    arrays = [graph.indptr, graph.indices, graph.edge_ids]
    if not graph.symmetric:
        arrays += list(graph.csr())
    return {array.untyped_storage().data_ptr() for array in arrays}


@pytest.mark.parametrize("undirected", [False, True])
def test_an_unweighted_walker_holds_nothing_per_node_beyond_the_graph(undirected):
    """DeepWalk on 10M nodes: each (N,) array a walker keeps costs 80 MB. A uniform walker
    holds only the graph's own arrays; a node2vec walker holds a sorted copy of the (E,)
    neighbour ids, but still nothing per node of its own."""
    src, dst = edge_list(directed_graph())
    graph = Graph.from_edges(src, dst, 30, undirected=undirected)
    assert graph.symmetric == undirected
    assert graph.num_edges not in (graph.num_nodes, graph.num_nodes + 1)  # sizes tell apart
    own = graph_storages(graph)
    for p, q in [(1.0, 1.0), (0.5, 2.0)]:
        walker = RandomWalker(graph, p, q)
        held = [value for value in vars(walker).values() if isinstance(value, torch.Tensor)]
        assert held
        if walker.uniform:
            kept = held
        else:
            kept = [t for t in held if t.numel() in (graph.num_nodes, graph.num_nodes + 1)]
        for tensor in kept:
            assert tensor.untyped_storage().data_ptr() in own, (p, q, tuple(tensor.shape))
        # and the walks still stop where the out-degree is 0
        walks = walker(torch.arange(30), 5, generator=seeded("cpu"))
        out_degree = Counter(src if not undirected else src + dst)
        for row in walks.tolist():
            steps = [v for v in row if v != PAD]
            assert len(steps) == 6 or out_degree[steps[-1]] == 0


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda g: RandomWalker(g)(torch.tensor([0.0]), 3), TypeError, "integer node ids"),
        (lambda g: RandomWalker(g)(torch.tensor([True]), 3), TypeError, "integer node ids"),
        (lambda g: RandomWalker(g)([0, 1], 3), TypeError, "tensor of node ids"),
        (lambda g: RandomWalker(g)(torch.tensor([[0]]), 3), ValueError, "1-dimensional"),
        (lambda g: RandomWalker(g)(torch.tensor([0, 30]), 3), ValueError, "node id 30"),
        (lambda g: RandomWalker(g)(torch.tensor([-1]), 3), ValueError, "node id -1"),
        (lambda g: RandomWalker(g)(torch.tensor([0]), -1), ValueError, "walk_length"),
        (lambda g: RandomWalker(g)(torch.tensor([0]), 2.0), ValueError, "walk_length"),
        (lambda g: RandomWalker(g)(torch.tensor([0]), 2, generator=1), TypeError, "generator"),
        (lambda g: RandomWalker(g, p=0.0), ValueError, "p must be a positive"),
        (lambda g: RandomWalker(g, q=float("inf")), ValueError, "q must be a positive"),
        (lambda g: RandomWalker(g, q=-1), ValueError, "q must be a positive"),
        (lambda g: RandomWalker(g, p=True), TypeError, "p must be a positive"),
        (lambda g: RandomWalker(g, p="2"), TypeError, "p must be a positive"),
        (lambda g: RandomWalker(g.edges()), TypeError, "Graph"),
    ],
)
def test_bad_input_is_refused(call, error, message):
    with pytest.raises(error, match=message):
        call(directed_graph())


@pytest.mark.parametrize("p, q", [(1.0, 1.0), (0.5, 2.0)])
def test_walks_written_into_out_are_the_walks_drawn_without_it(p, q):
    """``out=`` is only where the walks go: the same walks from the same stream, every
    entry overwritten (padding after sinks included), ``out`` itself returned."""
    graph = directed_graph()
    walker = RandomWalker(graph, p, q)
    start = torch.arange(graph.num_nodes).repeat(3)
    expected = walker(start, 7, generator=seeded("cpu", 3))
    assert bool((expected == PAD).any())  # some walks reach a sink
    buffer = torch.full((start.numel() + 5, 8), 12345, dtype=torch.int64)
    out = buffer[: start.numel()]
    walks = walker(start, 7, generator=seeded("cpu", 3), out=out)
    assert walks is out and torch.equal(walks, expected)
    assert bool((buffer[start.numel() :] == 12345).all())  # nothing written beyond out


@pytest.mark.parametrize("p, q", [(1.0, 1.0), (0.5, 2.0)])
def test_walks_from_starts_held_in_outs_first_column_are_the_walks_from_an_array(p, q):
    """``start`` may be ``out[:, 0]`` itself (the start nodes computed into the buffer), or
    any strided vector: the same walks as from a contiguous array of the same nodes."""
    graph = directed_graph()
    walker = RandomWalker(graph, p, q)
    start = torch.arange(graph.num_nodes).flip(0).repeat(5)
    expected = walker(start, 6, generator=seeded("cpu", 11))
    out = torch.full((start.numel(), 7), 12345, dtype=torch.int64)
    out[:, 0] = start
    walks = walker(out[:, 0], 6, generator=seeded("cpu", 11), out=out)
    assert walks is out and torch.equal(walks, expected)
    spaced = torch.stack([start, -start - 1], dim=1).reshape(-1)[::2]  # stride 2, apart from out
    assert spaced.stride(0) == 2
    assert torch.equal(walker(spaced, 6, generator=seeded("cpu", 11)), expected)


def test_starts_overlapping_out_elsewhere_than_its_first_column_are_refused():
    """A start vector inside ``out`` but not its first column would be overwritten by other
    walks before it is read: refused, and ``out`` left as it was."""
    walker = RandomWalker(directed_graph())
    out = torch.zeros((6, 4), dtype=torch.int64)
    out.view(-1)[:6] = torch.tensor([0, 1, 2, 3, 4, 5])
    before = out.clone()
    # its first entries, its second column, its first column shifted by a row
    for start, rows in ((out.view(-1)[:6], out), (out[:, 1], out), (out[1:, 0], out[:5])):
        with pytest.raises(
            ValueError, match=r"start shares memory with out but is not out\[:, 0\]"
        ):
            walker(start, 3, out=rows)
        assert torch.equal(out, before)


@pytest.mark.parametrize(
    "out, error, message",
    [
        ([[0] * 4] * 2, TypeError, "out must be a torch.Tensor, got list"),
        (torch.zeros(2, 4, dtype=torch.int32), ValueError, r"int64 tensor of shape \(2, 4\)"),
        (torch.zeros(2, 5, dtype=torch.int64), ValueError, r"got torch.int64 \(2, 5\)"),
        (torch.zeros(4, 2, dtype=torch.int64).t(), ValueError, "out must be contiguous"),
    ],
)
def test_bad_out_is_refused_and_left_as_it_was(out, error, message):
    before = out.clone() if isinstance(out, torch.Tensor) else None
    with pytest.raises(error, match=message):
        RandomWalker(directed_graph())(torch.tensor([0, 1]), 3, out=out)
    if before is not None:
        assert torch.equal(out, before)


@pytest.mark.parametrize("p, q, weighted", [(1.0, 1.0, False), (0.5, 2.0, False), (2.0, 0.5, True)])
def test_compiled_walks_do_not_depend_on_the_thread_count(walker_path, p, q, weighted):  # noqa: F811
    """Every walker draws from a stream of its own (the call's key and its position): the
    compiled walker splits 5,000 walkers over 2 threads and gives the walks of 1."""
    if walker_path != "compiled":
        pytest.skip("the pure-torch walker has one stream for all walkers")
    graph = directed_graph()
    graph.edge_weight = torch.arange(1, graph.num_edges + 1, dtype=torch.float64)
    walker = RandomWalker(graph, p, q, weighted=weighted)
    start = torch.arange(graph.num_nodes).repeat(1000)
    walks = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        walks[threads] = walker(start, 9, generator=seeded("cpu", 5))
    assert torch.equal(walks[1], walks[2])
    assert not torch.equal(walks[1][:1000], walks[1][1000:2000])  # walkers differ


def test_the_compiled_walker_refuses_inconsistent_arrays_and_writes_nothing(walker_path):  # noqa: F811
    from graphemb._native import sampling

    if walker_path != "compiled":
        pytest.skip("the binding of the compiled walker")
    graph = directed_graph()
    indptr, indices, _ = graph.csr()
    out = torch.full((2, 4), 7, dtype=torch.int64)
    start = torch.tensor([0, 1])
    with pytest.raises(ValueError, match="weighted walks need cumulative and last"):
        sampling.random_walks(indptr, indices, None, indptr[:-1], start, 1.0, 1.0, 0, out)
    short = torch.zeros(indices.numel(), dtype=torch.float64)  # one entry short
    with pytest.raises(ValueError, match=r"cumulative must be .* of E \+ 1 = 124 entries"):
        sampling.random_walks(indptr, indices, short, indptr[:-1], start, 1.0, 1.0, 0, out)
    with pytest.raises(ValueError, match="out must be a contiguous int64 CPU tensor of 2 rows"):
        sampling.random_walks(indptr, indices, None, None, start, 1.0, 1.0, 0, out[:1])
    with pytest.raises(IndexError, match=r"start\[1\] = 99 is not a node of a graph of 30"):
        sampling.random_walks(indptr, indices, None, None, torch.tensor([0, 99]), 1.0, 1.0, 0,
                              out)  # fmt: skip
    with pytest.raises(ValueError, match="p = -1 and q = 1 must be positive"):
        sampling.random_walks(indptr, indices, None, None, start, -1.0, 1.0, 0, out)
    assert bool((out == 7).all())


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_generator_on_another_device_is_refused():
    graph = directed_graph("cuda")
    with pytest.raises(ValueError, match="generator is on cpu"):
        RandomWalker(graph)(torch.tensor([0], device="cuda"), 3, generator=torch.Generator())


# ---------------------------------------------------------------------------- distributions
def chi_square_by_group(observed: dict, expected_probability: dict, group_totals: dict) -> float:
    """p-value of a chi-square test of per-group multinomial counts; ``observed`` and
    ``expected_probability`` are keyed by (group, outcome), ``group_totals`` by group."""
    cells = sorted(expected_probability)
    f_obs = [observed.get(cell, 0) for cell in cells]
    f_exp = [group_totals[cell[0]] * expected_probability[cell] for cell in cells]
    assert set(observed) <= set(cells), "a transition the formula gives probability 0"
    # One constraint per group (its counts sum to its total): ddof = groups - 1.
    return stats.chisquare(f_obs, f_exp, ddof=len(group_totals) - 1).pvalue


def uniform_expectation(graph: Graph, multiplicity: bool = True) -> dict:
    """P(next = x | at v) = (number of edges v -> x) / out-degree(v)."""
    src, dst = edge_list(graph)
    counts = Counter(zip(src, dst, strict=True))
    if not multiplicity:  # a wrong formula, to show that the test can fail
        counts = Counter(dict.fromkeys(counts, 1))
    out = Counter()
    for (v, _), c in counts.items():
        out[v] += c
    return {(v, x): c / out[v] for (v, x), c in counts.items()}


@pytest.mark.parametrize("device", DEVICES)
def test_uniform_steps_follow_one_over_the_out_degree(device):
    graph = directed_graph(device)
    start = torch.arange(25, device=device).repeat(400)  # the nodes with out-edges
    walks = RandomWalker(graph)(start, 6, generator=seeded(device, 3))
    steps = transitions(walks.cpu())
    observed = Counter(map(tuple, steps.tolist()))
    totals = Counter(steps[:, 0].tolist())
    assert chi_square_by_group(observed, uniform_expectation(graph), totals) > P_VALUE
    # ignoring parallel edges is a detectable mistake at this sample size
    assert chi_square_by_group(observed, uniform_expectation(graph, False), totals) < 1e-6


def undirected_test_graph(device="cpu") -> Graph:
    """A small undirected graph with triangles (distance-1 candidates) and longer cycles."""
    pairs = [
        (0, 1),
        (0, 2),
        (1, 2),
        (1, 3),
        (2, 3),
        (3, 4),
        (4, 5),
        (5, 0),
        (1, 6),
        (6, 7),
        (7, 3),
        (2, 7),
        (4, 8),
        (8, 9),
        (9, 4),
        (6, 9),
    ]
    src = torch.tensor([a for a, b in pairs] + [b for a, b in pairs])
    dst = torch.tensor([b for a, b in pairs] + [a for a, b in pairs])
    return Graph.from_edges(src, dst, 10, device=device)


def node2vec_expectation(graph: Graph, p: float, q: float) -> dict:
    """P(next = x | came t -> v): 1/p if x == t, 1 if t -> x is an edge, 1/q otherwise."""
    src, dst = edge_list(graph)
    edges = set(zip(src, dst, strict=True))
    neighbours: dict[int, list[int]] = {}
    for a, b in zip(src, dst, strict=True):
        neighbours.setdefault(a, []).append(b)
    expected = {}
    for t, v in edges:
        weights = {}
        for x in neighbours.get(v, []):  # none: a sink, which ends the walk
            w = 1 / p if x == t else (1.0 if (t, x) in edges else 1 / q)
            weights[x] = weights.get(x, 0.0) + w
        total = sum(weights.values())
        expected.update({((t, v), x): w / total for x, w in weights.items()})
    return expected


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p, q", [(0.5, 2.0), (4.0, 0.25), (1.0, 3.0)])
def test_node2vec_steps_follow_the_biased_formula(device, p, q):
    graph = undirected_test_graph(device)
    start = torch.arange(graph.num_nodes, device=device).repeat(300)
    walks = RandomWalker(graph, p, q)(start, 8, generator=seeded(device, 5)).cpu()
    triples = torch.stack([walks[:, :-2], walks[:, 1:-1], walks[:, 2:]], -1).reshape(-1, 3)
    observed = Counter(((t, v), x) for t, v, x in triples.tolist())
    totals = Counter((t, v) for t, v, _ in triples.tolist())
    expected = node2vec_expectation(graph, p, q)
    assert chi_square_by_group(observed, expected, totals) > P_VALUE
    # the swapped parameters give a distribution the test tells apart
    assert chi_square_by_group(observed, node2vec_expectation(graph, q, p), totals) < 1e-6
    # the first step is uniform
    first = Counter(map(tuple, walks[:, :2].tolist()))
    assert (
        chi_square_by_group(first, uniform_expectation(graph), Counter(walks[:, 0].tolist()))
        > P_VALUE
    )


def test_node2vec_distance_one_means_an_edge_from_the_previous_node():
    """Directed graph: after 0 -> 1, node 2 is 'near' (edge 0 -> 2) and node 3 is 'away'
    even though 3 -> 0 exists; with p = q = 1 the walk would be uniform."""
    graph = Graph.from_edges(torch.tensor([0, 0, 1, 1, 3]), torch.tensor([1, 2, 2, 3, 0]))
    start = torch.zeros(20000, dtype=torch.long)
    walks = RandomWalker(graph, p=1.0, q=4.0)(start, 2, generator=seeded("cpu", 11))
    second = walks[walks[:, 1] == 1, 2]  # walks that went 0 -> 1 (about half)
    share_near = float((second == 2).double().mean())  # expected 1 / (1 + 1/4) = 0.8
    assert abs(share_near - 0.8) < 4 * (0.8 * 0.2 / second.numel()) ** 0.5


def test_unsorted_csr_rows_are_handled():
    """The neighbour test bisects sorted rows: a CSR with unsorted rows must be sorted first."""
    graph = undirected_test_graph()
    indptr, indices, edge_ids = graph.csr()
    flipped = indices.clone()
    for v in range(graph.num_nodes):  # reverse every row (tiny graph: a loop is fine here)
        flipped[indptr[v] : indptr[v + 1]] = indices[indptr[v] : indptr[v + 1]].flip(0)
    graph._csr = (indptr, flipped, edge_ids)
    start = torch.arange(graph.num_nodes).repeat(300)
    walks = RandomWalker(graph, 0.5, 2.0)(start, 8, generator=seeded("cpu", 5))
    triples = torch.stack([walks[:, :-2], walks[:, 1:-1], walks[:, 2:]], -1).reshape(-1, 3)
    observed = Counter(((t, v), x) for t, v, x in triples.tolist())
    totals = Counter((t, v) for t, v, _ in triples.tolist())
    assert chi_square_by_group(observed, node2vec_expectation(graph, 0.5, 2.0), totals) > P_VALUE


@pytest.mark.parametrize("p, q", [(1e-12, 1.0), (1.0, 1e-12), (1e12, 1e12)])
def test_biases_far_below_the_envelope_still_walk(p, q):
    """On a directed graph a step after t -> v often has no return to take (and, with
    p = q = 1e12, often no node at distance 1): every proposal's acceptance is 1e-12 or
    less, and rejection sampling alone would run for hours. After 32 proposals a walker
    draws from the step's exact distribution: the walks end, along edges."""
    graph = directed_graph()
    walks = RandomWalker(graph, p, q)(torch.arange(25).repeat(40), 12, generator=seeded("cpu"))
    steps = transitions(walks)
    src, dst = edge_list(graph)
    assert set(map(tuple, steps.tolist())) <= set(zip(src, dst, strict=True))
    assert steps.shape[0] > 25 * 40 * 2  # walks go on past their first steps


def test_steps_drawn_after_rejected_proposals_follow_the_biased_formula():
    """p = 1e-4 on a directed graph: where no return is possible (v -> t is no edge) each
    proposal is accepted with probability 2e-4 at most, so nearly every such step comes
    from the exact draw after 32 rejections. Its distribution is still node2vec's: near
    nodes weigh 1, far ones 1/q = 2 (steps where a return is possible are left out: they
    return with probability 0.999)."""
    graph = directed_graph()
    p, q = 1e-4, 0.5
    walks = RandomWalker(graph, p, q)(torch.arange(25).repeat(400), 8, generator=seeded("cpu", 9))
    src, dst = edge_list(graph)
    edges = set(zip(src, dst, strict=True))
    triples = torch.stack([walks[:, :-2], walks[:, 1:-1], walks[:, 2:]], -1).reshape(-1, 3)
    kept = [(t, v, x) for t, v, x in triples.tolist() if x != PAD and (v, t) not in edges]
    observed = Counter(((t, v), x) for t, v, x in kept)
    totals = Counter((t, v) for t, v, _ in kept)
    expected = {cell: share for cell, share in node2vec_expectation(graph, p, q).items()
                if cell[0] in totals}  # fmt: skip
    assert chi_square_by_group(observed, expected, totals) > P_VALUE
    # the proposals' own (uniform) distribution is told apart
    uniform = {((t, v), x): share for (v, x), share in uniform_expectation(graph).items()
               for t, seen in totals if seen == v}  # fmt: skip
    assert chi_square_by_group(observed, uniform, totals) < 1e-6


# ---------------------------------------------------------------------------- DGL as oracle
@pytest.mark.dgl
@pytest.mark.parametrize("p, q", [(1.0, 1.0), (0.25, 4.0)])
def test_same_distribution_as_dgl(p, q):
    """Where the walk is after 3 steps from node 0: ours and DGL's samples come from one
    distribution (chi-square test of homogeneity)."""
    dgl = pytest.importorskip("dgl", reason="needs DGL (the dgl stack)")
    graph = undirected_test_graph()
    src, dst = graph.edges()
    dgl_graph = dgl.graph((src, dst), num_nodes=graph.num_nodes)
    start = torch.zeros(20000, dtype=torch.long)
    ours = RandomWalker(graph, p, q)(start, 3, generator=seeded("cpu", 13))[:, 3]
    dgl.seed(13)
    if p == q == 1.0:
        theirs = dgl.sampling.random_walk(dgl_graph, start, length=3)[0][:, 3]
    else:
        theirs = dgl.sampling.node2vec_random_walk(dgl_graph, start, p, q, walk_length=3)[:, 3]
    table = torch.stack([torch.bincount(ours, minlength=10), torch.bincount(theirs, minlength=10)])
    table = table[:, table.sum(0) > 0]
    assert stats.chi2_contingency(table.numpy()).pvalue > P_VALUE
