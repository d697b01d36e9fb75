"""The rows of the "Measured here" table of ``docs/performance.md``, one function per
benchmark.

Each row function reads the results files of one benchmark in ``benchmarks/results/`` (the
``--json`` summaries) and returns the cells: what was measured (from the run's config),
graphemb's figures, the peers', the ratios, the verdict lines as the run printed them
(``"verdicts"``, with the load average before the run) and the date and load of the run
(its ``"environment"``). A missing file or key is a :class:`ResultsError` naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HEADER = (
    "| benchmark (results file) | graphemb | peers | ratio | verdict, as the run printed it "
    "| run |",
    "|---|---|---|---|---|---|",
)
SHAPES = ("powerlaw-in", "powerlaw-out", "symmetric")  # the end-to-end panel's graphs
GIB = 2**30


class ResultsError(ValueError):
    """A results file that is missing, unreadable or lacks a key a row needs."""


class Result:
    """One results file: its parsed JSON, and lookups whose errors name the file.

    Parameters
    ----------
    results : Path
        The results folder.
    name : str
        The file's name in it.
    """

    def __init__(self, results: Path, name: str) -> None:
        self.name = name
        self.path = results / name
        try:
            self.data = json.loads(self.path.read_text())
        except (OSError, ValueError) as error:
            raise ResultsError(f"{self.path}: cannot read the results ({error})") from error

    def get(self, *keys: str) -> Any:
        """The value at ``data[keys[0]][keys[1]]...``; :class:`ResultsError` naming the file
        and the key path where one is missing."""
        value = self.data
        for depth, key in enumerate(keys):
            if not isinstance(value, dict) or key not in value:
                where = " / ".join(repr(k) for k in keys[: depth + 1])
                raise ResultsError(
                    f"{self.path}: no key {where} (a row of docs/performance.md needs it)"
                )
            value = value[key]
        return value

    def run(self) -> str:
        """The date and load average of the run, from its ``"environment"``."""
        env = self.get("environment")
        date = env.get("date")
        if date is None:
            raise ResultsError(f"{self.path}: no key 'environment' / 'date'")
        start = env.get("loadavg_1min_start")
        end = env.get("loadavg_1min")
        load = f"load {start} at the start, {end} at the end" if start is not None else ""
        load = load or f"load {end} at the end"
        return f"{date}, {load}"

    def verdicts(self) -> list[str]:
        """The run's printed verdict lines (``"verdicts"``)."""
        lines = self.get("verdicts")
        if not lines:
            raise ResultsError(f"{self.path}: 'verdicts' is empty")
        return list(lines)


def cell(lines: Sequence[str]) -> str:
    """Lines in one table cell (``|`` escaped)."""
    return "<br>".join(line.replace("|", "\\|") for line in lines)


def table_row(cells: Sequence[str], run: Result | None = None) -> list[str]:
    """The markdown line of one row (a list of one line: rows are lists of lines), ending
    with the date and load of ``run`` where one is given."""
    return ["| " + " | ".join([*cells, *([run.run()] if run else [])]) + " |"]


def ms(value: float) -> str:
    """Milliseconds, to 3 significant figures or whole milliseconds."""
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def ratio(value: dict) -> str:
    """A per-round ratio summary ``{"ratio", "round_min", "round_max"}``."""
    return f"{value['ratio']:.2f}x [{value['round_min']:.2f}-{value['round_max']:.2f}]"


# The table lives in docs/performance.md: its links to the results files start from there.
RESULTS_LINK = "../benchmarks/results"


def _file(name: str) -> str:
    """A results file, named and linked to."""
    return f"[`results/{name}`]({RESULTS_LINK}/{name})"


def _over(name: str, peer: str) -> str:
    """A speed-up's label: its key, which names the peer unless it is ``peer``."""
    return name if " vs " in name or " over " in name else f"{name} over {peer}"


def end_to_end(results: Path) -> list[str]:
    """GraphSAGE with a learnable embedding end to end on the three shapes, every contender
    in a process of its own (``e2e_<shape>.json``, ``bench_end_to_end.py --graph <shape>
    --json``): per batch, per phase against DGL's documented loop, and per phase against
    its bound."""
    runs = [Result(results, f"e2e_{shape}.json") for shape in SHAPES]
    config = runs[0].get("config")
    times = runs[0].get("ms_per_batch")
    ours = [n for n in times if n.startswith("graphemb")]
    peers = [n for n in times if not n.startswith("graphemb")]
    speedups = [n for n in runs[0].get("speedups") if " over dgl" in n]

    def per_shape(*keys: str, fmt: Callable[[Any], str]) -> str:
        return " / ".join(fmt(run.get(*keys)) for run in runs)

    def median(name: str) -> str:
        return per_shape("ms_per_batch", name, fmt=lambda t: ms(t["median_ms"]))

    def phases(key: str, *names: str) -> list[str]:
        return [
            f"{phase}: {per_shape('phases', key, *names, phase, fmt=ms)} ms" for phase in PHASES
        ]

    allocator = runs[0].get("allocator")
    what = (
        f"GraphSAGE + {config['dim']}-d learnable embedding end to end, "
        f"{config['num_nodes']:,} nodes, average degree {config['avg_degree']:g}, fanouts "
        f"{','.join(map(str, config['fanouts']))}, {config['batch_size']} seeds, shapes "
        f"{' / '.join(SHAPES)}; every contender in a fresh process of its own, "
        f"THP_MEM_ALLOC_ENABLE={allocator['THP_MEM_ALLOC_ENABLE']} for all "
        f"(`bench_end_to_end.py --graph G`; " + ", ".join(_file(r.name) for r in runs) + ")"
    )
    documented = next(n for n in peers if "documented" in n)
    ratios = [f"{_over(n, documented)}: {per_shape('speedups', n, fmt=ratio)}" for n in speedups]
    ratios += [
        f"{phase} over DGL's: {per_shape('phases', f'{phase}_over_dgl', fmt=times_x)}"
        for phase in ("layers", "sampling")
    ]
    ratios += [
        f"{phase} / its bound: {per_shape('phases', f'{phase}_over_bound', fmt=times_x)}"
        for phase in PHASES
    ]
    cells = [
        what,
        cell([f"{n}: {median(n)} ms/batch" for n in ours] + phases("graphemb_ms")),
        cell(
            [f"{n}: {median(n)} ms/batch" for n in peers]
            + [f"{documented}, {line}" for line in phases("peers_ms", documented)]
            + [f"bound, {line}" for line in phases("bounds_ms")]
        ),
        cell(ratios),
        cell(
            [f"{s}: {line}" for s, run in zip(SHAPES, runs, strict=True) for line in run.verdicts()]
        ),
        cell([f"{s}: {run.run()}" for s, run in zip(SHAPES, runs, strict=True)]),
    ]
    return table_row(cells)


PHASES = ("sampling", "layers", "sparse step")  # the end-to-end phases with a bound


def times_x(value: float) -> str:
    """A ratio, ``2.00x``."""
    return f"{value:.2f}x"


def sampler(results: Path, name: str = "sampler_panel.json") -> list[str]:
    """The neighbour sampler against DGL and GraphBolt on the panel's shapes
    (``bench_sampler.py --panel [--busy N] --json``)."""
    run = Result(results, name)
    config = run.get("config")
    shapes = run.get("shapes")
    graphs = " / ".join(s["graph"] for s in shapes)
    busy = f", `--busy {config['busy']}` (a loaded run)" if config.get("busy") else ", quiet"

    def medians(contender: str) -> str:
        return " / ".join(ms(s["results"][contender]["median_ms"]) for s in shapes)

    peers = [n for n in shapes[0]["results"] if not n.startswith("graphemb")]
    what = (
        f"neighbour sampler ({run.get('sampler')}), fanouts "
        f"{','.join(map(str, config['fanouts']))}, {config['batch_size']} seeds, "
        f"{config['num_nodes']:,} nodes / {shapes[0]['edges']:,} edges, shapes {graphs}"
        f"{busy} (`bench_sampler.py --panel`; {_file(name)})"
    )
    cells = [
        what,
        f"{medians('graphemb blocks')} ms",
        cell([f"{n}: {medians(n)} ms" for n in peers]),
        _over_faster(shapes),
        cell([f"{s['graph']}: {s['verdict']}" for s in shapes]),
    ]
    return table_row(cells, run)


def _over_faster(shapes: list[dict]) -> str:
    """The speed-ups over each shape's faster peer, the peer named once if it is the same."""
    faster = {s["faster_peer"] for s in shapes}
    if len(faster) == 1:
        return f"over {faster.pop()}: " + " / ".join(
            ratio(s["ratios"][s["faster_peer"]]) for s in shapes
        )
    return " / ".join(f"{ratio(s['ratios'][s['faster_peer']])} {s['faster_peer']}" for s in shapes)


def walks(results: Path, name: str = "walks_panel.json") -> list[str]:
    """Random walks, DeepWalk's and node2vec's, against DGL's (``bench_walks.py --json``)."""
    run = Result(results, name)
    config, graphs = run.get("config"), run.get("graphs")

    def medians(contender: str) -> str:
        return " / ".join(ms(g["results"][contender]["median_ms"]) for g in graphs)

    what = (
        f"random walks, {config['walkers']:,} walkers x {config['length']} steps a call, "
        f"node2vec p {config['p']:g} q {config['q']:g}, {config['num_nodes']:,} nodes, graphs "
        f"{' / '.join(g['graph'] for g in graphs)} (`bench_walks.py`; {_file(name)})"
    )
    peers = [n for n in graphs[0]["results"] if not n.startswith("graphemb ")]
    cells = [
        what,
        cell([f"{kind}: {medians('graphemb ' + kind)} ms" for kind in ("deepwalk", "node2vec")]),
        cell([f"{n}: {medians(n)} ms" for n in peers]),
        cell([f"over {n}: " + " / ".join(ratio(g["ratios"][n]) for g in graphs) for n in peers]),
        "no target",
    ]
    return table_row(cells, run)


def deepwalk_quality(results: Path) -> list[str]:
    """The DeepWalk panel against gensim (``deepwalk_panel.json``); its verdict lines are
    those the benchmark prints, from the stored rows and the load before the run."""
    from deepwalk_panel import paired, verdict_lines

    run = Result(results, "deepwalk_panel.json")
    rows, ratios = run.get("rows"), run.get("ratios")
    trainer = next(r["trainer"] for r in rows if r["trainer"] != "gensim")
    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    pairs = {g: paired(rows, g, trainer) for g in graphs}
    nodes = [p[0][0]["nodes"] for p in pairs.values() if p]
    ours = [sum(r["seconds"] for r, _ in p) / len(p) for p in pairs.values() if p]
    gensim = [sum(g["seconds"] for _, g in p) / len(p) for p in pairs.values() if p]
    x = [sum(r["seconds"] / g["seconds"] for r, g in p) / len(p) for p in pairs.values() if p]
    cells = [
        f"DeepWalk quality and time, {trainer} trainer, {len(nodes)} graphs of {min(nodes):,} to "
        f"{max(nodes):,} nodes, F1 of frozen embeddings at {', '.join(f'{q:g}' for q in ratios)}"
        f" of the labels (`bench_deepwalk_quality.py`; {_file(run.name)},"
        " [the panel](#deepwalk-and-node2vec))",
        f"{min(ours):.1f}-{max(ours):.1f} s per graph",
        f"gensim `Word2Vec` on the same walks: {min(gensim):.1f}-{max(gensim):.1f} s",
        f"{min(x):.2f}-{max(x):.2f}x gensim's time",
        cell(verdict_lines(rows, ratios, load=run.get("load_before"))),
        f"date not recorded in the file, load {run.get('load_before')} before the run",
    ]
    return table_row(cells)


def deepwalk_memory(results: Path) -> list[str]:
    """Peak memory of ``python -m graphemb deepwalk`` on a large graph
    (``deepwalk_memory.json``, ``bench_deepwalk_memory.py --json``)."""
    run = Result(results, "deepwalk_memory.json")
    graph, tables = run.get("graph_bytes"), run.get("tables_bytes")
    cells = [
        f"`python -m graphemb deepwalk` on a {run.get('nodes'):,}-node / {run.get('edges'):,}-edge"
        f" edge list, peak resident memory (`bench_deepwalk_memory.py`; {_file(run.name)})",
        f"peak {run.get('peak_bytes') / GIB:.2f} GiB, {run.get('seconds'):.0f} s",
        f"bound: the graph {graph / GIB:.2f} GiB + its two tables {tables / GIB:.2f} GiB = "
        f"{run.get('bound_bytes') / GIB:.2f} GiB",
        f"{run.get('peak_bytes') / run.get('bound_bytes'):.2f} of the bound",
        run.get("verdict"),
    ]
    return table_row(cells, run)


def _sparse_contenders(run: Result, optimizer: str) -> tuple[str, dict, dict]:
    """graphemb's name and entry in ``sparse_step.json`` for ``optimizer`` (adam,
    adagrad, rowwise_adagrad), and its peers' entries (name -> entry)."""
    entries = {n: r for n, r in run.get("results").items() if r.get("optimizer") == optimizer}
    ours = [n for n, r in entries.items() if r.get("family") == "graphemb"]
    if not ours:
        raise ResultsError(f"{run.path}: no graphemb contender with optimizer {optimizer!r}")
    return ours[0], entries[ours[0]], {n: r for n, r in entries.items() if n != ours[0]}


def _sparse_what(run: Result, title: str) -> str:
    config = run.get("config")
    return (
        f"{title}, N = {config['num_embeddings']:,}, D = {config['dim']}, "
        f"{config['batch']:,} ids ({run.get('unique_rows', 'measured_mean'):,.0f} unique), "
        f"each contender in a process of its own, {config['threads']} threads, "
        f"{config['steps']} steps in "
        f"{config['rounds']} interleaved rounds (`bench_sparse_step.py`; {_file(run.name)})"
    )


def sparse_step(results: Path, optimizer: str = "adam") -> list[str]:
    """One sparse training step (lookup + backward + update) against torch, DGL and FBGEMM
    with the same optimizer (``sparse_step.json``, ``bench_sparse_step.py --json``)."""
    run = Result(results, "sparse_step.json")
    name, ours, peers = _sparse_contenders(run, optimizer)
    family = name.split(" ", 1)[1]
    vs = [
        (peer, f"speedup_vs_{peer.lower()}_same_optimizer") for peer in ("torch", "DGL", "FBGEMM")
    ]
    lines = [line for line in run.get("verdicts") if line.startswith(f"{name} ")]
    cells = [
        _sparse_what(run, f"{family} step (lookup + backward + update)"),
        f"{ms(ours['median_ms'])} ms/step (p10-p90 {ms(ours['p10_ms'])}-{ms(ours['p90_ms'])})",
        cell([f"{n}: {ms(r['median_ms'])} ms" for n, r in peers.items()]),
        cell([f"{ratio(ours[key])} {peer}" for peer, key in vs if ours.get(key)]),
        cell(lines) if lines else "no target",
    ]
    return table_row(cells, run)


def bandwidth_bound(results: Path) -> list[str]:
    """The optimizer updates against their memory-bandwidth bound (``sparse_step.json``):
    the bytes an update must move over the copy bandwidth measured in the same run."""
    run = Result(results, "sparse_step.json")
    bounds = run.get("bound_ms")
    steps = {opt: _sparse_contenders(run, opt)[1] for opt in bounds}
    copy = run.get("bandwidth", "bytes_per_s") / 1e9
    cells = [
        _sparse_what(
            run,
            "the step against the memory-bandwidth bound (Adam moves 28 x D bytes "
            "per unique row, Adagrad 20 x D, row-wise Adagrad 12 x D)",
        ),
        " / ".join(f"{opt} {ms(r['median_ms'])} ms" for opt, r in steps.items()),
        f"bound at the copy bandwidth of the run, {copy:.1f} GB/s: "
        + " / ".join(f"{opt} {ms(b)} ms" for opt, b in bounds.items()),
        " / ".join(f"{100 * r['fraction_of_bound']:.0f}%" for r in steps.values())
        + " of the bound: the update's bytes move at "
        + " / ".join(f"{r['fraction_of_bound'] * copy:.1f}" for r in steps.values())
        + f" GB/s, rows scattered over the tables, against the copy's {copy:.1f} GB/s",
        "no target",
    ]
    return table_row(cells, run)


def multiprocess(results: Path) -> list[str]:
    """Shared-memory ranks against one process on both cores, and DGL's multi-process mode
    (``multiprocess.json``, ``bench_multiprocess.py --json``)."""
    run = Result(results, "multiprocess.json")
    config = run.get("config")
    times = run.get("results")
    ours = [n for n in times if n.startswith("graphemb")]
    peers = [n for n in times if not n.startswith("graphemb")]
    vs_dgl = run.get("ratio_graphemb_vs_dgl_multi")
    cells = [
        _ranks_what(
            run,
            f"shared-memory table, {config['world_size']} processes x "
            f"{config['threads_per_rank']} thread against 1 process x "
            f"{config['threads_single']} threads",
        ),
        cell([f"{n}: {ms(times[n]['median_ms'])} ms/step" for n in ours]),
        cell([f"{n}: {ms(times[n]['median_ms'])} ms/step" for n in peers]),
        cell(
            [f"{ratio(run.get('ratio_multi_vs_single'))} the throughput of 1 process"]
            + ([f"{ratio(vs_dgl)} DGL's, multi-process"] if vs_dgl else [])
        ),
        cell(run.verdicts()),
    ]
    return table_row(cells, run)


def table_init(results: Path) -> list[str]:
    """Creating and initialising a large table (``table_init.json``,
    ``bench_table_init.py --json``), projected to the target's 50M x 64 bfloat16."""
    run = Result(results, "table_init.json")
    rows, columns = run.get("shape")
    times = run.get("results")
    ours = run.get("results", "graphemb")
    peers = [n for n in times if n != "graphemb"]
    cells = [
        f"creating a {rows:,} x {columns} {run.get('dtype')} table ({run.get('table_gb')} GB) "
        f"with `init_func=uniform_by_id(...)` (chunks in parallel), {run.get('threads')} "
        f"threads, {run.get('rounds')} rounds; the target is for 50M x 64 bfloat16, projected "
        f"at the measured rate (`bench_table_init.py -n {rows}`; {_file(run.name)})",
        f"{ours['median_s']:.2f} s, {ours['gb_per_s']:.2f} GB/s; projected to 50M x 64: "
        f"{run.get('projected_s_for_50M_x_64_bf16'):.1f} s",
        cell([f"{n}: {times[n]['median_s']:.2f} s" for n in peers]),
        f"time {ours['over_torch']:.2f}x torch's, {ours['over_bound']:.2f}x the bound's",
        cell(run.verdicts()),
    ]
    return table_row(cells, run)


def read_graph(results: Path) -> list[str]:
    """Reading an edge list into an undirected graph against ``pandas.read_csv``
    (``read_graph.json``, ``bench_read_graph.py --json``)."""
    run = Result(results, "read_graph.json")
    times = run.get("results")
    ours = run.get("results", "graphemb read_graph")
    peers = [n for n in times if n.startswith("pandas")]
    others = [n for n in times if n not in peers and n != "graphemb read_graph"]

    def seconds(name: str) -> str:
        r = times[name]
        return f"{name}: {r['median_s']:.2f} s, peak {r['peak_over_arrays']:.2f}x its arrays"

    cells = [
        f"`read_graph`, a {run.get('nodes'):,}-node / {run.get('edges'):,}-edge edge list "
        f"({run.get('file_bytes') / 2**20:.0f} MiB) into an undirected CSC graph, each reader in "
        f"a fresh process (`bench_read_graph.py`; {_file(run.name)})",
        cell([seconds("graphemb read_graph"), *(seconds(n) for n in others)]),
        cell([seconds(n) for n in peers]),
        f"{ours['speedup_vs_pandas']:.2f}x the speed of pandas (`sep=' '`)",
        cell(run.verdicts()),
    ]
    return table_row(cells, run)


def _ranks_what(run: Result, title: str) -> str:
    config = run.get("config")
    facts = [
        title,
        f"Sparse{config['optimizer'].capitalize()}",
        f"N = {config['num_embeddings']:,}",
        f"D = {config['dim']}",
        f"{config['batch_total']:,} ids per step in total",
    ]
    return ", ".join(facts) + f" (`bench_{run.get('bench')}.py`; {_file(run.name)})"


def partitioned(results: Path) -> list[str]:
    """A partitioned table on gloo ranks of one machine against shared memory and one
    process (``partitioned.json``, ``bench_partitioned.py --json``; its CPU part)."""
    run = Result(results, "partitioned.json")
    config = run.get("config")
    times = run.get("cpu", "results")
    ours, *others = list(times)
    cells = [
        _ranks_what(
            run,
            f"partitioned table, {config['world_size']} gloo ranks x "
            f"{config['threads_per_rank']} thread on one machine (rows pulled from and "
            "pushed to their owner ranks)",
        ),
        f"{ours}: {ms(times[ours]['median_ms'])} ms/step",
        cell([f"{n}: {ms(times[n]['median_ms'])} ms/step" for n in others]),
        cell(
            [
                f"{ratio(run.get('cpu', 'partitioned_vs_shared'))} the throughput of shared memory",
                f"{ratio(run.get('cpu', 'partitioned_vs_single'))} that of 1 process",
            ]
        ),
        "no target",
    ]
    return table_row(cells, run)


ROWS: tuple[Callable[[Path], list[str]], ...] = (
    sparse_step,
    lambda results: sparse_step(results, "adagrad"),
    lambda results: sparse_step(results, "rowwise_adagrad"),
    bandwidth_bound,
    multiprocess,
    partitioned,
    end_to_end,
    sampler,
    lambda results: sampler(results, "sampler_panel_busy.json"),
    walks,
    table_init,
    read_graph,
    deepwalk_quality,
    deepwalk_memory,
)
"""The table's rows, in order: each a function of the results folder."""


def measured(results: Path) -> list[str]:
    """The whole table: :data:`HEADER` and every row of :data:`ROWS`."""
    return [*HEADER, *(line for row in ROWS for line in row(results))]
