"""Writing embeddings in the word2vec text format: graphemb against gensim on the same rows.

Question: does :func:`graphemb.io.write_embeddings` write an ``.emb`` file (first line
``N D``, then ``name v1 ... vD``) at least as fast as gensim's
``KeyedVectors.save_word2vec_format``, the writer of the reference DeepWalk tools, with
float32 rows that read back exactly?

The same (N, D) float32 rows (standard normal, names ``0 .. N-1``) are written by each
contender into a temporary folder, rounds interleaved (``benchmarks/harness/timing.py``);
time is the median over rounds and "vs gensim" the ratio of the medians (gensim's time /
this time) with its per-round range, so that both are measured under the same load. Each
file is read back (graphemb's reader) and compared with the rows, bit for bit. gensim is
an optional benchmark dependency (the modern stack has it); without it only graphemb is
timed.

Measurements: benchmarks/README.md ("bench_write_embeddings.py").

    .venv/modern/bin/python benchmarks/bench_write_embeddings.py            # 100k x 128
    .venv/modern/bin/python benchmarks/bench_write_embeddings.py --quick    # 5k x 32
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable

import numpy as np
from harness import cli, report, timing

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def graphemb_writer(rows: np.ndarray, names: list[str]) -> Callable[[str], None]:
    from graphemb.io import write_embeddings

    return lambda path: write_embeddings(path, rows, names)


def gensim_writer(rows: np.ndarray, names: list[str]) -> Callable[[str], None]:
    """gensim's writer of the rows, held in its ``KeyedVectors`` (built before timing)."""
    from gensim.models import KeyedVectors

    vectors = KeyedVectors(rows.shape[1])
    vectors.add_vectors(names, rows)
    return lambda path: vectors.save_word2vec_format(path, binary=False)


def main() -> None:
    parser = cli.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5k x 32, 1 round (a smoke test)")
    parser.add_argument("--json", default=None, help="also write the summary JSON here")
    args = parser.parse_args()
    cli.apply_allocator(args)
    if args.quick:
        args.rows, args.dim, args.rounds = 5_000, 32, 1
    sys.path.insert(0, REPO)
    from graphemb.io import read_embeddings

    rows = np.random.default_rng(0).standard_normal((args.rows, args.dim), dtype=np.float32)
    names = [str(i) for i in range(args.rows)]
    contenders = {"graphemb write_embeddings": graphemb_writer(rows, names)}
    skipped = {}
    if importlib.util.find_spec("gensim") is None:
        skipped["gensim save_word2vec_format"] = "gensim is not installed here"
    else:
        contenders["gensim save_word2vec_format"] = gensim_writer(rows, names)

    report.print_file_header(
        f"bench_write_embeddings: {args.rows:,} rows x {args.dim}, {args.rounds} rounds", skipped
    )
    sizes = {}
    with tempfile.TemporaryDirectory(prefix="bench_write_embeddings.") as folder:
        paths = {name: os.path.join(folder, f"{name.split()[0]}.emb") for name in contenders}
        runners = {
            name: timing.local_runner(_writing(writer, paths[name]))
            for name, writer in contenders.items()
        }
        per_round = timing.interleaved(runners, warmup=0, steps=args.rounds, rounds=args.rounds)
        for name, path in paths.items():  # the last file of each contender, untimed
            sizes[name] = os.path.getsize(path)
            back, back_names = read_embeddings(path)
            if not (np.array_equal(back.numpy(), rows) and back_names.tolist() == names):
                raise AssertionError(f"{name}: the file does not read back to the rows")
    summarize(per_round, sizes, args, skipped)


def _writing(writer: Callable[[str], None], path: str) -> Callable[[int], None]:
    """One timed step: ``writer`` writes the rows to ``path``."""
    return lambda _: writer(path)


def summarize(per_round: dict, sizes: dict, args: argparse.Namespace, skipped: dict) -> None:
    """The table (median, speed against gensim with its per-round range), the verdict and
    the ``BENCH_SUMMARY`` line."""
    reference = "gensim save_word2vec_format"
    results, rows = {}, []
    for name, times in per_round.items():
        ratio = timing.round_ratios(per_round[reference], times) if reference in per_round else None
        stats = timing.stats_ms(timing.flat(times))
        results[name] = {**stats, "speedup_vs_gensim": ratio, "file_bytes": sizes[name]}
        median_s = f"{stats['median_ms'] / 1e3:.2f}"
        rows.append([name, median_s, timing.fmt_ratio(ratio), f"{sizes[name] / 2**20:.1f}"])
    report.print_table(["contender", "median s", "vs gensim", "file MiB"], rows)
    print("(vs gensim: gensim's time / this time, ratio of medians [per-round range]; every "
          "file read back bit for bit)")  # fmt: skip
    ours = results["graphemb write_embeddings"]["speedup_vs_gensim"]
    if ours is not None:
        print(f"write_embeddings speed vs gensim: {report.verdict(ours['ratio'], 1.0)}")
    summary = {"rows": args.rows, "dim": args.dim, "results": results, "skipped": skipped}
    report.emit_summary(summary, args.json)


if __name__ == "__main__":
    main()
