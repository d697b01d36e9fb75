#!/usr/bin/env python
"""One sparse training step on CPU: graphemb against torch, DGL and FBGEMM, in one run.

Timed unit: lookup of a batch of random ids + loss + backward + optimizer step, float32.
Each contender runs in a fresh Python process of its own that imports its library alone,
with its library's defaults and this run's allocator settings (``harness.isolated``); the
processes are timed in interleaved rounds, on the same ids and the same loss:

  graphemb  NodeEmbedding + graphemb.optim.SparseAdam / SparseAdagrad / SparseRowWiseAdagrad
  torch     nn.Embedding(sparse=True) + torch.optim.SparseAdam / torch.optim.Adagrad
  dgl       dgl.nn.NodeEmbedding + dgl.optim.SparseAdam / SparseAdagrad
  fbgemm    FBGEMM's CPU table-batched embedding, its backward fused with EXACT_ADAGRAD /
            EXACT_ROWWISE_ADAGRAD (it has no CPU Adam)

DGL and FBGEMM are on the dgl stack only; a peer whose library does not import is left out
with the reason. Reports the median ms/step with its spread, speed-ups over torch
SparseAdam and over each peer with the same optimizer (with the range of the per-round
ratios), and the memory-bandwidth bound: bytes an update must move (Adam 28*D, Adagrad
20*D, row-wise Adagrad 12*D bytes per unique row) / measured copy bandwidth. Then a
per-phase profile of graphemb's SparseAdam step (torch.profiler record_function spans: the
harness's phases and the spans graphemb opens inside them) and, with --ops, torch.profiler's
operator table. The last line is "BENCH_SUMMARY {json}".
"""

from __future__ import annotations

from harness import bandwidth as bw
from harness import cli, isolated, peers, phases, report, timing, workload

FAMILIES = ("graphemb", "torch", "dgl", "fbgemm")
# Each family's optimizer of each formula (None: the library has none).
OPTIMIZERS = {
    "adam": ("SparseAdam", "SparseAdam", "SparseAdam", None),
    "adagrad": ("SparseAdagrad", "Adagrad", "SparseAdagrad", "EXACT_ADAGRAD"),
    "rowwise_adagrad": ("SparseRowWiseAdagrad", None, None, "EXACT_ROWWISE_ADAGRAD"),
}
STATE_TABLES = {"adam": 3, "adagrad": 2, "rowwise_adagrad": 1}  # (N, D) tables, weight included
TARGET_VS_TORCH = 4.0


def parse_args(argv=None):
    parser = cli.base_parser(__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch.set_num_threads for every contender (default: torch's "
        "default, usually the number of cores)",
    )
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"comma-separated subset of {','.join(FAMILIES)} (default: all)",
    )
    parser.add_argument(
        "--optimizers",
        default=",".join(OPTIMIZERS),
        help=f"comma-separated subset of {','.join(OPTIMIZERS)} (default: all; adam alone "
        "holds the least memory in a full-size run)",
    )
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="skip the per-phase profile of graphemb's SparseAdam step",
    )
    parser.add_argument(
        "--ops",
        action="store_true",
        help="also print torch.profiler's operator table of graphemb's SparseAdam step",
    )
    args = cli.finish_args(parser.parse_args(argv))
    args.families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = set(args.families) - set(FAMILIES)
    if unknown or "graphemb" not in args.families:
        parser.error(f"--families must include graphemb and name only {FAMILIES}")
    args.optimizers = [o.strip() for o in args.optimizers.split(",") if o.strip()]
    if set(args.optimizers) - set(OPTIMIZERS) or "adam" not in args.optimizers:
        parser.error(f"--optimizers must include adam and name only {tuple(OPTIMIZERS)}")
    return args


def label(family: str, optimizer: str) -> str:
    return f"{family} {OPTIMIZERS[optimizer][FAMILIES.index(family)]}"


def planned(args) -> list[tuple[str, str]]:
    """``(family, optimizer)`` of every contender asked for whose library has the formula."""
    return [
        (family, optimizer)
        for optimizer in args.optimizers
        for family in args.families
        if OPTIMIZERS[optimizer][FAMILIES.index(family)] is not None
    ]


def start_workers(args, threads: int) -> dict:
    """One worker process per contender, built side by side; a peer that fails to build (its
    library missing, or built for another torch) is left out with one line saying why."""
    builds = {
        label(family, optimizer): (
            "harness.peers:from_spec",
            workload.rank_spec(
                args,
                name=label(family, optimizer),
                family=family,
                optimizer=optimizer,
                threads=threads,
            ),
        )  # fmt: skip
        for family, optimizer in planned(args)
    }
    return isolated.start_all(builds)


def print_bounds(args, batches) -> dict:
    """Unique rows per batch, the copy bandwidth, each optimizer's bound and the tables'
    memory, printed; the summary's entries of them."""
    n, d, b = args.num_embeddings, args.dim, args.batch
    unique = workload.mean_unique(batches)
    expected = workload.expected_unique(n, b)
    print(
        f"unique rows per batch: expected {expected:,.0f} = N*(1-(1-1/N)^B), "
        f"measured {unique:,.0f} (mean of the {len(batches)} batches cycled through)"
    )

    bandwidth = bw.copy_bandwidth(args.bw_mib)
    print(f"copy bandwidth: {bw.fmt_bw(bandwidth)}")
    bounds = {opt: bw.bound_ms(opt, d, unique, bandwidth) for opt in args.optimizers}
    for opt in args.optimizers:
        print(
            f"bound {opt}: {bw.UPDATE_BYTES_PER_COLUMN[opt]}*D bytes x {unique:,.0f} unique "
            f"rows = {bw.update_bytes(opt, d, unique) / 1e6:.0f} MB -> {bounds[opt]:.2f} ms"
        )
    tables = sum(STATE_TABLES[o] for _, o in planned(args)) * n * d * 4
    print(f"memory: the contenders' processes hold {tables / 1e9:.1f} GB of tables")
    return {
        "unique_rows": {"expected": expected, "measured_mean": unique},
        "bandwidth": bandwidth,
        "bound_ms": bounds,
    }


def results_table(args, workers: dict, times: dict, bounds: dict) -> dict:
    """Each contender's summary against its peers, printed as a table."""
    stats = {name: timing.stats_ms(timing.flat(t)) for name, t in times.items()}
    b = args.batch

    def speedup(peer: str, name: str):
        return timing.round_ratios(times[peer], times[name]) if peer in times else None

    def peer_of(family: str, optimizer: str) -> str:
        return label(family, optimizer) if OPTIMIZERS[optimizer][FAMILIES.index(family)] else ""

    results, rows = {}, []
    for name in workers:
        family, optimizer = _family_and_optimizer(name)
        s = stats[name]
        vs = {peer: speedup(peer_of(peer, optimizer), name) for peer in FAMILIES[1:]}
        of_bound = bounds[optimizer] / s["median_ms"]
        results[name] = {
            **s,
            "family": family,
            "optimizer": optimizer,
            "library": workers[name].info.get("library"),
            "process": workers[name].pid,
            "rows_per_s": b / (s["median_ms"] / 1e3),
            "speedup_vs_torch_sparseadam": speedup(label("torch", "adam"), name),
            **{f"speedup_vs_{peer}_same_optimizer": vs[peer] for peer in FAMILIES[1:]},
            "fraction_of_bound": of_bound,
        }
        rows.append(
            [name, f"{s['median_ms']:.1f}", f"{s['p10_ms']:.1f}-{s['p90_ms']:.1f}",
             f"{b / s['median_ms'] / 1e3:.2f}",
             timing.fmt_ratio(results[name]["speedup_vs_torch_sparseadam"]),
             *(timing.fmt_ratio(vs[peer]) for peer in FAMILIES[1:]), f"{100 * of_bound:.0f}%"]
        )  # fmt: skip
    print("\nResults (speed-up = peer's median ms / this one's; [range of per-round ratios])")
    report.print_table(
        ["contender", "ms/step", "p10-p90", "M ids/s", "vs torch SparseAdam",
         *(f"vs {peer} same opt" for peer in FAMILIES[1:]), "of bound"],
        rows,
    )  # fmt: skip
    return results


def _family_and_optimizer(name: str) -> tuple[str, str]:
    """The ``(family, optimizer)`` of a contender's :func:`label`."""
    family, kind = name.split(" ", 1)
    column = FAMILIES.index(family)
    return family, next(o for o, names in OPTIMIZERS.items() if names[column] == kind)


def print_verdicts(args, results: dict, bounds: dict) -> None:
    """graphemb against its bound, torch SparseAdam (the target), DGL and FBGEMM."""
    print()
    for opt in args.optimizers:
        name = label("graphemb", opt)
        print(
            f"{name}: bound {bounds[opt]:.2f} ms; graphemb at "
            f"{100 * results[name]['fraction_of_bound']:.0f}% of bound "
            f"({results[name]['median_ms']:.1f} ms/step)"
        )
    if label("torch", "adam") in results:
        ratio = results[label("graphemb", "adam")]["speedup_vs_torch_sparseadam"]["ratio"]
        report.print_verdict(
            f"graphemb SparseAdam vs torch SparseAdam: {ratio:.2f}x faster "
            f"({report.target_mark(ratio, TARGET_VS_TORCH)})"
        )
    for opt in args.optimizers:
        for peer in ("dgl", "fbgemm"):
            ratio = results[label("graphemb", opt)][f"speedup_vs_{peer}_same_optimizer"]
            if ratio:
                print(
                    f"{label('graphemb', opt)} vs {label(peer, opt)}: {ratio['ratio']:.2f}x "
                    f"faster [{ratio['round_min']:.2f}-{ratio['round_max']:.2f}]"
                )


def profile_graphemb_adam(args, workers: dict, results: dict) -> tuple[dict | None, object]:
    """The per-phase profile (unless --no-profile) and the operator table (--ops) of
    graphemb's SparseAdam step, run in its process after the timed steps."""
    profile = None
    ops = None
    name = label("graphemb", "adam")
    subject = workers[name]
    start = args.warmup + args.steps
    if not args.no_profile:
        trace = report.trace_file(args.trace, f"{name}-phases")
        profile = subject.profile(start, cli.profile_steps(args), trace_path=trace)
        phases.print_phases(f"Phases of {name}", profile, results[name]["median_ms"])
        start += profile["steps"]
    if args.ops:
        ops = subject.command("operators", start=start, count=3)
    return profile, ops


def main(argv=None):
    args = parse_args(argv)
    cli.apply_allocator(args)  # before the first tensor; every worker inherits it
    threads = cli.set_threads(args.threads)
    report.print_header(
        "bench_sparse_step: lookup + backward + step, each contender in a process of its own, CPU",
        args,
        f" | threads {threads}",
    )
    n, d, b = args.num_embeddings, args.dim, args.batch
    bounds = print_bounds(args, workload.make_batches(n, b, 8, args.seed))
    workers = start_workers(args, threads)
    try:
        for name, worker in workers.items():
            print(f"  {name}: {worker.info.get('library')}, process {worker.pid}")
        runners = {name: worker.runner() for name, worker in workers.items()}
        times = timing.interleaved(
            runners, warmup=args.warmup, steps=args.steps, rounds=args.rounds
        )
        results = results_table(args, workers, times, bounds["bound_ms"])
        print_verdicts(args, results, bounds["bound_ms"])
        profile, ops = profile_graphemb_adam(args, workers, results)
    finally:
        isolated.close_all(workers.values())

    report.emit_summary(
        {
            "bench": "sparse_step",
            "config": {
                "num_embeddings": n,
                "dim": d,
                "batch": b,
                "threads": threads,
                "warmup": args.warmup,
                "steps": args.steps,
                "rounds": args.rounds,
                "loss": args.loss,
                "quick": args.quick,
                "lr": peers.LR,
            },
            "left_out": sorted({label(*fo) for fo in planned(args)} - set(workers)),
            **bounds,
            "results": results,
            "target": {"graphemb_sparseadam_vs_torch_sparseadam": TARGET_VS_TORCH},
            "profile_graphemb_sparseadam": profile,
            "ops_graphemb_sparseadam": ops,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
