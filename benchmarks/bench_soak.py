#!/usr/bin/env python
"""Soak: shared-memory training on 2 processes for 10,000 steps; memory must stay flat.

--world-size ranks (default 2, --threads-per-rank 1) train one shared-memory
NodeEmbedding with SparseAdam (--optimizer adagrad: SparseAdagrad) -- lookup + loss +
backward + step on each rank's share of a batch of uniform random ids, the workload of the
other benchmarks -- in blocks of --sample-every steps. Before the first block and after
every block the parent samples

  each rank     RSS, its private anonymous part (heap, tensors) and its resident shared
                memory, and the /dev/shm files it maps (unlinked ones included);
  the job       the bytes and number of distinct /dev/shm files mapped by any rank, and
                the files in /dev/shm named after this run's tables (0: every name unlinked);
  the parent    its RSS (it hosts the job's TCPStore, which grows if keys pile up);
  the machine   /dev/shm as a whole (other jobs' segments included: shown, not judged).

The first --settle fraction of the steps (default 0.1) is the warm-up: tables are touched
for the first time, allocators fill their caches. Over the rest, a least-squares line
through every series gives its slope; a series is flat when neither the line's growth over
the window nor the growth of its high-water mark (largest sample of the window's last
quarter minus the largest of its first quarter) exceeds --tolerance-mib. A leak raises
both; an allocator that caches one buffer more or less from one sample to the next raises
neither. The largest rise above the window's first sample is reported too.

Output: the samples as a table, a plot of the series (--plot PATH, PNG), then the lines
"RESULT {json}" (slopes, growth, verdicts) and "BENCH_SUMMARY {json}" (everything).
"""

from __future__ import annotations

import argparse
import time

from harness import cli, memory, peers, report, timing, workload
from harness.ranks import RankPool

MIB = 1 << 20
SIZES = {
    "default": {
        "num_embeddings": 200_000,
        "dim": 64,
        "batch": 20_000,
        "warmup": 0,
        "steps": 10_000,
        "rounds": 1,
        "bw_mib": 1,
    },
    "quick": {
        "num_embeddings": 20_000,
        "dim": 16,
        "batch": 2_000,
        "warmup": 0,
        "steps": 300,
        "rounds": 1,
        "bw_mib": 1,
    },
}
JUDGED = "rank {r} RSS", "rank {r} anon", "job shm mapped", "parent RSS"


def parse_args(argv=None) -> argparse.Namespace:
    parser = cli.base_parser(
        __doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1], sizes=SIZES, timed=False
    )
    cli.add_rank_options(parser, "the shared-memory job")
    parser.add_argument(
        "--sample-every",
        type=int,
        default=None,
        help="steps per block between two samples (default: steps / 40; --quick: / 10)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.1,
        help="fraction of the steps left out of the trends (warm-up; default 0.1)",
    )
    parser.add_argument(
        "--tolerance-mib",
        type=float,
        default=8.0,
        help="largest growth of a flat series after the warm-up, MiB (default 8)",
    )
    parser.add_argument(
        "--plot",
        metavar="PATH",
        default="runs/bench_soak.png",
        help="PNG of the series (default runs/bench_soak.png; '' for none)",
    )
    args = cli.finish_rank_args(parser, argv, SIZES)
    if args.sample_every is None:  # 40 samples (10 with --quick)
        args.sample_every = max(1, args.steps // (10 if args.quick else 40))
    if args.sample_every <= 0:
        parser.error(f"--sample-every must be positive, got {args.sample_every}")
    if not 0 <= args.settle < 1:
        parser.error(f"--settle must be in [0, 1), got {args.settle}")
    return args


def build_ranks(rank: int, world_size: int, spec: dict) -> dict:
    """Runs on each rank: the shared-memory contender, built collectively."""
    work = workload.rank_workload(spec, rank, world_size)
    name = spec["contender"]
    contender = peers.graphemb_contender(name, spec["optimizer"], work, table_name=spec["table"])
    kind = contender.objects[0].storage_kind
    if kind != "shared":
        raise RuntimeError(f"expected graphemb's shared-memory storage, got {kind!r}")
    return {name: contender}


def take_sample(step: int, pool: RankPool, token: str, block_ms: float | None) -> dict:
    ranks = pool.memory()
    mapped, segments = memory.shm_mapped(ranks)
    machine = memory.shm_usage(token)
    parent = memory.process_memory()
    sample = {
        "step": step,
        "time_s": time.monotonic(),
        "block_median_ms": block_ms,
        "job shm mapped": mapped,
        "job shm segments": segments,
        "run's files in /dev/shm": machine["matching_files"],
        "machine /dev/shm used": machine["used"],
        "parent RSS": parent["rss"],
    }
    for r, m in enumerate(ranks):
        sample[f"rank {r} RSS"] = m["rss"]
        sample[f"rank {r} anon"] = m["rss_anon"]
        sample[f"rank {r} shmem"] = m["rss_shmem"]
    return sample


def print_samples(samples: list[dict], world_size: int, t0: float) -> None:
    per_rank = [f"rank {r} {k}" for r in range(world_size) for k in ("RSS", "anon", "shmem")]
    columns = [*per_rank, "job shm mapped", "machine /dev/shm used", "parent RSS"]
    rows = []
    for s in samples:
        ms = s["block_median_ms"]
        rows.append(
            [f"{s['step']:,}", f"{s['time_s'] - t0:.0f}", "-" if ms is None else f"{ms:.2f}"]
            + [f"{s[c] / MIB:.1f}" for c in columns]
            + [str(s["job shm segments"]), str(s["run's files in /dev/shm"])]
        )
    headers = ["step", "s", "ms/step", *columns, "segments", "named files"]
    print(
        "\nSamples (MiB; ms/step = median of the block before the sample; segments = "
        "distinct /dev/shm files the ranks map; named files = files in /dev/shm named "
        "after this run's tables)"
    )
    report.print_table(headers, rows)


def trends(samples: list[dict], world_size: int, settle_step: int, tolerance: float) -> dict:
    window = [s for s in samples if s["step"] >= settle_step]
    steps = [s["step"] for s in window]
    judged = [j.format(r=r) for j in JUDGED for r in range(world_size)]
    names = list(dict.fromkeys(judged)) + ["machine /dev/shm used"]
    out = {}
    for name in names:
        t = memory.trend(steps, [s[name] / MIB for s in window])
        entry = {
            "slope_mib_per_1k_steps": t["slope_per_1k_steps"],
            "fitted_growth_mib": t["fitted_growth"],
            "max_growth_mib": t["max_growth"],
            "high_water_growth_mib": t["high_water_growth"],
            "first_mib": t["first"],
            "last_mib": t["last"],
        }
        if name in judged:
            entry["flat"] = max(t["fitted_growth"], t["high_water_growth"]) <= tolerance
        out[name] = entry
    return out


def print_trends(result: dict, args: argparse.Namespace) -> None:
    rows = []
    for name, t in result["series"].items():
        verdict = {True: "FLAT", False: "GROWS"}.get(t.get("flat"), "(not judged: other jobs)")
        rows.append(
            [
                name,
                f"{t['first_mib']:.1f}",
                f"{t['last_mib']:.1f}",
                f"{t['slope_mib_per_1k_steps']:+.3f}",
                f"{t['fitted_growth_mib']:+.2f}",
                f"{t['high_water_growth_mib']:+.2f}",
                f"{t['max_growth_mib']:+.2f}",
                verdict,
            ]
        )
    print(
        f"\nTrends from step {result['settle_step']:,} to {result['steps']:,} (least squares; "
        f"flat = line's and high-water growth <= {args.tolerance_mib:g} MiB; max growth = "
        "largest rise above the first sample)"
    )
    report.print_table(
        [
            "series",
            "first MiB",
            "last MiB",
            "MiB / 1k steps",
            "line's growth",
            "high-water growth",
            "max growth",
            "verdict",
        ],
        rows,
    )


def plot(path: str, samples: list[dict], world_size: int, settle_step: int, title: str) -> None:
    import os

    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    steps = [s["step"] for s in samples]
    fig, axes = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    for r in range(world_size):
        for kind, style in (("RSS", "-"), ("anon", "--"), ("shmem", ":")):
            axes[0].plot(
                steps,
                [s[f"rank {r} {kind}"] / MIB for s in samples],
                style,
                color=f"C{r}",  # one colour per rank, one line style per kind
                label=f"rank {r} {kind}",
            )
    axes[0].plot(
        steps,
        [s["parent RSS"] / MIB for s in samples],
        "-",
        color="grey",
        label="parent (store host) RSS",
    )
    axes[0].set_ylabel("MiB")
    axes[0].set_title("resident memory of the processes")
    axes[1].plot(steps, [s["job shm mapped"] / MIB for s in samples], label="mapped by the ranks")
    axes[1].plot(
        steps,
        [s["machine /dev/shm used"] / MIB for s in samples],
        "--",
        label="/dev/shm used, whole machine (other jobs too)",
    )
    axes[1].set_ylabel("MiB")
    axes[1].set_title("shared memory")
    timed = [s for s in samples if s["block_median_ms"] is not None]
    axes[2].plot([s["step"] for s in timed], [s["block_median_ms"] for s in timed], ".-")
    axes[2].set_ylabel("ms/step (block median)")
    axes[2].set_xlabel("step")
    axes[2].set_ylim(bottom=0)
    for ax in axes:
        ax.axvspan(0, settle_step, color="0.9", label=None)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    axes[1].legend(fontsize=7)
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylim(bottom=0)
    fig.suptitle(title + "\n(shaded: warm-up, left out of the trends)", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> None:
    args = parse_args(argv)
    cli.apply_allocator(args)  # before the first tensor, for every contender
    ws = args.world_size
    title = (
        f"bench_soak: {args.steps:,} steps of shared-memory training, {ws} processes x "
        f"{args.threads_per_rank} thread(s), CPU"
    )
    report.print_header(
        title,
        args,
        f" | {args.optimizer}",
        schedule=f"{args.steps:,} steps, a sample every {args.sample_every}",
    )
    table = workload.unique_name("soak")
    name = f"graphemb shared {ws} proc"
    spec = workload.rank_spec(args, optimizer=args.optimizer, contender=name, table=table)
    settle_step = int(args.settle * args.steps)
    samples = []
    t0 = time.monotonic()
    with RankPool(build_ranks, ws, spec, threads_per_rank=args.threads_per_rank) as pool:
        run = pool.runner(name)
        samples.append(take_sample(0, pool, table, None))
        done = 0
        while done < args.steps:
            count = min(args.sample_every, args.steps - done)
            times = run(done, count)
            done += count
            samples.append(take_sample(done, pool, table, 1e3 * timing.median(times)))
    leftover = memory.shm_usage(table)["matching_files"]
    elapsed = time.monotonic() - t0

    print_samples(samples, ws, t0)
    series = trends(samples, ws, settle_step, args.tolerance_mib)
    flat = all(t["flat"] for t in series.values() if "flat" in t)
    named_files = max(s["run's files in /dev/shm"] for s in samples[1:])
    result = {
        "steps": args.steps,
        "world_size": ws,
        "settle_step": settle_step,
        "tolerance_mib": args.tolerance_mib,
        "series": series,
        "flat": flat,
        "max_named_shm_files_during_run": named_files,
        "shm_files_left_after_exit": leftover,
        "elapsed_s": elapsed,
    }
    print_trends(result, args)
    print(
        f"\nmemory {'stays FLAT' if flat else 'GROWS'} over {args.steps:,} steps "
        f"({elapsed:.0f} s); files in /dev/shm named after this run's tables: at most "
        f"{named_files} during the run, {leftover} after the ranks exited"
    )
    if args.plot:
        plot(args.plot, samples, ws, settle_step, title)
        print(f"plot: {args.plot}")
    report.emit_summary(result, None, prefix="RESULT ")
    report.emit_summary(
        {
            "bench": "soak",
            "config": cli.rank_config(args, sample_every=args.sample_every, settle=args.settle),
            "result": result,
            "samples": samples,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
