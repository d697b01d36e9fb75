#!/usr/bin/env python
"""One sparse training step on CPU: graphemb against torch and DGL, in one run.

Timed unit: lookup of a batch of random ids + loss + backward + optimizer step, float32, one
process. Contenders (all alive at once, timed in interleaved rounds, same ids, same loss):

  graphemb  NodeEmbedding + graphemb.optim.SparseAdam / SparseAdagrad
  torch     nn.Embedding(sparse=True) + torch.optim.SparseAdam / torch.optim.Adagrad
  dgl       dgl.nn.NodeEmbedding + dgl.optim.SparseAdam / SparseAdagrad (dgl stack only)

Reports the median ms/step with its spread, speed-ups over torch SparseAdam, over the torch
peer and over the DGL peer with the same optimizer (with the range of the per-round ratios),
and the memory-bandwidth bound: bytes an update must move (Adam 28*D, Adagrad 20*D bytes per
unique row) / measured copy bandwidth. Then a per-phase profile of graphemb's SparseAdam
step (torch.profiler record_function spans: the harness's phases and the spans graphemb
opens inside them) and, with --ops, torch.profiler's operator table. The last line is
"BENCH_SUMMARY {json}".
"""

from __future__ import annotations

import time

from harness import bandwidth as bw
from harness import cli, peers, phases, report, timing, workload

FAMILIES = ("graphemb", "torch", "dgl")
OPTIMIZERS = {
    "adam": ("SparseAdam", "SparseAdam", "SparseAdam"),
    "adagrad": ("SparseAdagrad", "Adagrad", "SparseAdagrad"),
}
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
        help="comma-separated subset of graphemb,torch,dgl (default: all)",
    )
    parser.add_argument(
        "--optimizers",
        default=",".join(OPTIMIZERS),
        help="comma-separated subset of adam,adagrad (default: both; adam alone halves the "
        "memory of a full-size run)",
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
    names = OPTIMIZERS[optimizer]
    return f"{family} {names[FAMILIES.index(family)]}"


def build(args, work: workload.Workload, dgl_ok):
    """Every contender, in a fixed order; their tables stay alive for the whole run."""
    contenders = {}
    for optimizer in args.optimizers:
        for family in args.families:
            if family == "dgl" and not dgl_ok:
                continue
            name = label(family, optimizer)
            t0 = time.perf_counter()
            if family == "graphemb":
                c = peers.graphemb_contender(
                    name, optimizer, work, table_name=workload.unique_name(optimizer)
                )
            elif family == "torch":
                c = peers.torch_contender(name, optimizer, work)
            else:
                c = peers.dgl_contender(
                    name, optimizer, work, table_name=workload.unique_name(optimizer)
                )
            contenders[name] = c
            print(f"  built {name} in {time.perf_counter() - t0:.1f} s")
    return contenders


def print_bounds(args, batches, dgl_ok: bool) -> dict:
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
    bounds = {opt: bw.bound_ms(opt, d, unique, bandwidth) for opt in ("adam", "adagrad")}
    for opt, per_col in bw.UPDATE_BYTES_PER_COLUMN.items():
        print(
            f"bound {opt}: {per_col}*D bytes x {unique:,.0f} unique rows = "
            f"{bw.update_bytes(opt, d, unique) / 1e6:.0f} MB -> {bounds[opt]:.2f} ms"
        )

    table_mb = n * d * 4 / 1e6
    tables = {"adam": 3, "adagrad": 2}
    planned = [(f, o) for o in args.optimizers for f in args.families if f != "dgl" or dgl_ok]
    print(
        f"memory: {len(planned)} contenders hold "
        f"{sum(tables[o] for _, o in planned) * table_mb / 1e3:.1f} GB of tables"
    )
    return {
        "unique_rows": {"expected": expected, "measured_mean": unique},
        "bandwidth": bandwidth,
        "bound_ms": bounds,
    }


def results_table(args, contenders: dict, times: dict, bounds: dict) -> dict:
    """Each contender's summary against its peers, printed as a table."""
    stats = {name: timing.stats_ms(timing.flat(t)) for name, t in times.items()}
    b = args.batch

    def speedup(peer, name):
        return timing.round_ratios(times[peer], times[name]) if peer in times else None

    results, rows = {}, []
    for name, c in contenders.items():
        s = stats[name]
        vs_torch_adam = speedup(label("torch", "adam"), name)
        vs_torch = speedup(label("torch", c.optimizer), name)
        vs_dgl = speedup(label("dgl", c.optimizer), name)
        of_bound = bounds[c.optimizer] / s["median_ms"]
        results[name] = {
            **s,
            "family": c.family,
            "optimizer": c.optimizer,
            "rows_per_s": b / (s["median_ms"] / 1e3),
            "speedup_vs_torch_sparseadam": vs_torch_adam,
            "speedup_vs_torch_same_optimizer": vs_torch,
            "speedup_vs_dgl_same_optimizer": vs_dgl,
            "fraction_of_bound": of_bound,
        }
        rows.append(
            [
                name,
                f"{s['median_ms']:.1f}",
                f"{s['p10_ms']:.1f}-{s['p90_ms']:.1f}",
                f"{b / s['median_ms'] / 1e3:.2f}",
                timing.fmt_ratio(vs_torch_adam),
                timing.fmt_ratio(vs_torch),
                timing.fmt_ratio(vs_dgl),
                f"{100 * of_bound:.0f}%",
            ]
        )
    print("\nResults (speed-up = peer's median ms / this one's; [range of per-round ratios])")
    report.print_table(
        [
            "contender",
            "ms/step",
            "p10-p90",
            "M ids/s",
            "vs torch SparseAdam",
            "vs torch same opt",
            "vs DGL same opt",
            "of bound",
        ],
        rows,
    )
    return results


def print_verdicts(args, results: dict, bounds: dict, dgl_ok: bool, dgl_note: str) -> None:
    """graphemb against its bound, torch SparseAdam (the target) and DGL."""
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
        peer = results[label("graphemb", opt)]["speedup_vs_dgl_same_optimizer"]
        if peer:
            print(f"{label('graphemb', opt)} vs {label('dgl', opt)}: {peer['ratio']:.2f}x faster")
    if not dgl_ok:
        print(f"DGL contenders skipped: {dgl_note}")


def profile_graphemb_adam(args, contenders: dict, results: dict) -> tuple[dict | None, object]:
    """The per-phase profile (unless --no-profile) and the operator table (--ops) of
    graphemb's SparseAdam step, run after the timed steps."""
    profile = None
    ops = None
    subject = contenders[label("graphemb", "adam")]
    start = args.warmup + args.steps
    if not args.no_profile:
        trace = report.trace_file(args.trace, f"{subject.name}-phases")
        profile = phases.profile_phases(subject, start, cli.profile_steps(args), trace_path=trace)
        phases.print_phases(
            f"Phases of {subject.name}", profile, results[subject.name]["median_ms"]
        )
        start += profile["steps"]
    if args.ops:
        ops = phases.operator_table(subject.step, subject.name, start, 3)
    return profile, ops


def main(argv=None):
    args = parse_args(argv)
    cli.apply_allocator(args)  # before the first tensor, for every contender
    threads = cli.set_threads(args.threads)
    dgl_ok, dgl_note = (False, "not requested (--families)")
    if "dgl" in args.families:
        dgl_ok, dgl_note = peers.dgl_available()
    report.print_header(
        "bench_sparse_step: lookup + backward + step, one process, CPU",
        args,
        f" | threads {threads}",
    )
    print(
        f"dgl: {dgl_note if not dgl_ok else 'DGL ' + dgl_note}"
        + ("" if dgl_ok else "  -> DGL contenders SKIPPED")
    )

    n, d, b = args.num_embeddings, args.dim, args.batch
    batches = workload.make_batches(n, b, 8, args.seed)
    bounds = print_bounds(args, batches, dgl_ok)

    work = workload.Workload(n, d, batches, workload.make_loss(args.loss, d))
    contenders = build(args, work, dgl_ok)
    runners = {name: timing.local_runner(c.step) for name, c in contenders.items()}
    times = timing.interleaved(runners, warmup=args.warmup, steps=args.steps, rounds=args.rounds)

    results = results_table(args, contenders, times, bounds["bound_ms"])
    print_verdicts(args, results, bounds["bound_ms"], dgl_ok, dgl_note)
    profile, ops = profile_graphemb_adam(args, contenders, results)

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
            "dgl": dgl_note if not dgl_ok else f"DGL {dgl_note}",
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
