"""What ``bench_end_to_end.py`` prints after the timing: the table of medians, the
speed-ups and their verdicts, the phase profiles, and per phase graphemb against DGL and
against the phase's bound (``e2e_bounds.py``)."""

from __future__ import annotations

import e2e_bounds
import e2e_loops as loops
from e2e_workload import DGL_NAMES, graphemb_name

PHASES = ("sampling", "layers", "sparse step")


def one_name(args) -> str:
    """graphemb's single-process contender."""
    return graphemb_name(args.threads)


def dgl_name(kind: str) -> str:
    """DGL's contender of ``kind`` (``e2e_workload.KINDS``)."""
    return DGL_NAMES[kind]


def _verdict(args, value: float, target: float, at_most: bool = False) -> str:
    """The harness's verdict, marked as a loaded run under ``--busy``."""
    from harness import report

    line = report.verdict(value, target, at_most=at_most)
    return f"under {args.busy} busy processes: {line}" if args.busy else line


def _emit(args, line: str, judged: bool) -> None:
    """A figure's line: a verdict line (kept for the summary) unless ``--quick``."""
    from harness import report

    (report.print_verdict if judged and not args.quick else print)(line)


def profile_all(args, local: dict, pools: dict) -> dict:
    """The phases of every contender (rank 0 of a pool, with every rank's phases) after
    the timed batches, printed."""
    from harness import phases
    from harness.report import trace_file

    print(f"\n## phases (torch.profiler spans, median of {args.profile_steps} batches)")
    start = args.warmup + args.steps
    profiles = {}
    for name, worker in local.items():
        path = trace_file(args.trace, name.replace(" ", "-"))
        profiles[name] = worker.profile(start, args.profile_steps, path)
    for name, pool in pools.items():
        for ranks in loops.pool_contenders(name):
            answers = pool.profile(ranks, start, args.profile_steps, args.trace)
            profiles[ranks] = dict(
                answers[0], every_rank_phases_ms=[answer["phases_ms"] for answer in answers]
            )
    for name, profile in profiles.items():
        phases.print_phases(name + (" (rank 0)" if "every_rank_phases_ms" in profile else ""),
                            profile)  # fmt: skip
    for name, profile in profiles.items():
        if "every_rank_phases_ms" in profile:
            print_rank_balance(name, profile["every_rank_phases_ms"])
    return profiles


def print_rank_balance(name: str, every_rank: list[dict]) -> None:
    """One line per rank: its main phases and the sparse step's parts, in ms."""
    print(f"\n{name}: every rank's phases (ms, median of the profiled batches)")
    for rank, ms in enumerate(every_rank):
        parts = [f"{p} {ms[p]:.1f}" for p in ("sampling", "forward", "backward", "sparse step")]
        parts += [
            f"{path.rsplit('::', 1)[-1]} {value:.1f}"
            for path, value in ms.items()
            if path.endswith(("::push", "::update", "::adam_", "::after_update"))
        ]
        print(f"  rank {rank}: " + ", ".join(parts))


def print_times(per_round: dict) -> dict:
    """The table of medians; per contender its statistics."""
    from harness import timing

    results = {n: timing.stats_ms(timing.flat(t)) for n, t in per_round.items()}
    print(f"\n{'contender':52s} {'ms/batch':>9s} {'p10':>8s} {'p90':>8s}")
    for name, r in results.items():
        print(f"{name:52s} {r['median_ms']:9.1f} {r['p10_ms']:8.1f} {r['p90_ms']:8.1f}")
    return results


def print_speedups(args, targets: dict, per_round: dict) -> dict:
    """graphemb's speed-ups over DGL's loops (the single process's with their targets),
    and those of the PyG-aggregation twin and the pools over the single process."""
    from harness import timing

    one, ratios = one_name(args), {}
    graphembs = [n for n in per_round if n.startswith("graphemb") and not loops.is_yardstick(n)]
    print()
    for kind in ("dgl", "dgl-torch-rows", "dgl-docstring"):
        peer = dgl_name(kind)
        if peer not in per_round:
            continue
        for name in graphembs:
            ratio = timing.round_ratios(per_round[peer], per_round[name])
            key = f"{name} over {peer}"
            ratios[key] = ratio
            target = targets.get(kind) if name == one else None
            verdict = f"  {_verdict(args, ratio['ratio'], target)}" if target else ""
            _emit(args, f"speed-up {key}: {timing.fmt_ratio(ratio)}{verdict}", bool(target))
    if one in per_round:
        for name in per_round:
            if name == one or not name.startswith("graphemb"):
                continue
            key = f"{name} vs {one}"
            ratios[key] = timing.round_ratios(per_round[one], per_round[name])
            pair = " proc x 1 thr" in name and not loops.is_yardstick(name)
            verdict = f"  {_verdict(args, ratios[key]['ratio'], targets['procs'])}" if pair else ""
            _emit(args, f"speed-up {key}: {timing.fmt_ratio(ratios[key])}{verdict}", pair)
    return ratios


def phase_ms(profile: dict) -> dict:
    """A profile's three phases (ms): sampling, layers (forward + backward), sparse step."""
    ms = profile["phases_ms"]
    return {
        "sampling": ms["sampling"],
        "layers": ms["forward"] + ms["backward"],
        "sparse step": ms["sparse step"],
    }


def measure_bounds(args, worker, earlier: dict | None = None) -> dict:
    """The rates of this machine (copy bandwidth, random reads, measured here, now) and the
    bounds of the profiled batches' phases, from graphemb's worker's batch shapes.

    With ``earlier`` (this function's result from before the timing), each bound is the
    lower of the two measurements: the host's speed drifts during a run by a fifth or more,
    and a bound measured in a slow phase alone would flatter every contender against it."""
    from harness.bandwidth import copy_bandwidth

    start = args.warmup + args.steps
    # the same batches each time: sampled once
    shapes = (
        earlier["shapes"]
        if earlier
        else worker.command("shapes", start=start, count=args.profile_steps)
    )
    map_mib = max(1, (4 * args.num_nodes) >> 20)  # int32 position of every node
    machine = {
        "bandwidth": copy_bandwidth(args.bw_mib),
        "random_reads": e2e_bounds.random_read_rate(),
        "relabel_reads": e2e_bounds.random_read_rate(mib=map_mib),
    }
    widths = [args.dim] + [args.hidden] * (len(args.fanouts) - 1) + [args.classes]
    bounds = e2e_bounds.phase_bounds(shapes, widths, machine)
    measured = {"machine": machine, "shapes": shapes, "bounds_ms": bounds}
    if earlier is None:
        return measured
    lower = {key: min(value, earlier["bounds_ms"][key]) for key, value in bounds.items()}
    return {**measured, "bounds_ms": lower, "measurements": [earlier, measured]}


def print_phase_table(args, targets: dict, profiles: dict, bounds: dict) -> dict:
    """Per phase: graphemb, DGL's loops, the bound, graphemb over the bound and DGL over
    graphemb; the verdict lines of the layers' and sampling's targets against DGL and of
    every phase against its bound. Returns the figures."""
    from harness import report

    one, dgl = one_name(args), dgl_name("dgl")
    ours = phase_ms(profiles[one])
    peers = {name: phase_ms(profiles[name]) for name in profiles if name.startswith("dgl")}
    bound = bounds["bounds_ms"] if bounds else {}
    rows, figures = [], {"graphemb_ms": ours, "peers_ms": peers, "bounds_ms": bound}
    for phase in PHASES:
        row = [phase, f"{ours[phase]:.1f}"]
        row += [f"{peers[n][phase]:.1f}" for n in peers]
        row += [f"{bound[phase]:.1f}", f"{ours[phase] / bound[phase]:.2f}x"] if bound else []
        row += [f"{peers[dgl][phase] / ours[phase]:.2f}x"] if dgl in peers else []
        rows.append(row)
    headers = ["phase (ms, profiled)", "graphemb", *peers]
    headers += ["bound", "graphemb / bound"] if bound else []
    headers += ["DGL / graphemb"] if dgl in peers else []
    print(f"\n## phases against DGL's and their bounds (median of {args.profile_steps} batches)")
    report.print_table(headers, rows)
    if bound:
        print(f"  layers' bound: products {bound['layers: products']:.1f} ms (torch.mm), bytes "
              f"{bound['layers: bytes']:.1f} ms; each bound the lowest measured:")  # fmt: skip
        measurements = bounds.get("measurements")
        if measurements is None:
            _print_rates("after the profiles", bounds)
        else:
            _print_rates("before the timing", measurements[0])
            _print_rates("after the profiles", measurements[1])
    print()
    if dgl in peers:
        for phase in ("layers", "sampling"):
            ratio = peers[dgl][phase] / ours[phase]
            figures[f"{phase}_over_dgl"] = ratio
            _emit(args, f"{phase}: {one} {ours[phase]:.1f} ms, {dgl} {peers[dgl][phase]:.1f} ms "
                  f"(profiled, median of {args.profile_steps} batches): {ratio:.2f}x  "
                  f"{_verdict(args, ratio, targets[phase])}", True)  # fmt: skip
    for phase in PHASES if bound else ():
        share = ours[phase] / bound[phase]
        figures[f"{phase}_over_bound"] = share
        _emit(args, f"{phase}: {one} {ours[phase]:.1f} ms, bound {bound[phase]:.1f} ms: "
              f"{share:.2f}x the bound  {_verdict(args, share, targets['bound'], at_most=True)}",
              True)  # fmt: skip
    return figures


def _print_rates(when: str, measured: dict) -> None:
    """One measurement of the bounds: the layers' products and the machine's rates."""
    rates, bounds = measured["machine"], measured["bounds_ms"]
    print(
        f"    {when}: products {bounds['layers: products']:.1f} ms, copy "
        f"{rates['bandwidth']['bytes_per_s'] / 1e9:.1f} GB/s, random reads "
        f"{rates['random_reads']['reads_per_s'] / 1e6:.0f} M/s (graph), "
        f"{rates['relabel_reads']['reads_per_s'] / 1e6:.0f} M/s (relabelling map)"
    )


def report_run(
    args,
    targets: dict,
    per_round: dict,
    profiles: dict,
    local: dict,
    pools: dict,
    early_bounds: dict | None = None,
) -> dict:
    """Everything printed after the timing and profiles; the summary's figures.
    ``early_bounds``: :func:`measure_bounds` before the timing."""
    results = print_times(per_round)
    ratios = print_speedups(args, targets, per_round)
    one = one_name(args)
    phases_figures, bounds = {}, {}
    if one in local:
        bounds = measure_bounds(args, local[one], early_bounds)
        phases_figures = print_phase_table(args, targets, profiles, bounds)
    extra = {}
    for name, worker in local.items():
        if "dgl docstring" in name:
            extra["dgl_docstring_trace"] = worker.command("trace")
            print(f"# {name}: {extra['dgl_docstring_trace']['batches_in_trace']} batches in "
                  "its NodeEmbedding's trace, all applied again by every step")  # fmt: skip
    if pools and one in local:
        extra["rank_frontier_shares"] = local[one].command(
            "frontier_shares", procs=[p for p in args.procs if p > 1]
        )
    return {
        "ms_per_batch": results,
        "speedups": {
            n: {k: v for k, v in r.items() if k != "per_round"} for n, r in ratios.items()
        },
        "phases_ms": {n: p["phases_ms"] for n, p in profiles.items()},
        "every_rank_phases_ms": {
            n: p["every_rank_phases_ms"] for n, p in profiles.items() if "every_rank_phases_ms" in p
        },  # fmt: skip
        "phases": phases_figures,
        "machine": bounds.get("machine"),
        "bounds_measured_ms": [m["bounds_ms"] for m in bounds.get("measurements", [])],
        "batch_shapes": bounds.get("shapes"),
        "processes": {name: worker.info for name, worker in local.items()},
        **extra,
    }
