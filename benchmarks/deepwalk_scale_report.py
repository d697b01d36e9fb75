"""The report of ``bench_deepwalk_scale.py``: its table and verdict lines from the rows of
its contenders (one per contender, shape and size)."""

from __future__ import annotations

from harness.report import print_table, verdict

GIB = 1024**3
#: Seconds between two readings of a contender's resident memory from outside it.
READING_INTERVAL = 0.05


def print_rows(rows: list[dict]) -> None:
    table = []
    for r in rows:
        if "failed" in r:
            table.append([r["shape"], f"{r['nodes']:,}", r["contender"], "failed"] + [""] * 7)
            continue
        table.append([
            r["shape"], f"{r['nodes']:,}", r["contender"], f"{r['tokens'] / 1e6:.1f}M",
            f"{r['seconds']:.1f}", f"{r['tokens_per_second'] / 1e3:.0f}k",
            f"{_peak(r) / GIB:.2f}", f"{(_peak(r) - _start(r)) / GIB:.2f}",
            f"{r['bound_bytes'] / GIB:.2f}", f"{r['micro_f1']:.3f} / {r['macro_f1']:.3f}",
            f"{r['load_before']:.2f}",
        ])  # fmt: skip
    print_table(
        ["shape", "nodes", "contender", "tokens", "seconds", "tokens/s", "peak GiB",
         "peak-warm GiB", "bound GiB", "Micro / Macro-F1", "load"],
        table,
    )  # fmt: skip


def _find(rows: list[dict], contender: str, shape: str, nodes: int) -> dict | None:
    return next(
        (r for r in rows if (r["contender"], r["shape"], r["nodes"]) == (contender, shape, nodes)
         and "failed" not in r),
        None,
    )  # fmt: skip


def verdict_lines(rows: list[dict], load: float) -> list[str]:
    """The targets of the module's docstring over the rows there are (a target whose rows
    are missing is left out), judged at ``load``: the load average before the run."""
    lines = []
    ours = [c for c in dict.fromkeys(r["contender"] for r in rows) if c != "gensim"]
    for contender in ours:
        for shape in dict.fromkeys(r["shape"] for r in rows):
            large, small = (contender, shape, 1_000_000), (contender, shape, 10_000)
            lines += _ratio_line(
                rows, large, small, "tokens_per_second",
                f"{contender} {shape}: tokens/s at 1M nodes / at 10k nodes", 0.7, load,
                at_most=False,
            )  # fmt: skip
            for nodes in (100_000, 1_000_000):
                lines += _ratio_line(
                    rows, (contender, shape, nodes), ("gensim", shape, nodes), "seconds",
                    f"{contender} {shape} {nodes:,} nodes: time / gensim's", 0.2, load,
                    at_most=True,
                )  # fmt: skip
        lines += _quality_line(rows, contender, load) + _largest_lines(rows, contender, load)
    return lines


def _ratio_line(
    rows: list[dict],
    mine: tuple,
    peer: tuple,
    key: str,
    what: str,
    target: float,
    load: float,
    at_most: bool,
) -> list[str]:
    """``[what ratio (mine's key / peer's key); verdict]`` when both rows (contender, shape,
    nodes) are there, else ``[]``."""
    a, b = _find(rows, *mine), _find(rows, *peer)
    if not (a and b):
        return []
    ratio = a[key] / b[key]
    return [
        f"{what} {ratio:.3f} ({a[key]:,.0f} / {b[key]:,.0f}); "
        + verdict(ratio, target, at_most=at_most, load=load)
    ]


def _quality_line(rows: list[dict], contender: str, load: float) -> list[str]:
    """The worst F1 difference to gensim over the graphs both ran, in points."""
    worst, where = float("inf"), ""
    for r in rows:
        peer = _find(rows, "gensim", r["shape"], r["nodes"])
        if r["contender"] != contender or "failed" in r or peer is None:
            continue
        for key in ("micro_f1", "macro_f1"):
            gap = 100 * (r[key] - peer[key])
            if gap < worst:
                worst, where = gap, f"{r['shape']} {r['nodes']:,} {key}"
    if not where:
        return []
    return [
        f"{contender}: worst F1 difference to gensim {worst:+.2f} points ({where}, one seed); "
        + verdict(worst, -1.0, unit=" points", load=load)
    ]


def _largest_lines(rows: list[dict], contender: str, load: float) -> list[str]:
    """At 10M nodes: the time at most 15 min, the peak (less the process's start) at most
    the bound."""
    lines = []
    for r in rows:
        if r["contender"] != contender or r["nodes"] < 10_000_000 or "failed" in r:
            continue
        lines.append(
            f"{contender} {r['shape']} {r['nodes']:,} nodes: {r['seconds']:.0f} s; "
            + verdict(r["seconds"], 900, at_most=True, unit=" s", load=load)
        )
        used = (_peak(r) - _start(r)) / GIB
        lines.append(
            f"{contender} {r['shape']} {r['nodes']:,} nodes: peak {_peak(r) / GIB:.2f} GiB, "
            f"less the start {used:.4f} GiB, bound {r['bound_bytes'] / GIB:.4f} GiB; "
            + verdict(used, r["bound_bytes"] / GIB, at_most=True, unit=" GiB", load=load)
        )
        if "read_peak_bytes" in r:  # the peak's three figures, to the bound
            over = {
                name: (r[key] - _start(r) - r["bound_bytes"]) / 2**20
                for name, key in (("read from outside", "read_peak_bytes"),
                                  ("ru_maxrss", "peak_bytes"), ("VmHWM", "high_water_bytes"))
            }  # fmt: skip
            lines.append(
                f"{contender} {r['shape']} {r['nodes']:,} nodes: the peak less the start, to "
                "the bound: "
                + ", ".join(f"{name} {mib:+.2f} MiB" for name, mib in over.items())
                + f" ({r['readings']:,} readings, every {READING_INTERVAL * 1e3:.0f} ms)"
            )
        if "page_overhang_bytes" in r:  # pages, where the bound counts bytes
            lines.append(
                f"{contender} {r['shape']} {r['nodes']:,} nodes: whole pages beyond the bytes "
                f"of the graph's arrays and the output table, held at the end: "
                f"{r['page_overhang_bytes'] / 1024:.1f} KiB (their allocator's size words and "
                "their last pages; the input table and the chunk of walks are freed by then)"
            )
        if "warm_bytes" in r:  # what the warm-up run left resident, beside the verdict
            lines.append(
                f"{contender} {r['shape']} {r['nodes']:,} nodes: the start after the imports "
                f"alone is {(r['warm_bytes'] - r['start_bytes']) / GIB:.3f} GiB lower (code "
                f"paged in, threads and arenas of a small run); the peak less it "
                f"{(_peak(r) - r['start_bytes']) / GIB:.3f} GiB"
            )
        if "held_bytes" in r:  # the rest: state per node (noise, subsampling, walker)
            lines.append(
                f"{contender} {r['shape']} {r['nodes']:,} nodes: the graph, the tables as held "
                f"(output table {r['output_dtype']}) and a chunk of walks "
                f"{r['held_bytes'] / GIB:.2f} GiB; the peak less the start is "
                f"{used - r['held_bytes'] / GIB:+.2f} GiB from it"
            )
    return lines


def _peak(row: dict) -> int:
    """The run's peak resident memory: the largest of the exact readings from outside it
    (every :data:`READING_INTERVAL` seconds) and the kernel's own high-water marks
    (``ru_maxrss``, ``VmHWM``), each of which can fall short of it: the readings miss what
    is held between two of them, the marks what is given back before the kernel records
    them, and they read its page counters without their pending per-CPU updates
    (``probe_rss_accounting.py``). Rows from before the readings: ``ru_maxrss``."""
    marks = (row["peak_bytes"], row.get("high_water_bytes", 0))
    return max(row.get("read_peak_bytes", 0), *marks)


def _start(row: dict) -> int:
    """The resident memory the run's is measured from: after the warm-up run (rows before
    it: after the imports)."""
    return row.get("warm_bytes", row["start_bytes"])
