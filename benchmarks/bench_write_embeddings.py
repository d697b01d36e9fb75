"""Writing embeddings in the word2vec text format: graphemb against gensim on the same rows.

Question: does :func:`graphemb.io.write_embeddings` write an ``.emb`` file (first line
``N D``, then ``name v1 ... vD``) at least as fast as gensim's
``KeyedVectors.save_word2vec_format``, the writer of the reference DeepWalk tools, with
float32 rows that read back exactly?

The same (N, D) float32 rows (standard normal, names ``0 .. N-1``) are written by each
contender into a temporary folder, rounds interleaved; time is the median over rounds and
"vs gensim" the median of per-round ratios (gensim's time / this time), so that both are
measured under the same load. Each file is read back (graphemb's reader) and compared with
the rows, bit for bit. gensim is an optional benchmark dependency (the modern stack has
it); without it only graphemb is timed.

Measured here (modern stack, 100k x 128 float32, 3 rounds, 2 cores shared at load 2-3.7):
graphemb 0.55 s, gensim 4.55 s: **8.2x** gensim's speed; files of 196 MiB against gensim's
134 MiB (16 bytes a value, against gensim's shortest repr). The previous writer (one
Python ``%.9g`` per value, 149 MiB) took 2.6 s on the same rows just before and after.

    .venv/modern/bin/python benchmarks/bench_write_embeddings.py            # 100k x 128
    .venv/modern/bin/python benchmarks/bench_write_embeddings.py --quick    # 5k x 32
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
from harness import report, timing

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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5k x 32, 1 round (a smoke test)")
    args = parser.parse_args()
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
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    sizes = {}
    with tempfile.TemporaryDirectory(prefix="bench_write_embeddings.") as folder:
        for round_ in range(args.rounds):
            order = list(contenders) if round_ % 2 == 0 else list(contenders)[::-1]
            for name in order:
                path = os.path.join(folder, f"{name.split()[0]}.emb")
                start = time.perf_counter()
                contenders[name](path)
                seconds[name].append(time.perf_counter() - start)
                sizes[name] = os.path.getsize(path)
                back, back_names = read_embeddings(path)
                if not (np.array_equal(back.numpy(), rows) and back_names.tolist() == names):
                    raise AssertionError(f"{name}: the file does not read back to the rows")
    reference = "gensim save_word2vec_format" if "gensim save_word2vec_format" in seconds else None
    results = {}
    print(f"{'contender':30} {'median s':>9} {'vs gensim':>10} {'file MiB':>9}")
    for name, times in seconds.items():
        ratio = None
        if reference is not None:
            ratio = timing.median([g / t for g, t in zip(seconds[reference], times, strict=True)])
        results[name] = {
            "median_ms": 1000 * timing.median(times),
            "speedup_vs_gensim": ratio,
            "rounds_s": times,
            "file_bytes": sizes[name],
        }
        shown = "-" if ratio is None else f"{ratio:.2f}x"
        print(f"{name:30} {timing.median(times):9.2f} {shown:>10} {sizes[name] / 2**20:9.1f}")
    print("(vs gensim: gensim's time / this time, median of per-round ratios; every file "
          "read back bit for bit)")  # fmt: skip
    ours = results["graphemb write_embeddings"]["speedup_vs_gensim"]
    if ours is not None:
        print(f"write_embeddings speed vs gensim: {report.verdict(ours, 1.0)}")
    summary = {"rows": args.rows, "dim": args.dim, "results": results, "skipped": skipped}
    report.emit_summary(summary, None)


if __name__ == "__main__":
    main()
