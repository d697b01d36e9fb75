"""Output: the header, the environment, aligned tables and the ``BENCH_SUMMARY`` line."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence

import torch

from .timing import flat, fmt_ratio, round_ratios, stats_ms
from .workload import LOSSES

SUMMARY_PREFIX = "BENCH_SUMMARY "


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Columns aligned; numbers right-aligned (except in the first column)."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        out = []
        for i, cell in enumerate(row):
            numeric = cell[:1].isdigit() or cell[:1] in "+-" and cell[1:2].isdigit()
            out.append(cell.rjust(widths[i]) if numeric and i else cell.ljust(widths[i]))
        return "  ".join(out).rstrip()

    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))


def throughput_results(
    times: dict, reference: str, batch: int, bound: float, ratio_key: str
) -> tuple[dict, list]:
    """Per-contender summary (for the JSON) and table rows of a throughput comparison
    against ``reference``; ``ratio_key`` names the ratio in the summary."""
    results, rows = {}, []
    for name, t in times.items():
        s = stats_ms(flat(t))
        ratio = round_ratios(times[reference], t)
        results[name] = {
            **s,
            "rows_per_s": batch / (s["median_ms"] / 1e3),
            ratio_key: ratio,
            "fraction_of_bound": bound / s["median_ms"],
        }
        rows.append(
            [
                name,
                f"{s['median_ms']:.1f}",
                f"{s['p10_ms']:.1f}-{s['p90_ms']:.1f}",
                f"{batch / s['median_ms'] / 1e3:.3f}",
                fmt_ratio(ratio),
                f"{100 * bound / s['median_ms']:.0f}%",
            ]
        )
    return results, rows


def print_throughput(
    times: dict, reference: str, batch: int, bound: float, ratio_key: str, title: str, vs: str
) -> dict:
    """:func:`throughput_results`, printed as a table under ``title`` (its ratio column
    headed ``vs``); the per-contender summary."""
    results, rows = throughput_results(times, reference, batch, bound, ratio_key)
    print(title)
    print_table(["contender", "ms/step", "p10-p90", "M ids/s", vs, "of bound"], rows)
    return results


def environment() -> dict:
    """Date, machine and software stack, for the summary."""
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for text in f:
                if text.startswith("model name"):
                    cpu = text.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    env = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        # other processes' load: on a shared machine, read every number against it
        "loadavg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        # torch's huge-page CPU allocations, the same for every contender of the process
        "thp_mem_alloc": os.environ.get("THP_MEM_ALLOC_ENABLE"),
    }
    if "dgl" in sys.modules:
        env["dgl"] = sys.modules["dgl"].__version__
    env.update(_graphemb_revision())
    try:
        import graphemb
        from graphemb.optim import kernels

        env["graphemb"] = graphemb.__version__
        env["graphemb_kernels"] = kernels.available()
    except Exception:  # informative only
        pass
    return env


def _graphemb_revision() -> dict:
    """The commit of the checkout that graphemb is imported from, and whether tracked files
    of graphemb/ or csrc/ have uncommitted changes (read-only git queries; empty where git
    or the checkout is absent)."""
    try:
        import graphemb

        root = os.path.dirname(os.path.dirname(os.path.abspath(graphemb.__file__)))
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = subprocess.run(
            [
                "git",
                "-C",
                root,
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "graphemb",
                "csrc",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except Exception:  # informative only
        return {}
    if head.returncode != 0:
        return {}
    return {
        "graphemb_commit": head.stdout.strip(),
        "graphemb_uncommitted_changes": bool(dirty.stdout.strip()),
    }


def print_header(
    title: str, args: argparse.Namespace, extra: str = "", schedule: str | None = None
) -> None:
    """Title, date, machine, stack, load, sizes; ``schedule`` replaces the line's
    description of warm-up and interleaved rounds."""
    env = environment()
    print(f"== {title} ==")
    revision = env.get("graphemb_commit", "?")
    if env.get("graphemb_uncommitted_changes"):
        revision += " + uncommitted changes in graphemb/ or csrc/"
    kernels = {True: "with", False: "without"}.get(env.get("graphemb_kernels"), "?")
    print(
        f"{env['date']} | {env['cpu']} | {env['cores']} cores | python {env['python']} | "
        f"torch {env['torch']} | torch threads {env['torch_threads']} | "
        f"graphemb {revision}, {kernels} fused CPU kernels | load average (1 min) before "
        f"the run {env['loadavg_1min']}"
    )
    print(
        f"N={args.num_embeddings:,} D={args.dim} batch={args.batch:,} float32 | "
        + (
            schedule
            or f"warm-up {args.warmup} + {args.steps} timed steps per contender in "
            f"{args.rounds} interleaved rounds"
        )
        + f"{' | --quick' if args.quick else ''}{extra}"
    )
    print(f"loss: {LOSSES[args.loss]}")


def print_file_header(title: str, skipped: dict[str, str]) -> None:
    """The header of a file benchmark (no embedding workload): ``title``, the python and
    numpy versions, the load average, and one line per contender in ``skipped`` (name ->
    why it did not run)."""
    import numpy as np

    print(f"# {title}")
    print(
        f"# python {sys.version.split()[0]}, numpy {np.__version__}, "
        f"load average {load_average():.2f}"
    )
    for name, reason in skipped.items():
        print(f"# skipped {name}: {reason}")


VERDICTS: list[str] = []
"""The verdict lines printed so far by :func:`print_verdict`, for the summary."""


def print_verdict(line: str) -> None:
    """Print ``line`` (what was measured, the figure and its :func:`verdict`) and keep it for
    the summary's ``"verdicts"``: the READMEs quote these lines as printed."""
    print(line, flush=True)
    VERDICTS.append(line)


def emit_summary(summary: dict, path: str | None, prefix: str = SUMMARY_PREFIX) -> None:
    """Print ``prefix + json`` of the environment and ``summary`` (and write it to ``path``);
    the lines of :func:`print_verdict` go under ``"verdicts"`` unless ``summary`` has its own.
    """
    env = {**environment(), "loadavg_1min_start": round(START_LOAD, 2)}
    summary = {"environment": env, **summary}
    if VERDICTS and "verdicts" not in summary:
        summary["verdicts"] = list(VERDICTS)
    text = json.dumps(summary, sort_keys=False, default=_json_default)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
    print(prefix + text, flush=True)


def _json_default(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (torch.device, torch.dtype)):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


QUIET_LOAD = 1.0
"""A verdict is given only when the 1-minute load average is below this: on a busy machine
peers slow down by different amounts (DGL's OpenMP threads spin), so a loaded run is
reported beside a quiet one, never as the claim."""


def load_average() -> float:
    """The 1-minute load average (0.0 where the system has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def wait_until_quiet(limit_seconds: float, poll_seconds: float = 5.0) -> float:
    """Wait until the 1-minute load average is below :data:`QUIET_LOAD`, at most
    ``limit_seconds`` (it decays by half in about 42 s once other work stops); the load
    average then. A benchmark calls it before its first contender, so that work that has
    just ended does not void the verdicts of a run on an otherwise quiet machine."""
    waited = 0.0
    load = load_average()
    if load >= QUIET_LOAD and limit_seconds > 0:
        print(f"# waiting up to {limit_seconds:.0f} s for the load average {load:.2f} to fall "
              f"below {QUIET_LOAD:g}", flush=True)  # fmt: skip
    while load >= QUIET_LOAD and waited < limit_seconds:
        time.sleep(poll_seconds)
        waited += poll_seconds
        load = load_average()
    return load


START_LOAD = load_average()
"""The load average when the benchmark started (this module is imported first thing): the
other work on the machine. The benchmark's own threads raise the load while it runs (two
busy threads make 2 on a 2-core machine), so verdicts read this one."""


def verdict(
    value: float,
    target: float,
    *,
    at_most: bool = False,
    unit: str = "x",
    load: float | None = None,
) -> str:
    """The verdict of one target, worded the same in every benchmark.

    Parameters
    ----------
    value, target : float
        The measured figure and the target it is held to.
    at_most : bool
        The target is an upper bound (times, memory); default a lower bound (speed-ups).
    unit : str
        Printed after both numbers.
    load : float, optional
        The load average of the other work on the machine (default: :data:`START_LOAD`).

    Returns
    -------
    str
        ``"target >= 1.5x: MET (load before the run 0.31)"``, ``"... NOT MET ..."``, or on
        a busy machine ``"target >= 1.5x: no verdict, load before the run 3.20 > 1 (would be
        MET)"``.

    Examples
    --------
    >>> verdict(2.0, 1.5, load=0.3)
    'target >= 1.5x: MET (load before the run 0.30)'
    >>> verdict(9.0, 8.0, at_most=True, unit=" s", load=0.3)
    'target <= 8 s: NOT MET (load before the run 0.30)'
    >>> verdict(2.0, 1.5, load=2.5)
    'target >= 1.5x: no verdict, load before the run 2.50 > 1 (would be MET)'
    """
    load = START_LOAD if load is None else load
    met = value <= target if at_most else value >= target
    word = "MET" if met else "NOT MET"
    bound = f"target {'<=' if at_most else '>='} {target:g}{unit}"
    if load >= QUIET_LOAD:
        return (
            f"{bound}: no verdict, load before the run {load:.2f} > {QUIET_LOAD:g} "
            f"(would be {word})"
        )
    return f"{bound}: {word} (load before the run {load:.2f})"


def target_mark(value: float, target: float) -> str:
    """:func:`verdict` of a speed-up against a lower bound (``"target >= 4x: MET ..."``)."""
    return verdict(value, target)


def trace_file(directory: str | None, label: str) -> str | None:
    """Path of a Chrome trace named after ``label`` in ``directory`` (created); ``None``
    without a directory."""
    if not directory:
        return None
    os.makedirs(directory, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    return os.path.join(directory, f"{safe}.json")
