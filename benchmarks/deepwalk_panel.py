"""The graphs of ``bench_deepwalk_quality.py``: named shapes and their labels.

A name is ``kind[:arg[:arg...]]``; every generator takes the seed of the run, so each seed
is a new draw of the same shape. ``PANEL`` lists the default panel: sizes from 500 to 100k
nodes, average degree from 2 to 100, a hub adjacent to 80 % of the nodes, weighted edges,
hundreds of components, binary, many-class and multi-label labels.

========================  =======================================================
name                      shape
========================  =======================================================
``cora``, ``citeseer``    Planetoid citation graphs, their classes
``overlapping[:N[:C]]``   multi-label, overlapping communities, power-law degrees
                          (:func:`graphemb.datasets.synthetic.overlapping_communities`)
``sbm:N:C:degree:intra``  stochastic block model, ``intra`` of the edges inside a class
``dense[:N[:C[:degree]]]``  block model with 30 % of edges inside (1000, 42, 32)
``hub[:N[:C[:share]]]``   block model (4000, 20, degree 10) plus node 0 joined to
                          ``share`` (0.7) of the nodes
``weighted:N:C:degree``   block model with 20 % of edges inside a class but those
                          edges 8x heavier on average (walks follow the weights)
``components:K:C``        ``K`` connected random graphs of 5 to 100 nodes; the label
                          of a node is its component's index modulo ``C``
========================  =======================================================
"""

from __future__ import annotations

import numpy as np
import torch

from graphemb.datasets.synthetic import overlapping_communities, stochastic_block_model
from graphemb.graph import Graph

#: The default panel of ``--graphs panel``.
PANEL = (
    "sbm:500:5:4:0.8",
    "sbm:20000:2:2:0.9",
    "dense",
    "sbm:2000:10:100:0.3",
    "hub:4000:20:0.8",
    "weighted:3000:15:20",
    "components:300:20",
    "overlapping",
    "cora",
    "sbm:100000:50:10:0.5",
)


def load(name: str, seed: int) -> tuple[Graph, np.ndarray]:
    """The graph ``name`` drawn with ``seed`` and its labels as a 0/1 matrix (N, C)."""
    kind, *parts = name.split(":")
    numbers = [float(p) for p in parts]
    if kind in ("cora", "citeseer"):
        from graphemb.datasets import load_planetoid

        data = load_planetoid(kind)
        graph = Graph.from_edges(data.src, data.dst, num_nodes=data.num_nodes)
        return graph, _one_hot(data.labels)
    if kind == "overlapping":
        nodes, classes = _defaults(numbers, 10_000, 40)
        data = overlapping_communities(int(nodes), int(classes), seed=seed)
        graph = Graph.from_edges(data.src, data.dst, num_nodes=data.num_nodes)
        return graph, data.labels.numpy()
    if kind in ("sbm", "dense"):
        nodes, classes, degree, intra = _defaults(numbers, 1000, 42, 32.0, 0.3)
        data = stochastic_block_model(int(nodes), int(classes), degree, intra, seed=seed)
        return Graph.from_edges(data.src, data.dst, num_nodes=int(nodes)), _one_hot(data.labels)
    if kind == "hub":
        return _hub_graph(*_defaults(numbers, 4000, 20, 0.7), seed=seed)
    if kind == "weighted":
        return _weighted_graph(*_defaults(numbers, 3000, 15, 20.0), seed=seed)
    if kind == "components":
        count, classes = _defaults(numbers, 300, 20)
        return _components_graph(int(count), int(classes), seed=seed)
    raise SystemExit(f"unknown graph {name!r} (see benchmarks/deepwalk_panel.py)")


def _defaults(given: list[float], *defaults: float) -> list[float]:
    return given + list(defaults[len(given) :])


def _one_hot(labels: torch.Tensor) -> np.ndarray:
    return np.eye(int(labels.max()) + 1, dtype=bool)[labels.numpy()]


def _hub_graph(nodes: float, classes: float, share: float, seed: int) -> tuple[Graph, np.ndarray]:
    data = stochastic_block_model(int(nodes), int(classes), 10.0, 0.7, seed=seed)
    rng = np.random.default_rng(seed)
    spokes = torch.from_numpy(rng.permutation(np.arange(1, int(nodes)))[: int(share * nodes)])
    hub = torch.zeros_like(spokes)
    src, dst = torch.cat([data.src, hub, spokes]), torch.cat([data.dst, spokes, hub])
    return Graph.from_edges(src, dst, num_nodes=int(nodes)), _one_hot(data.labels)


def _weighted_graph(
    nodes: float, classes: float, degree: float, seed: int
) -> tuple[Graph, np.ndarray]:
    """Few edges inside a class, but heavy ones: the classes show only through weights."""
    data = stochastic_block_model(int(nodes), int(classes), degree, 0.2, seed=seed)
    # One weight per undirected edge (both directions alike), from the pair's own hash.
    low, high = torch.minimum(data.src, data.dst), torch.maximum(data.src, data.dst)
    uniform = ((low * 1_000_003 + high) * 2_654_435_761 % 2**32).double() / 2**32
    inside = data.labels[data.src] == data.labels[data.dst]
    weight = torch.where(inside, 4.0 + 8.0 * uniform, 0.1 + 1.9 * uniform)
    graph = Graph.from_edges(data.src, data.dst, num_nodes=int(nodes), edge_weight=weight)
    return graph, _one_hot(data.labels)


def _components_graph(count: int, classes: int, seed: int) -> tuple[Graph, np.ndarray]:
    """``count`` components: each a ring (connected) plus random chords, 5 to 100 nodes."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 101, size=count)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    src, dst = [], []
    for start, size in zip(starts, sizes, strict=True):
        ring = np.arange(size)
        chords = rng.integers(0, size, size=(2, 2 * size))
        src += [ring + start, chords[0] + start]
        dst += [(ring + 1) % size + start, chords[1] + start]
    a, b = torch.from_numpy(np.concatenate(src)), torch.from_numpy(np.concatenate(dst))
    keep = a != b
    graph = Graph.from_edges(a[keep], b[keep], num_nodes=int(sizes.sum()), undirected=True)
    labels = torch.from_numpy(np.repeat(np.arange(count) % classes, sizes))
    return graph, _one_hot(labels)


# ---------------------------------------------------------------------------- summaries
# Pure functions of the rows that bench_deepwalk_quality.py prints (one dict per graph,
# seed and trainer: "graph", "nodes", "seed", "trainer", "seconds", "micro@<ratio>",
# "macro@<ratio>"), shared by its report and by render_readme.py.


def paired(rows: list[dict], graph: str, trainer: str) -> list[tuple[dict, dict]]:
    """(trainer's row, gensim's row) of ``graph``, one pair per seed both trained (runs
    that diverged have no scores)."""
    return [
        (row, peer)
        for row in rows
        if (row["graph"], row["trainer"]) == (graph, trainer) and not row.get("diverged")
        for peer in rows
        if peer["trainer"] == "gensim" and (peer["graph"], peer["seed"]) == (graph, row["seed"])
    ]


#: The quality target of each backend: the worst paired mean difference to gensim, points.
MARGINS = {"compiled": -0.3, "compiled-position": -0.3, "torch": -1.0}


def verdict_lines(rows: list[dict], ratios: list[float], load: float | None = None) -> list[str]:
    """Per trainer other than gensim, its targets over every graph of ``rows``: the worst
    paired mean difference to gensim (over graphs, ratios, Micro and Macro) at least its
    :data:`MARGINS` entry, and for the compiled backend the worst time ratio to gensim at
    most 1/3 on graphs of 10k nodes or more and at most 1 on smaller ones (the torch backend
    has no time target on CPU: it is the fallback). ``load``: the load average before the
    run (default: this run's, :data:`harness.report.START_LOAD`)."""
    from harness.report import verdict

    lines = []
    scored = [f"{kind}@{r}" for kind in ("micro", "macro") for r in ratios]
    for trainer in dict.fromkeys(r["trainer"] for r in rows if r["trainer"] != "gensim"):
        lines.append(divergence_line(rows, trainer, load))
    for trainer in dict.fromkeys(r["trainer"] for r in rows if r["trainer"] != "gensim"):
        worst, where, slowest = np.inf, "", 0.0
        for graph in dict.fromkeys(r["graph"] for r in rows):
            pairs = paired(rows, graph, trainer)
            if not pairs:
                continue
            for key in scored:
                gap = 100 * float(np.mean([row[key] - peer[key] for row, peer in pairs]))
                if gap < worst:
                    worst, where = gap, f"{graph} {key}"
            bound = 1 / 3 if pairs[0][0].get("nodes", 0) >= 10_000 else 1.0
            ratio = np.mean([row["seconds"] / peer["seconds"] for row, peer in pairs])
            slowest = max(slowest, float(ratio / bound))
        if where:
            margin = MARGINS.get(trainer, -0.3)
            lines.append(
                f"{trainer}: worst paired difference to gensim {worst:+.2f} points ({where}); "
                + verdict(worst, margin, unit=" points", load=load)
            )
            if trainer != "torch":
                lines.append(
                    f"{trainer}: time / gensim's, as a share of its bound (1/3 from 10k nodes, "
                    f"1 below), worst {slowest:.2f}; "
                    + verdict(slowest, 1.0, at_most=True, load=load)
                )
            lines.append(shortfall_line(rows, trainer, scored, margin))
    return lines


def divergence_line(rows: list[dict], trainer: str, load: float | None = None) -> str:
    """How many of ``trainer``'s runs stopped with ``TrainingDiverged``, per graph where
    any did; target none (default settings must train every graph of the panel)."""
    from harness.report import verdict

    mine = [r for r in rows if r["trainer"] == trainer]
    diverged = [r for r in mine if r.get("diverged")]
    graphs = {r["graph"] for r in mine}
    where = ", ".join(
        f"{g} {sum(r['graph'] == g for r in diverged)}/{sum(r['graph'] == g for r in mine)}"
        for g in dict.fromkeys(r["graph"] for r in diverged)
    )
    return (
        f"{trainer}: runs that diverged {len(diverged)} of {len(mine)} on {len(graphs)} graphs"
        + (f" ({where})" if where else "")
        + "; "
        + verdict(len(diverged), 0, at_most=True, unit=" runs", load=load)
    )


def shortfall_line(rows: list[dict], trainer: str, scored: list[str], margin: float = -0.3) -> str:
    """Which cells lie below ``margin`` points beyond the seeds' spread: a one-sided paired
    t-test per cell (graph, score) of "mean difference >= margin", p < 0.05.

    The quality verdict reads the means alone; two runs of the same algorithm put half
    their cells below zero and some below the margin by chance, so this line says which
    shortfalls the seeds support. It reports, it does not decide the target.
    """
    from scipy import stats

    below = []
    for graph in dict.fromkeys(r["graph"] for r in rows):
        pairs = paired(rows, graph, trainer)
        if len(pairs) < 2:
            continue
        for key in scored:
            gaps = [100 * (row[key] - peer[key]) for row, peer in pairs]
            if np.ptp(gaps) == 0:
                significant = gaps[0] < margin
            else:
                significant = stats.ttest_1samp(gaps, margin, alternative="less").pvalue < 0.05
            if significant:
                below.append(f"{graph} {key} {np.mean(gaps):+.2f}")
    return (
        f"{trainer}: cells below {margin:+.1f} points beyond the seeds' spread (one-sided paired "
        f"t-test, p < 0.05): " + (", ".join(below) if below else "none")
    )


def markdown_table(rows: list[dict], ratios: list[float], trainer: str) -> list[str]:
    """The panel's Markdown table: per graph, gensim's Micro-F1 (mean over seeds), the
    paired difference of ``trainer`` to gensim in points (mean +- standard error over the
    seeds; the mean alone where one seed ran), both mean times, and the number of seeds."""
    shares = " / ".join(f"{100 * r:g}" for r in ratios) + " %"
    lines = [
        f"| graph | nodes | gensim Micro-F1 {shares} | paired difference, Micro {shares} "
        f"| Macro {shares} | seconds: gensim, graphemb (x gensim) | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    for graph in dict.fromkeys(r["graph"] for r in rows):
        pairs = paired(rows, graph, trainer)
        if not pairs:
            continue
        ours, theirs = [p[0] for p in pairs], [p[1] for p in pairs]

        micro = " / ".join(f"{np.mean([r[f'micro@{q}'] for r in theirs]):.3f}" for q in ratios)
        ratio = np.mean([row["seconds"] / peer["seconds"] for row, peer in pairs])
        cells = [
            graph,
            str(ours[0]["nodes"]),
            micro,
            " / ".join(_difference(pairs, f"micro@{q}") for q in ratios),
            " / ".join(_difference(pairs, f"macro@{q}") for q in ratios),
            f"{np.mean([r['seconds'] for r in theirs]):.1f}, "
            f"{np.mean([r['seconds'] for r in ours]):.1f} ({ratio:.2f}x)",
            str(len(pairs)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _difference(pairs: list[tuple[dict, dict]], key: str) -> str:
    """Mean +- standard error over the pairs of (ours - gensim's) ``key``, in points (the
    mean alone for one pair: no spread to estimate)."""
    points = 100 * np.array([row[key] - peer[key] for row, peer in pairs])
    if len(points) == 1:
        return f"{points[0]:+.1f}"
    return f"{points.mean():+.1f} ± {points.std(ddof=1) / np.sqrt(len(points)):.1f}"
