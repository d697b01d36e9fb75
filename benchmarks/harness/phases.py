"""Per-phase profiles from ``torch.profiler.record_function`` spans.

The harness opens one span per phase of a step -- :data:`PHASE_SPANS`: lookup, loss,
backward, step -- inside a span per step (:data:`ITERATION_SPAN`), runs a few steps under
``torch.profiler.profile`` and reads the spans back from the profile's event tree. Spans
that the libraries open themselves (names starting with :data:`LIBRARY_SPAN_PREFIXES`,
e.g. ``graphemb_kernels::adam_`` of the fused CPU kernels, or ``graphemb::push`` if the
core has it) become sub-phases of the phase they run in, at any depth. Whatever a phase's
spans leave out shows up as its "(rest)", with the operators that spent it (self CPU
time). Nothing is patched: with fewer library spans the table is coarser, not wrong, and
the same spans show up in a trace (``--trace DIR``) opened in Perfetto or chrome://tracing.

Spans are CPU wall time. On a GPU the contenders synchronize at the end of each phase
(inside its span), so a phase holds its device work; library sub-spans on a GPU measure
the host side only.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Protocol

import torch
from torch.profiler import ProfilerActivity, record_function

from .report import print_table

ITERATION_SPAN = "bench::iteration"
PHASE_SPANS = {
    "lookup": "bench::lookup",
    "loss": "bench::loss",
    "backward": "bench::backward",
    "step": "bench::step",
    # the end-to-end training loop (bench_end_to_end.py)
    "sample": "bench::sample",
    "forward": "bench::forward",
    "sparse_step": "bench::sparse_step",
    "dense_step": "bench::dense_step",
}
_LABELS = {
    "bench::lookup": "lookup",
    "bench::loss": "loss (forward)",
    "bench::backward": "backward",
    "bench::step": "step",
    "bench::sample": "sampling",
    "bench::forward": "forward",
    "bench::sparse_step": "sparse step",
    "bench::dense_step": "dense step",
}
# graphemb's own spans, those of its compiled kernels, and torch.optim.Optimizer.step's
# ("Optimizer.step#SparseAdam.step", recorded by torch for every optimizer)
LIBRARY_SPAN_PREFIXES = ("graphemb::", "graphemb_kernels::", "Optimizer.")
SEP = " > "  # path of a sub-phase: "step > graphemb::push > graphemb::mailbox"


class Profiled(Protocol):
    name: str

    def profile(self, i: int) -> None: ...


def profile_phases(
    contender: Profiled, start: int, count: int, *, trace_path: str | None = None
) -> dict:
    """Run ``count`` steps of ``contender.profile`` (batches ``start``...) under
    ``torch.profiler``; the per-phase summary of :func:`read_phases`.

    ``trace_path``: also write the profile there as a Chrome trace (JSON).
    """
    gc.collect()
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(start, start + count):
            with record_function(ITERATION_SPAN):
                contender.profile(i)
    if trace_path:
        prof.export_chrome_trace(trace_path)
    return read_phases(prof.events())


def _elapsed_us(event: Any) -> float:
    return float(event.time_range.end - event.time_range.start)


def read_phases(events: Iterable[Any], top_ops: int = 3) -> dict:
    """Per-step durations of the phase spans and of the library spans inside them.

    Parameters
    ----------
    events : iterable of ``torch.autograd.profiler_util.FunctionEvent``
        ``prof.events()`` of a profile in which every step ran inside an
        :data:`ITERATION_SPAN` span.
    top_ops : int
        How many operators to name per phase (largest self CPU time outside its spans).

    Returns
    -------
    dict
        ``steps``; ``phases_ms`` (median ms per step of every phase and sub-phase, keyed by
        path, e.g. ``"step > graphemb_kernels::adam_"``); ``rest_ms`` (median per step of
        what the sub-phases of a phase leave out); ``calls`` (spans per step);
        ``top_ops`` (per phase: ``[operator, ms per step]`` outside its sub-phases);
        ``per_step_ms`` (every step's duration, per path); ``library_spans`` (names seen).
    """
    iterations = [e for e in events if e.name == ITERATION_SPAN]
    if not iterations:
        raise ValueError(f"the profile holds no {ITERATION_SPAN!r} span")
    order: list[str] = []
    calls: dict[str, int] = defaultdict(int)
    op_us: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    library: set[str] = set()
    steps: list[dict[str, float]] = []

    for iteration in iterations:
        durations: dict[str, float] = defaultdict(float)

        def record(event: Any, path: str, durations: dict[str, float] = durations) -> None:
            if path not in calls:
                order.append(path)
            durations[path] += _elapsed_us(event)
            calls[path] += 1

        def visit(event: Any, path: str) -> None:
            for child in event.cpu_children:
                if child.name.startswith(LIBRARY_SPAN_PREFIXES):
                    library.add(child.name)
                    record(child, path + SEP + child.name)
                    visit(child, path + SEP + child.name)
                else:  # an operator: its own time belongs to the innermost span around it
                    op_us[path][child.name] += float(child.self_cpu_time_total)
                    visit(child, path)

        for top in iteration.cpu_children:
            label = _LABELS.get(top.name)
            if label is not None:
                record(top, label)
                visit(top, label)
        steps.append(dict(durations))

    n = len(steps)
    per_step = {p: [s.get(p, 0.0) / 1e3 for s in steps] for p in order}
    rest: dict[str, list[float]] = {}
    for path in order:
        children = _children(path, order)
        if children:
            rest[path] = [
                per_step[path][k] - sum(per_step[c][k] for c in children) for k in range(n)
            ]
    ops = {
        path: [
            [name, us / 1e3 / n]
            for name, us in sorted(found.items(), key=lambda kv: -kv[1])[:top_ops]
        ]
        for path, found in op_us.items()
    }
    return {
        "steps": n,
        "phases_ms": {p: _median(v) for p, v in per_step.items()},
        "rest_ms": {p: _median(v) for p, v in rest.items()},
        "calls": {p: calls[p] / n for p in order},
        "top_ops": ops,
        "per_step_ms": per_step,
        "library_spans": sorted(library),
    }


def _children(path: str, paths: Iterable[str]) -> list[str]:
    depth = path.count(SEP) + 1
    return [p for p in paths if p.startswith(path + SEP) and p.count(SEP) == depth]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _fmt_ops(ops: list) -> str:
    shown = [f"{name} {ms:.2f}" for name, ms in ops if ms >= 0.005]
    return ("ops: " + ", ".join(shown) + " ms") if shown else ""


def print_phases(title: str, phases: dict, total_ms: float | None = None) -> None:
    """The phases as a tree: each phase, its sub-phases (library spans), its "(rest)" and
    the operators that spent the most of the time outside the sub-phases."""
    ms, calls, ops = phases["phases_ms"], phases["calls"], phases["top_ops"]
    paths = list(ms)
    tops = [p for p in _LABELS.values() if p in ms]
    total = sum(ms[p] for p in tops) or float("nan")
    rows: list[list[str]] = []

    def share(value: float) -> str:
        return f"{100 * value / total:.0f}%"

    def emit(path: str, depth: int) -> None:
        children = _children(path, paths)
        notes = []
        if calls.get(path, 0) > 1.01:
            notes.append(f"{calls[path]:.0f} calls")
        if not children:
            notes.append(_fmt_ops(ops.get(path, [])))
        name = path.rsplit(SEP, 1)[-1]
        rows.append(
            [
                "  " * depth + name,
                f"{ms[path]:.2f}",
                share(ms[path]),
                "; ".join(n for n in notes if n),
            ]
        )
        for child in children:
            emit(child, depth + 1)
        if children:
            rest = phases["rest_ms"][path]
            rows.append(
                [
                    "  " * (depth + 1) + "(rest)",
                    f"{rest:.2f}",
                    share(rest),
                    _fmt_ops(ops.get(path, [])),
                ]
            )

    for top in tops:
        emit(top, 0)
    rows.append(
        [
            "sum of phases",
            f"{total:.2f}",
            "100%",
            f"(uninstrumented step: {total_ms:.2f} ms)" if total_ms else "",
        ]
    )
    print(
        f"\n{title} (median over {phases['steps']} steps of torch.profiler record_function spans)"
    )
    print_table(["phase", "ms", "share", "note (ops: self CPU ms, mean per step)"], rows)
    if not any(name.startswith("graphemb") for name in phases["library_spans"]):
        print(
            "  (no graphemb::* or graphemb_kernels::* spans inside the phases: the operators "
            "show where the time goes)"
        )


def operator_table(step: Any, name: str, start: int, count: int, rows: int = 18) -> list[dict]:
    """torch.profiler over ``count`` calls of ``step(i)``: operators by self CPU time."""
    step(start)  # nothing cold inside the profile
    with torch.profiler.profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for i in range(start + 1, start + 1 + count):
            step(i)
    averages = prof.key_averages()
    print(
        f"\ntorch.profiler: {name}, {count} steps, operators by self CPU time "
        f"(totals over the {count} steps; memory = bytes allocated by the op itself)"
    )
    print(averages.table(sort_by="self_cpu_time_total", row_limit=rows))
    top = sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)[:rows]
    return [
        {
            "op": e.key,
            "self_ms_per_step": e.self_cpu_time_total / 1e3 / count,
            "calls_per_step": e.count / count,
            "self_alloc_mb_per_step": getattr(e, "self_cpu_memory_usage", 0) / 1e6 / count,
        }
        for e in top
    ]


def print_rank_phases(profiles: dict[str, list[dict]], results: dict[str, dict]) -> None:
    """:func:`print_phases` of every rank of every contender in ``profiles`` (name -> one
    profile per rank), against the contender's median step in ``results``."""
    for name, per_rank in profiles.items():
        for rank, rank_phases in enumerate(per_rank):
            print_phases(f"Phases of {name}, rank {rank}", rank_phases, results[name]["median_ms"])
