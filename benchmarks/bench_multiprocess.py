#!/usr/bin/env python
"""Shared-memory training on one machine: 1 process x T threads against P processes x 1 thread.

The same workload as bench_sparse_step (lookup + loss + backward + SparseAdam step, float32,
uniform random ids) with the same TOTAL batch per step:

  (a) graphemb, one process, --threads threads (default 2), the whole batch;
  (b) graphemb, --world-size processes (default 2) x --threads-per-rank threads (default 1),
      a gloo process group over loopback, NodeEmbedding in shared-memory mode, each rank
      looks up its share of the batch; each row is updated by its owner rank;
  (c) DGL's own multi-process mode on the same ranks: dgl.nn.NodeEmbedding +
      dgl.optim.SparseAdam (dgl stack only; DGL opens its own TCPStore on the fixed port
      127.0.0.1:12346, so (c) is skipped with a reason when that port is taken);
  and, for reference, graphemb in one process with --reference-threads threads (default 1;
  on a machine where other jobs keep a core busy, 2 OpenMP threads lose much more than 1
  thread does, which flatters (b)/(a)), and DGL in one process with --threads threads
  (dgl stack only).

The ranks are spawned with torch.multiprocessing around a TCPStore on a port the OS picks;
they stay alive for the whole run and time their blocks on command, interleaved with the
single-process blocks of this (parent) process, so every contender sees the same machine.
Throughput = total ids looked up per second (per step, the slowest rank counts). Prints
the ratios (b)/(a) (target >= 0.8) and (b)/(c) (target >= 10), the fraction of the
memory-bandwidth bound, and per-phase timings of each rank (lookup, loss, backward, step;
inside the step: exchange (push, barrier) against local work (coalesce, gather, update
formula, scatter)), read back from torch.profiler record_function spans.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness import bandwidth as bw
from harness import cli, peers, phases, report, timing, workload
from harness.ranks import RankPool

TARGET_VS_SINGLE = 0.8
TARGET_VS_DGL = 10.0


def parse_args(argv=None):
    parser = cli.base_parser(__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1])
    cli.add_rank_options(parser, "the multi-process contenders")
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="threads of the single-process contenders (default 2)",
    )
    parser.add_argument(
        "--reference-threads",
        type=int,
        default=1,
        help="threads of a reference single-process graphemb contender "
        "(default 1; 0 leaves it out)",
    )
    parser.add_argument("--no-dgl", action="store_true", help="leave the DGL contenders out")
    parser.add_argument("--no-profile", action="store_true", help="skip the per-phase timings")
    return cli.finish_rank_args(parser, argv)


def build_ranks(rank: int, world_size: int, spec: dict) -> dict:
    """Runs on each rank: the multi-process contenders, built collectively."""
    work = workload.rank_workload(spec, rank, world_size)
    contenders = {}
    name = spec["graphemb"]
    contenders[name] = peers.graphemb_contender(
        name, spec["optimizer"], work, table_name=spec["graphemb_table"]
    )
    kind = contenders[name].objects[0].storage_kind
    if kind != "shared":
        raise RuntimeError(f"expected graphemb's shared-memory storage, got {kind!r}")
    if spec.get("dgl"):
        name = spec["dgl"]
        contenders[name] = peers.dgl_contender(
            name, spec["optimizer"], work, table_name=spec["dgl_table"]
        )
    return contenders


@dataclass
class Dgl:
    """Whether the DGL contenders run, in one process and on the ranks, and why not."""

    ok: bool
    note: str
    multi_ok: bool
    multi_note: str


def dgl_status(args) -> Dgl:
    """DGL's availability (unless --no-dgl) and its store port's, printed."""
    dgl_ok, dgl_note = (False, "left out (--no-dgl)")
    if not args.no_dgl:
        dgl_ok, dgl_note = peers.dgl_available()
        dgl_note = f"DGL {dgl_note}" if dgl_ok else dgl_note
    dgl_multi_ok, dgl_multi_note = dgl_ok, dgl_note
    if dgl_ok and not peers.port_free(peers.DGL_STORE_PORT):
        dgl_multi_ok = False
        dgl_multi_note = (
            f"port 127.0.0.1:{peers.DGL_STORE_PORT}, which DGL's multi-process "
            "NodeEmbedding always opens its TCPStore on, is in use by another "
            "process"
        )
    print(f"dgl: {dgl_note}" + ("" if dgl_ok else "  -> DGL contenders SKIPPED"))
    if dgl_ok and not dgl_multi_ok:
        print(f"dgl multi-process SKIPPED: {dgl_multi_note}")
    return Dgl(dgl_ok, dgl_note, dgl_multi_ok, dgl_multi_note)


@dataclass
class Names:
    """The contenders' names: (a) ``single``, (b) ``multi``, (c) ``dgl_multi``, and the
    references (``reference`` is ``None`` where --reference-threads leaves it out)."""

    single: str
    reference: str | None
    multi: str
    dgl_single: str
    dgl_multi: str

    @classmethod
    def of(cls, args, single: str) -> Names:
        """The names of a run of ``args``; ``single``: the single-process contender's."""
        ws = args.world_size
        reference = None
        if args.reference_threads and args.reference_threads != args.threads:
            reference = f"graphemb 1 proc x {args.reference_threads} thr (reference)"
        return cls(
            single=single,
            reference=reference,
            multi=f"graphemb shared {ws} proc x {args.threads_per_rank} thr",
            dgl_single=f"dgl 1 proc x {args.threads} thr",
            dgl_multi=f"dgl {ws} proc x {args.threads_per_rank} thr",
        )


def local_contenders(args, work: workload.Workload, dgl: Dgl) -> tuple[Names, dict]:
    """The contenders of this (parent) process, and every contender's name."""
    single, contender = peers.single_process_graphemb(args, work)
    names = Names.of(args, single)
    local = {single: contender}
    if names.reference:
        local[names.reference] = peers.graphemb_contender(
            names.reference, args.optimizer, work, table_name=workload.unique_name("ref")
        )
    if dgl.ok:
        local[names.dgl_single] = peers.dgl_contender(
            names.dgl_single, args.optimizer, work, table_name=workload.unique_name("dgl1")
        )
    return names, local


def time_all(args, names: Names, local: dict, spec: dict, dgl: Dgl) -> tuple[dict, dict]:
    """Every contender timed in interleaved rounds, the ranks on command; then the phases
    (unless --no-profile). Returns ``(times, profiles)``."""
    t0 = time.perf_counter()
    single, multi, dgl_multi = names.single, names.multi, names.dgl_multi
    with RankPool(
        build_ranks, args.world_size, spec, threads_per_rank=args.threads_per_rank
    ) as pool:
        runners = {single: timing.local_runner(local[single].step)}
        runners[multi] = pool.runner(multi)
        if names.reference:
            runners[names.reference] = timing.local_runner(
                local[names.reference].step, threads=args.reference_threads
            )
        if dgl.ok:
            runners[names.dgl_single] = timing.local_runner(local[names.dgl_single].step)
        if dgl.multi_ok:
            runners[dgl_multi] = pool.runner(dgl_multi)
        times = timing.interleaved(
            runners, warmup=args.warmup, steps=args.steps, rounds=args.rounds
        )
        profiles = {}
        if not args.no_profile:
            start = args.warmup + args.steps
            count = cli.profile_steps(args)
            trace = report.trace_file(args.trace, f"{single}-phases")
            profiles[single] = [
                phases.profile_phases(local[single], start, count, trace_path=trace)
            ]
            profiles[multi] = pool.profile(multi, start, count, args.trace)
            if dgl.multi_ok:
                profiles[dgl_multi] = pool.profile(dgl_multi, start, count, args.trace)
    print(f"  ranks done in {time.perf_counter() - t0:.1f} s")
    return times, profiles


def print_ratios(args, names: Names, times: dict, results: dict, dgl: Dgl) -> dict:
    """(b)/(a) against its target, (b)/reference, (b)/(c) against its target, printed."""
    ratio_b_a = results[names.multi]["throughput_vs_single_graphemb"]
    report.print_verdict(
        f"(b)/(a) throughput: {timing.fmt_ratio(ratio_b_a)}  "
        f"({report.target_mark(ratio_b_a['ratio'], TARGET_VS_SINGLE)})"
    )
    ratio_b_ref = None
    if names.reference:
        ratio_b_ref = timing.round_ratios(times[names.reference], times[names.multi])
        print(f"(b)/reference ({args.reference_threads} thread): {timing.fmt_ratio(ratio_b_ref)}")
    ratio_b_c = None
    if dgl.multi_ok:
        ratio_b_c = timing.round_ratios(times[names.dgl_multi], times[names.multi])
        report.print_verdict(
            f"(b)/(c) graphemb/DGL multi-process throughput: {timing.fmt_ratio(ratio_b_c)}  "
            f"({report.target_mark(ratio_b_c['ratio'], TARGET_VS_DGL)})"
        )
    else:
        print(f"(c) DGL multi-process skipped: {dgl.multi_note}")
    return {
        "ratio_multi_vs_single": ratio_b_a,
        "ratio_graphemb_vs_dgl_multi": ratio_b_c,
        "ratio_multi_vs_reference": ratio_b_ref,
    }


def main(argv=None):
    args = parse_args(argv)
    cli.apply_allocator(args)  # before the first tensor, for every contender
    cli.set_threads(args.threads)
    n, d, b, ws = args.num_embeddings, args.dim, args.batch, args.world_size
    report.print_header(
        f"bench_multiprocess: 1 process x {args.threads} threads vs {ws} processes x "
        f"{args.threads_per_rank} thread(s), shared memory, CPU",
        args,
        f" | {args.optimizer}",
    )
    dgl = dgl_status(args)

    batches = workload.make_batches(n, b, 8, args.seed)
    unique, bandwidth, bound = bw.print_rank_bound(args, batches)
    names, local = local_contenders(
        args, workload.Workload(n, d, batches, workload.make_loss(args.loss, d)), dgl
    )
    spec = workload.rank_spec(
        args,
        optimizer=args.optimizer,
        graphemb=names.multi,
        graphemb_table=workload.unique_name("mp"),
        dgl=names.dgl_multi if dgl.multi_ok else None,
        dgl_table=workload.unique_name("dglmp"),
    )
    times, profiles = time_all(args, names, local, spec, dgl)

    results = report.print_throughput(
        times,
        names.single,
        b,
        bound,
        "throughput_vs_single_graphemb",
        "\nResults (throughput = total ids per second; ratio = throughput / (a)'s "
        "[range of per-round ratios])",
        "vs (a)",
    )
    print()
    ratios = print_ratios(args, names, times, results, dgl)
    phases.print_rank_phases(profiles, results)

    report.emit_summary(
        {
            "bench": "multiprocess",
            "config": cli.rank_config(
                args, threads_single=args.threads, warmup=args.warmup, rounds=args.rounds
            ),
            "dgl": dgl.note,
            "dgl_multiprocess": "ok" if dgl.multi_ok else dgl.multi_note,
            "unique_rows": unique,
            "bandwidth": bandwidth,
            "bound_ms": bound,
            "results": results,
            **ratios,
            "targets": {"multi_vs_single": TARGET_VS_SINGLE, "graphemb_vs_dgl": TARGET_VS_DGL},
            "phases": profiles,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
