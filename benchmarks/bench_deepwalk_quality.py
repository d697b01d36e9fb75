"""DeepWalk quality against gensim: Micro/Macro-F1 against wall time, on the same walks setup.

For each graph (Cora's graph, labels = its 7 classes; CiteSeer's, 6 classes; a generated
multi-label graph with overlapping communities, power-law degrees and rare labels, see
:func:`graphemb.datasets.synthetic.overlapping_communities`; ``dense``, a small dense block
model, and ``hub``, a block model with one node joined to 70 % of the nodes -- shapes
that batched trainers under-train):

* **gensim** ``Word2Vec(sg=1, negative=K, hs=0, window, sample, min_count=0, epochs=1)``
  with ``--threads`` workers, fed walks drawn by ``graphemb.sampling.walks.RandomWalker``
  (``--num-walks`` per node, ``--walk-length`` nodes); time = walks + string conversion +
  training.
* **compiled** and **torch**: :func:`graphemb.skipgram.train_node_embeddings` on each
  backend (word2vec's algorithm in C++ threads; the same updates in batched torch rounds),
  ``--threads`` threads, with the same walk counts, window, negatives and sample and the
  library's defaults (lr 0.025); time = walks + training.

Every run of every trainer is a fresh process of its own (:mod:`deepwalk_trainers`), as
its users run it: no other trainer's imports, threads or heap beside it, the run's
allocator settings for all. This process draws the labels and scores the rows.

Scores: one-vs-rest logistic regression on ``ratio`` of the nodes, top-k prediction
from ``predict_proba`` with k the true label count (the DeepWalk protocol), Micro- and
Macro-F1 on the rest, mean over ``--repeats`` splits. The scorer is written here, apart
from the library's, so that both trainers are judged by the same independent code.

Prints a row per graph, seed and trainer, ratios "graphemb / gensim" of seconds (same
graph and seed), then with several ``--seeds`` the mean of each trainer over them and the
paired difference to gensim (same graph and seed) with its standard error over the seeds:
one seed's F1 moves by a point or more (271 test nodes at 90 % labels on Cora), so a
difference smaller than about twice its standard error is not one; and
writes a plot of F1 against seconds to ``benchmarks/results/deepwalk_quality.png``. With
``--time-repeats R`` every trainer runs R rounds per seed, in turn, and a row's seconds are
its fastest round's (its scores the first round's): this machine's speed changes 2-4x from
one minute to the next, and one round per seed lets a disturbed minute decide a ratio. Skips
gensim, with the reason, when it is not installed (``pip install graphemb[bench]``).

    python benchmarks/bench_deepwalk_quality.py                      # both graphs
    python benchmarks/bench_deepwalk_quality.py --graphs overlapping --num-walks 80
    python benchmarks/bench_deepwalk_quality.py --quick              # seconds
    python benchmarks/bench_deepwalk_quality.py --rows-from saved_output.txt   # re-plot
    python benchmarks/bench_deepwalk_quality.py --graphs panel --json out.json   # rows to a file
    python benchmarks/bench_deepwalk_quality.py --graphs overlapping --time-repeats 2
    python benchmarks/render_readme.py   # READMEs from results/deepwalk_panel.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
from deepwalk_panel import PANEL, load, paired, verdict_lines
from deepwalk_trainers import GRAPHEMB_TRAINERS, TRAINERS, train_in_fresh_process
from harness import cli
from harness.report import wait_until_quiet

RESULTS = Path(__file__).resolve().parent / "results"


def f1_scores(
    embeddings: np.ndarray, labels: np.ndarray, ratio: float, repeats: int, seed: int
) -> tuple[float, float]:
    """Mean (Micro-F1, Macro-F1): one-vs-rest logistic regression, top-k of predict_proba."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.multiclass import OneVsRestClassifier

    rng = np.random.default_rng(seed)
    micro, macro = [], []
    num_nodes = labels.shape[0]
    for _ in range(repeats):
        order = rng.permutation(num_nodes)
        cut = int(round(ratio * num_nodes))
        train, test = order[:cut], order[cut:]
        classifier = OneVsRestClassifier(LogisticRegression(max_iter=1000), n_jobs=1)
        present = labels[train].any(0)
        classifier.fit(embeddings[train], labels[train][:, present].astype(int))
        proba = np.zeros((test.size, labels.shape[1]))
        # Labels absent from the training split are never predicted (probability 0).
        proba[:, present] = classifier.predict_proba(embeddings[test])
        k = labels[test].sum(1)
        ranked = np.argsort(-proba, axis=1, kind="stable")
        predicted = np.zeros_like(labels[test])
        for count in np.unique(k):
            rows = np.nonzero(k == count)[0]
            predicted[rows[:, None], ranked[rows, :count]] = True
        micro.append(f1_score(labels[test], predicted, average="micro", zero_division=0))
        macro.append(f1_score(labels[test], predicted, average="macro", zero_division=0))
    return float(np.mean(micro)), float(np.mean(macro))


def build_parser() -> argparse.ArgumentParser:
    """The command line: graphs, trainers, the walks and model, scoring, outputs."""
    parser = cli.parser(__doc__.split("\n")[0])
    parser.add_argument(
        "--graphs",
        default="cora,overlapping",
        help="comma-separated names of benchmarks/deepwalk_panel.py (cora, citeseer, "
        "overlapping[:N[:C]], sbm:N:C:degree:intra, dense, hub[:N[:C[:share]]], "
        "weighted:N:C:degree, components:K:C), or panel: all of its PANEL",
    )
    parser.add_argument(
        "--trainers",
        default="gensim,compiled",
        help="gensim; graphemb's backends, --threads threads each: torch, compiled and its "
        "variants (benchmarks/skipgram_variants.py): "
        + ", ".join(name for name in GRAPHEMB_TRAINERS if name.startswith("compiled-")),
    )
    parser.add_argument("--num-walks", type=int, default=10)
    parser.add_argument("--walk-length", type=int, default=40)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--dimensions", type=int, default=128)
    parser.add_argument("--negatives", type=int, default=5)
    parser.add_argument("--sample", type=float, default=1e-3)
    parser.add_argument(
        "--threads", type=int, default=2, help="gensim's and graphemb's training threads"
    )
    parser.add_argument("--ratios", default="0.1,0.5,0.9")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", default="0")
    parser.add_argument(
        "--time-repeats",
        type=int,
        default=1,
        help="rounds of every trainer per seed, in turn; a row's seconds are the fastest "
        "round's (this machine's speed changes between minutes: the fastest round is the "
        "one its neighbours disturbed least), its scores the first round's",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=180.0,
        help="seconds to wait at most, before the first trainer, for the load average to "
        "fall below 1 (180; the verdicts read the load then)",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plot", default=str(RESULTS / "deepwalk_quality.png"))
    parser.add_argument(
        "--rows-from",
        metavar="OUTPUT",
        help="tables and plot of the JSON rows a previous run printed (its saved output) or "
        "wrote with --json (then its verdicts read that run's load average), without training",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the rows, the command and the load average before the run to PATH "
        "(e.g. benchmarks/results/deepwalk_panel.json, which render_readme.py reads)",
    )
    return parser


def main() -> None:
    args = build_parser().parse_args()
    cli.apply_allocator(args)
    if args.rows_from:
        rows, load_before = saved_rows(args.rows_from)
        report(rows, [float(r) for r in args.ratios.split(",")], args.plot, load_before)
        return
    if args.quick:
        args.graphs, args.num_walks, args.walk_length, args.repeats, args.settle = (
            "overlapping:2000:10",
            2,
            20,
            1,
            0.0,
        )
    trainers = available(cli.chosen(args.trainers, TRAINERS, "trainers"))
    load_before = wait_until_quiet(args.settle)
    print(f"# load average before the first trainer: {load_before:.2f}", flush=True)
    ratios = [float(r) for r in args.ratios.split(",")]
    rows = []
    names = args.graphs.replace("panel", ",".join(PANEL)).split(",")
    for graph_name in names:
        for seed in (int(s) for s in args.seeds.split(",")):
            _, labels = load(graph_name, seed)
            for trainer, (table, seconds) in run_trainers(trainers, graph_name, args, seed).items():
                row = {
                    "graph": graph_name,
                    "nodes": labels.shape[0],
                    "seed": seed,
                    "trainer": trainer,
                    "seconds": min(seconds),
                    "seconds_runs": seconds,
                }
                if table is None:  # TrainingDiverged: no rows to score
                    row["diverged"] = True
                else:
                    scores = [f1_scores(table, labels, r, args.repeats, seed) for r in ratios]
                    row |= {f"micro@{r}": s[0] for r, s in zip(ratios, scores, strict=True)}
                    row |= {f"macro@{r}": s[1] for r, s in zip(ratios, scores, strict=True)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    report(rows, ratios, None if args.quick else args.plot, load_before)
    if args.json:
        write_json(args.json, rows, ratios, load_before)


def available(trainers: list[str]) -> list[str]:
    """``trainers`` less gensim where it is not installed (said once, with the fix)."""
    if "gensim" in trainers and importlib.util.find_spec("gensim") is None:
        print("gensim skipped: not installed; pip install 'graphemb[bench]'", flush=True)
        return [t for t in trainers if t != "gensim"]
    return trainers


def run_trainers(
    trainers: list[str], graph: str, args: argparse.Namespace, seed: int
) -> dict[str, tuple[np.ndarray | None, list[float]]]:
    """Every trainer on ``graph``, each run in a fresh process of its own
    (:func:`deepwalk_trainers.train_in_fresh_process`), ``--time-repeats`` rounds in turn
    (gensim, compiled, gensim, compiled, ...): per trainer, the first round's table (the one
    scored; None where it diverged) and every round's seconds."""
    results: dict[str, tuple[np.ndarray | None, list[float]]] = {}
    for _ in range(args.time_repeats):
        for trainer in trainers:
            trained = train_in_fresh_process(trainer, graph, seed, args)
            results.setdefault(trainer, (trained.rows, []))[1].append(trained.seconds)
    return results


def write_json(path: str, rows: list[dict], ratios: list[float], load_before: float) -> None:
    """The run's rows with what a reader needs to redo its tables and verdicts (the
    command without its output paths, ``--json`` and ``--plot``)."""
    kept, skip = [], False
    for arg in sys.argv[1:]:
        if not skip and arg.split("=")[0] not in ("--json", "--plot"):
            kept.append(arg)
        skip = arg in ("--json", "--plot")
    command = "benchmarks/bench_deepwalk_quality.py " + " ".join(kept)
    record = {"command": command.strip(), "load_before": round(load_before, 2), "ratios": ratios}
    with open(path, "w") as f:
        json.dump({**record, "rows": rows}, f, indent=1)
        f.write("\n")


def saved_rows(path: str) -> tuple[list[dict], float | None]:
    """The rows of a saved output (one JSON row a line) or of a --json file, and the load
    average before that run where the file has it."""
    with open(path) as f:
        text = f.read()
    if text.lstrip().startswith("{\n") or path.endswith(".json"):
        run = json.loads(text)
        return run["rows"], run.get("load_before")
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")], None


def report(
    rows: list[dict],
    ratios: list[float],
    plot_path: str | None,
    load_before: float | None = None,
) -> None:
    """The tables of ``rows`` (per seed; with several seeds, the means and the paired
    differences to gensim), the verdicts and the plot; runs that diverged count in the
    verdicts only."""
    trained = [r for r in rows if not r.get("diverged")]
    print_table(trained, ratios)
    if len({r["seed"] for r in trained}) > 1:
        print_table(mean_rows(trained), ratios)
        print_paired_differences(trained, ratios)
    for line in verdict_lines(rows, ratios, load_before):
        print(line)
    if plot_path:
        plot(trained, ratios, Path(plot_path))


def mean_rows(rows: list[dict]) -> list[dict]:
    """One row per (graph, trainer): the mean over seeds of every score and of seconds."""
    means = []
    for key in dict.fromkeys((r["graph"], r["trainer"]) for r in rows):
        mine = [r for r in rows if (r["graph"], r["trainer"]) == key]
        scored = ["seconds"] + [k for k in mine[0] if k.startswith(("micro@", "macro@"))]
        mean = {k: float(np.mean([r[k] for r in mine])) for k in scored}
        means.append({**mean, "graph": key[0], "trainer": key[1], "seed": f"mean of {len(mine)}"})
    return means


def print_paired_differences(rows: list[dict], ratios: list[float]) -> None:
    """Per graph and trainer: the mean over seeds of (trainer - gensim) on the same graph and
    seed, with its standard error: how far apart the two are against the noise of the seeds
    (walks, negatives and label splits all change with the seed)."""
    scored = [f"micro@{r}" for r in ratios] + [f"macro@{r}" for r in ratios]
    print("paired difference to gensim, mean over seeds +- standard error (points of F1)")
    print(
        " | ".join(
            ["graph", "trainer", "seeds"]
            + [f"Mi@{r:g}" for r in ratios]
            + [f"Ma@{r:g}" for r in ratios]
        )
    )
    for graph, trainer in dict.fromkeys((r["graph"], r["trainer"]) for r in rows):
        if trainer == "gensim":
            continue
        pairs = paired(rows, graph, trainer)
        if len(pairs) < 2:
            continue
        cells = [graph, trainer, str(len(pairs))]
        for key in scored:
            difference = 100 * np.array([row[key] - peer[key] for row, peer in pairs])
            error = difference.std(ddof=1) / np.sqrt(len(difference))
            cells.append(f"{difference.mean():+.2f} +- {error:.2f}")
        print(" | ".join(cells))


def print_table(rows: list[dict], ratios: list[float]) -> None:
    header = ["graph", "seed", "trainer"] + [f"Mi@{r:g}" for r in ratios]
    header += [f"Ma@{r:g}" for r in ratios] + ["seconds", "x gensim"]
    print(" | ".join(header))
    for row in rows:
        peer = next(
            (
                r
                for r in rows
                if r["trainer"] == "gensim"
                and (r["graph"], r["seed"]) == (row["graph"], row["seed"])
            ),
            None,
        )
        ratio = f"{row['seconds'] / peer['seconds']:.2f}" if peer else "-"
        cells = [row["graph"], str(row["seed"]), row["trainer"]]
        cells += [f"{row[f'micro@{r}']:.3f}" for r in ratios]
        cells += [f"{row[f'macro@{r}']:.3f}" for r in ratios]
        cells += [f"{row['seconds']:.1f}", ratio]
        print(" | ".join(cells))


def plot(rows: list[dict], ratios: list[float], path: Path) -> None:
    """Per graph, Micro-F1 (top) and Macro-F1 (bottom) against seconds: every seed as a faint
    point, each trainer's mean over seeds with its standard error, one marker per label
    ratio."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    trainers = list(dict.fromkeys(r["trainer"] for r in rows))
    colors = {t: f"C{i}" for i, t in enumerate(trainers)}
    names = {t: t if t == "gensim" else f"graphemb {t}" for t in trainers}
    markers = dict(zip(ratios, "os^Dv<>", strict=False))
    figure, axes = plt.subplots(
        2, len(graphs), figsize=(4.5 * len(graphs), 7), squeeze=False, sharex="col"
    )
    for column, graph in enumerate(graphs):
        for line, metric in enumerate(("micro", "macro")):
            axis = axes[line][column]
            for trainer in trainers:
                mine = [r for r in rows if (r["graph"], r["trainer"]) == (graph, trainer)]
                if not mine:  # a trainer that ran on other graphs only
                    continue
                seconds = np.array([r["seconds"] for r in mine])
                for ratio in ratios:
                    scores = np.array([r[f"{metric}@{ratio}"] for r in mine])
                    error = scores.std(ddof=1) / np.sqrt(len(scores)) if len(scores) > 1 else 0
                    axis.scatter(
                        seconds,
                        scores,
                        color=colors[trainer],
                        alpha=0.2,
                        s=12,
                        marker=markers.get(ratio, "o"),
                    )
                    axis.errorbar(
                        seconds.mean(),
                        scores.mean(),
                        yerr=error,
                        color=colors[trainer],
                        marker=markers.get(ratio, "o"),
                        capsize=3,
                        label=f"{names[trainer]}, {ratio:.0%} labels",
                    )
            axis.set_xlim(left=0)
            axis.set_title(f"{graph}: {metric.capitalize()}-F1")
            axis.set_ylabel(f"{metric.capitalize()}-F1")
            if line == 1:
                axis.set_xlabel("seconds (walks + training)")
            axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
