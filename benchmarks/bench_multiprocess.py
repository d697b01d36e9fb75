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
formula, scatter)), measured by wrapping graphemb's internals from outside.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

TARGET_VS_SINGLE = 0.8
TARGET_VS_DGL = 10.0


def parse_args(argv=None):
    parser = common.base_parser(__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--world-size", type=int, default=2,
                        help="processes of the multi-process contenders (default 2)")
    parser.add_argument("--threads", type=int, default=2,
                        help="threads of the single-process contenders (default 2)")
    parser.add_argument("--threads-per-rank", type=int, default=1,
                        help="threads of each rank of the multi-process contenders (default 1)")
    parser.add_argument("--reference-threads", type=int, default=1,
                        help="threads of a reference single-process graphemb contender "
                             "(default 1; 0 leaves it out)")
    parser.add_argument("--optimizer", choices=("adam", "adagrad"), default="adam",
                        help="SparseAdam (default) or SparseAdagrad, for every contender")
    parser.add_argument("--no-dgl", action="store_true", help="leave the DGL contenders out")
    parser.add_argument("--no-profile", action="store_true", help="skip the per-phase timings")
    args = common.finish_args(parser.parse_args(argv))
    if args.world_size < 2:
        parser.error("--world-size must be >= 2")
    return args


def build_ranks(rank: int, world_size: int, spec: dict) -> dict:
    """Runs on each rank: the multi-process contenders, built collectively."""
    n, d = spec["num_embeddings"], spec["dim"]
    batches, loss = common.rank_workload(spec, rank, world_size)
    contenders = {}
    name = spec["graphemb"]
    contenders[name] = common.graphemb_contender(name, spec["optimizer"], n, d, batches, loss,
                                                 table_name=spec["graphemb_table"])
    kind = contenders[name].objects[0].storage_kind
    if kind != "shared":
        raise RuntimeError(f"expected graphemb's shared-memory storage, got {kind!r}")
    if spec.get("dgl"):
        name = spec["dgl"]
        contenders[name] = common.dgl_contender(name, spec["optimizer"], n, d, batches, loss,
                                                table_name=spec["dgl_table"])
    return contenders


def print_rank_phases(name: str, per_rank: list[dict], total_ms: float) -> None:
    for rank, phases in enumerate(per_rank):
        common.print_phases(f"Phases of {name}, rank {rank}", phases, total_ms)


def main(argv=None):
    args = parse_args(argv)
    common.set_threads(args.threads)
    n, d, b, ws = args.num_embeddings, args.dim, args.batch, args.world_size
    opt = args.optimizer
    common.print_header(
        f"bench_multiprocess: 1 process x {args.threads} threads vs {ws} processes x "
        f"{args.threads_per_rank} thread(s), shared memory, CPU", args, f" | {opt}")

    dgl_ok, dgl_note = (False, "left out (--no-dgl)")
    if not args.no_dgl:
        dgl_ok, dgl_note = common.dgl_available()
        dgl_note = f"DGL {dgl_note}" if dgl_ok else dgl_note
    dgl_multi_ok, dgl_multi_note = dgl_ok, dgl_note
    if dgl_ok and not common.port_free(common.DGL_STORE_PORT):
        dgl_multi_ok = False
        dgl_multi_note = (f"port 127.0.0.1:{common.DGL_STORE_PORT}, which DGL's multi-process "
                          "NodeEmbedding always opens its TCPStore on, is in use by another "
                          "process")
    print(f"dgl: {dgl_note}" + ("" if dgl_ok else "  -> DGL contenders SKIPPED"))
    if dgl_ok and not dgl_multi_ok:
        print(f"dgl multi-process SKIPPED: {dgl_multi_note}")

    batches = common.make_batches(n, b, 8, args.seed)
    unique = common.mean_unique(batches)
    print(f"unique rows per (total) batch: expected {common.expected_unique(n, b):,.0f}, "
          f"measured {unique:,.0f}; each of {ws} ranks looks up {b // ws:,} ids")
    bandwidth = common.copy_bandwidth(args.bw_mib)
    bound = common.bound_ms(opt, d, unique, bandwidth)
    print(f"copy bandwidth: {common.fmt_bw(bandwidth)}")
    print(f"bound: {common.UPDATE_BYTES_PER_COLUMN[opt]}*D bytes x {unique:,.0f} unique rows "
          f"-> {bound:.2f} ms per step")

    single = f"graphemb 1 proc x {args.threads} thr"
    reference = None
    if args.reference_threads and args.reference_threads != args.threads:
        reference = f"graphemb 1 proc x {args.reference_threads} thr (reference)"
    multi = f"graphemb shared {ws} proc x {args.threads_per_rank} thr"
    dgl_single = f"dgl 1 proc x {args.threads} thr"
    dgl_multi = f"dgl {ws} proc x {args.threads_per_rank} thr"
    spec = {"num_embeddings": n, "dim": d, "batch": b, "seed": args.seed, "loss": args.loss,
            "optimizer": opt, "graphemb": multi, "graphemb_table": common.unique_name("mp"),
            "dgl": dgl_multi if dgl_multi_ok else None, "dgl_table": common.unique_name("dglmp")}

    loss = common.make_loss(args.loss, d)
    local = {single: common.graphemb_contender(single, opt, n, d, batches, loss,
                                               table_name=common.unique_name("single"))}
    if reference:
        local[reference] = common.graphemb_contender(reference, opt, n, d, batches, loss,
                                                     table_name=common.unique_name("ref"))
    if dgl_ok:
        local[dgl_single] = common.dgl_contender(dgl_single, opt, n, d, batches, loss,
                                                 table_name=common.unique_name("dgl1"))

    t0 = time.perf_counter()
    with common.RankPool(build_ranks, ws, spec, threads_per_rank=args.threads_per_rank) as pool:
        runners = {single: common.local_runner(local[single])}
        runners[multi] = pool.runner(multi)
        if reference:
            runners[reference] = common.local_runner(local[reference],
                                                     threads=args.reference_threads)
        if dgl_ok:
            runners[dgl_single] = common.local_runner(local[dgl_single])
        if dgl_multi_ok:
            runners[dgl_multi] = pool.runner(dgl_multi)
        times = common.interleaved(runners, warmup=args.warmup, steps=args.steps,
                                   rounds=args.rounds)
        profiles = {}
        if not args.no_profile:
            start = args.warmup + args.steps
            count = common.profile_steps(args)
            profiles[single] = [common.profile_phases(local[single], start, count)]
            profiles[multi] = pool.profile(multi, start, count)
            if dgl_multi_ok:
                profiles[dgl_multi] = pool.profile(dgl_multi, start, count)
    print(f"  ranks done in {time.perf_counter() - t0:.1f} s")

    # ------------------------------------------------------------------ results
    results, rows = common.throughput_results(times, single, b, bound,
                                              "throughput_vs_single_graphemb")
    print("\nResults (throughput = total ids per second; ratio = throughput / (a)'s "
          "[range of per-round ratios])")
    common.print_table(["contender", "ms/step", "p10-p90", "M ids/s", "vs (a)", "of bound"],
                       rows)
    print()
    ratio_b_a = results[multi]["throughput_vs_single_graphemb"]
    print(f"(b)/(a) throughput: {common.fmt_ratio(ratio_b_a)}  "
          f"({common.target_mark(ratio_b_a['ratio'], TARGET_VS_SINGLE)})")
    ratio_b_ref = None
    if reference:
        ratio_b_ref = common.round_ratios(times[reference], times[multi])
        print(f"(b)/reference ({args.reference_threads} thread): {common.fmt_ratio(ratio_b_ref)}")
    ratio_b_c = None
    if dgl_multi_ok:
        ratio_b_c = common.round_ratios(times[dgl_multi], times[multi])
        print(f"(b)/(c) graphemb/DGL multi-process throughput: {common.fmt_ratio(ratio_b_c)}  "
              f"({common.target_mark(ratio_b_c['ratio'], TARGET_VS_DGL)})")
    else:
        print(f"(c) DGL multi-process skipped: {dgl_multi_note}")

    for name, per_rank in profiles.items():
        print_rank_phases(name, per_rank, results[name]["median_ms"])

    common.emit_summary({
        "bench": "multiprocess",
        "config": {"num_embeddings": n, "dim": d, "batch_total": b, "world_size": ws,
                   "threads_single": args.threads, "threads_per_rank": args.threads_per_rank,
                   "optimizer": opt, "warmup": args.warmup, "steps": args.steps,
                   "rounds": args.rounds, "loss": args.loss, "quick": args.quick},
        "dgl": dgl_note, "dgl_multiprocess": "ok" if dgl_multi_ok else dgl_multi_note,
        "unique_rows": unique, "bandwidth": bandwidth, "bound_ms": bound,
        "results": results,
        "ratio_multi_vs_single": ratio_b_a, "ratio_graphemb_vs_dgl_multi": ratio_b_c,
        "ratio_multi_vs_reference": ratio_b_ref,
        "targets": {"multi_vs_single": TARGET_VS_SINGLE, "graphemb_vs_dgl": TARGET_VS_DGL},
        "phases": profiles,
    }, args.json)


if __name__ == "__main__":
    main()
