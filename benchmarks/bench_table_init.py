#!/usr/bin/env python
"""Creating and initialising a large table: graphemb against the memory bound and torch.

Timed unit: a fresh N x D table (default 50M x 64 bfloat16, 6.4 GB) allocated and filled
with uniform values, one process, CPU. Contenders, run one after the other in interleaved
rounds (each table freed before the next), same size and dtype:

  bound         torch.empty(...).fill_(0.5): the allocation, first touch of every page and
                one write of every byte -- what any initialisation must at least cost
  memset        fill_(0.5) of an already touched table: the memory's write speed alone
  torch         torch.empty(...).uniform_(-a, a): torch's own initialisation
  graphemb-1arg NodeEmbedding(..., init_func=lambda t: t.uniform_(-a, a)): the one-argument
                form, one call on the whole table (what creating a table cost before)
  graphemb      NodeEmbedding(..., init_func=uniform_by_id(-a, a, seed=0)): the ids-aware
                form, filled in chunks on all cores, the same table on every layout

Reports the median seconds per table and GB/s of table, each contender's time over the
bound's and over torch's (ratios per round, then the median: the machine may be shared),
and the target (50M x 64 bf16 in <= 8 s). The last line is "BENCH_SUMMARY {json}".
"""

from __future__ import annotations

import gc

import torch
from harness import cli, report, timing

from graphemb import NodeEmbedding
from graphemb.storage.initialization import uniform_by_id

TARGET_S = 8.0  # 50M x 64 bfloat16
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
LOW, HIGH = -0.05, 0.05


def parse_args(argv=None):
    parser = cli.parser(__doc__.split("\n\n")[0], __doc__.split("\n\n", 1)[1])
    parser.add_argument("-n", "--num-embeddings", type=int, default=None, help="rows (50M)")
    parser.add_argument("-d", "--dim", type=int, default=64, help="columns (64)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (3; quick 2)")
    parser.add_argument(
        "--contenders",
        default="bound,memset,torch,graphemb-1arg,graphemb",
        help="comma-separated subset (default: all)",
    )
    parser.add_argument("--quick", action="store_true", help="1M rows, 2 rounds")
    parser.add_argument("--json", metavar="PATH", help="also write the summary here")
    args = parser.parse_args(argv)
    args.num_embeddings = args.num_embeddings or (1_000_000 if args.quick else 50_000_000)
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    return args


def contenders(shape: tuple[int, int], dtype: torch.dtype) -> dict:
    """name -> function that creates and initialises one table and returns it."""
    touched: dict[str, torch.Tensor] = {}

    def memset() -> torch.Tensor:
        if "table" not in touched:  # touched once, outside the timing (see run())
            touched["table"] = torch.empty(shape, dtype=dtype).fill_(0.0)
        return touched["table"].fill_(0.5)

    return {
        "bound": lambda: torch.empty(shape, dtype=dtype).fill_(0.5),
        "memset": memset,
        "torch": lambda: torch.empty(shape, dtype=dtype).uniform_(LOW, HIGH),
        "graphemb-1arg": lambda: NodeEmbedding(
            *shape, "bench-init-1arg", init_func=lambda t: t.uniform_(LOW, HIGH), dtype=dtype
        ),
        "graphemb": lambda: NodeEmbedding(
            *shape, "bench-init", init_func=uniform_by_id(LOW, HIGH, seed=0), dtype=dtype
        ),
    }, touched


def _creating(make, first_touch: bool) -> timing.BlockRunner:
    """Runner of ``make``: each timed step creates one table, freed outside the timing;
    ``first_touch``: one untimed call before the first (memset reuses one table)."""
    kept: list = []

    def run(start: int, count: int) -> list[float]:
        if first_touch and start == 0:
            make()
        times = []
        for index in range(start, start + count):
            times += timing.time_steps(lambda _: kept.append(make()), index, 1)
            kept.clear()
            gc.collect()
        return times

    return run


def run(args) -> dict:
    dtype = DTYPES[args.dtype]
    shape = (args.num_embeddings, args.dim)
    table_bytes = shape[0] * shape[1] * torch.empty(0, dtype=dtype).element_size()
    makers, touched = contenders(shape, dtype)
    makers = {name: makers[name] for name in args.contenders}
    print(
        f"table {shape[0]:,} x {shape[1]} {args.dtype} = {table_bytes / 1e9:.2f} GB, "
        f"{torch.get_num_threads()} torch threads, {args.rounds} rounds, "
        f"load average {report.load_average():.2f}"
    )
    runners = {name: _creating(make, first_touch=name == "memset") for name, make in makers.items()}
    per_round = timing.interleaved(runners, warmup=0, steps=args.rounds, rounds=args.rounds)
    times = {name: timing.flat(blocks) for name, blocks in per_round.items()}
    touched.clear()
    results = {}
    for name, ts in times.items():
        med = timing.median(ts)
        result = {"median_s": med, "min_s": min(ts), "gb_per_s": table_bytes / med / 1e9}
        for peer in ("bound", "torch"):
            if peer in times and peer != name:
                ratios = [t / p for t, p in zip(ts, times[peer], strict=True)]
                result[f"over_{peer}"] = timing.median(ratios)
        results[name] = result
    return {
        "shape": list(shape),
        "dtype": args.dtype,
        "table_gb": table_bytes / 1e9,
        "threads": torch.get_num_threads(),
        "rounds": args.rounds,
        "results": results,
        "target_s_for_50M_x_64_bf16": TARGET_S,
    }


def print_results(summary: dict, json_path: str | None = None) -> None:
    """The table, the verdict and the ``BENCH_SUMMARY`` line (also written to
    ``json_path``)."""
    rows = []
    for name, r in summary["results"].items():
        over_bound = f"{r['over_bound']:.2f}" if "over_bound" in r else "-"
        over_torch = f"{r['over_torch']:.2f}" if "over_torch" in r else "-"
        rows.append([name, f"{r['median_s']:.2f}", f"{r['gb_per_s']:.2f}", over_bound, over_torch])
    print()
    report.print_table(["contender", "median s", "GB/s", "x bound", "x torch"], rows)
    if "graphemb" in summary["results"]:
        scale = 50e6 * 64 * 2 / 1e9 / summary["table_gb"]
        projected = summary["results"]["graphemb"]["median_s"] * scale
        summary["projected_s_for_50M_x_64_bf16"] = projected
        print()
        report.print_verdict(
            f"graphemb at this rate: {projected:.1f} s for 50M x 64 bfloat16 "
            f"({report.verdict(projected, TARGET_S, at_most=True, unit=' s')})"
        )
    report.emit_summary(summary, json_path)


def main(argv=None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)
    print_results(run(args), args.json)


if __name__ == "__main__":
    main()
