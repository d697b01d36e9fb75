#!/usr/bin/env python
"""Rewrite the result tables of the documentation from the files in ``benchmarks/results/``.

A rendered region is delimited by two comment lines::

    <!-- results: NAME -->
    ...rendered text, replaced on every run...
    <!-- /results -->

and ``NAME`` is one of :data:`REGIONS`, each a function of the results folder. The files
rewritten are :data:`FILES` (paths from the repository root).

    python benchmarks/render_readme.py            # rewrite the regions
    python benchmarks/render_readme.py --check    # exit 1, naming the stale files, if any
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
if str(BENCHMARKS) not in sys.path:  # deepwalk_panel and harness, as the benchmarks import them
    sys.path.insert(0, str(BENCHMARKS))

ROOT = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"
FILES = ("docs/performance.md", "benchmarks/README.md", "benchmarks/results/deepwalk_quality.md")

_OPEN = re.compile(r"^<!-- results: ([\w-]+) -->$")
_CLOSE = "<!-- /results -->"


def _read_json(results: Path, name: str) -> dict:
    path = results / name
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        raise SystemExit(f"{path}: cannot read the results ({error})") from error


def deepwalk_panel(results: Path, name: str = "deepwalk_panel.json") -> list[str]:
    """The DeepWalk panel against gensim (``deepwalk_panel.json``, written by
    ``bench_deepwalk_quality.py --json``; ``name``: another such file)."""
    from deepwalk_panel import markdown_table

    run = _read_json(results, name)
    trainer = next(r["trainer"] for r in run["rows"] if r["trainer"] != "gensim")
    return markdown_table(run["rows"], run["ratios"], trainer)


def deepwalk_panel_verdicts(results: Path, name: str = "deepwalk_panel.json") -> list[str]:
    """The verdict lines of the same run, with the load average before it."""
    from deepwalk_panel import verdict_lines

    run = _read_json(results, name)
    return ["```", *verdict_lines(run["rows"], run["ratios"], load=run["load_before"]), "```"]


def sampler_panel(results: Path, name: str = "sampler_panel.json") -> list[str]:
    """The sampler against DGL and GraphBolt per graph shape (``sampler_panel.json``,
    written by ``bench_sampler.py --panel --json``; ``name``: another such file)."""
    run = _read_json(results, name)
    lines = [
        "| graph | edges | graphemb ms | DGL ms | GraphBolt ms "
        "| speed-up over the faster peer [per round] | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for shape in run["shapes"]:
        times = shape["results"]
        ms = {n: f"{t['median_ms']:.1f}" for n, t in times.items()}
        faster = shape["ratios"][shape["faster_peer"]]
        cells = [
            shape["graph"],
            f"{shape['edges']:,}",
            ms.get("graphemb blocks", "-"),
            ms.get("dgl blocks", "-"),
            ms.get("graphbolt blocks", "-"),
            f"{faster['ratio']:.2f}x [{faster['round_min']:.2f}-{faster['round_max']:.2f}]",
            shape.get("verdict", "-"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def measured(results: Path) -> list[str]:
    """The "Measured here" table of ``docs/performance.md``, one row per benchmark
    (:mod:`readme_rows`)."""
    import readme_rows

    return readme_rows.measured(results)


REGIONS: dict[str, Callable[[Path], list[str]]] = {
    "measured": measured,
    "deepwalk_panel": deepwalk_panel,
    "deepwalk_panel_verdicts": deepwalk_panel_verdicts,
    # the torch backend's panel (bench_deepwalk_quality.py --trainers gensim,torch)
    "deepwalk_panel_torch": lambda results: deepwalk_panel(results, "deepwalk_panel_torch.json"),
    "deepwalk_panel_torch_verdicts": lambda results: deepwalk_panel_verdicts(
        results, "deepwalk_panel_torch.json"
    ),
    "sampler_panel": sampler_panel,
    # the same panel with two processes spinning on the cores (bench_sampler.py --busy 2)
    "sampler_panel_busy": lambda results: sampler_panel(results, "sampler_panel_busy.json"),
}


def render(text: str, results: Path = RESULTS, where: str = "<text>") -> str:
    """``text`` with every region rewritten from ``results``; an unknown name, a region
    left open or a closing line without its opening one is an error naming
    ``where:line``."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        if line.strip() == _CLOSE:
            raise ValueError(f"{where}:{i + 1}: {_CLOSE} without an opening line")
        match = _OPEN.match(line.strip())
        i += 1
        if not match:
            continue
        name = match.group(1)
        if name not in REGIONS:
            raise ValueError(
                f"{where}:{i}: unknown results region {name!r} (known: {', '.join(REGIONS)})"
            )
        end = next((j for j in range(i, len(lines)) if lines[j].strip() == _CLOSE), None)
        if end is None:
            raise ValueError(f"{where}:{i}: region {name!r} is never closed by {_CLOSE}")
        out += ["", *REGIONS[name](results), "", lines[end]]
        i = end + 1
    return "\n".join(out)


def stale(root: Path = ROOT, results: Path = RESULTS) -> dict[str, str]:
    """The files of :data:`FILES` whose regions differ from their rendering: path -> the
    rendered text."""
    changed = {}
    for name in FILES:
        path = root / name
        text = path.read_text()
        rendered = render(text, results, where=name)
        if rendered != text:
            changed[name] = rendered
    return changed


def main(argv: list[str] | None = None) -> int:
    from harness import cli

    parser = cli.parser(__doc__.split("\n\n")[0], allocator=False)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file is stale"
    )
    args = parser.parse_args(argv)
    changed = stale()
    if args.check:
        for name in changed:
            print(f"{name}: stale; run python benchmarks/render_readme.py")
        return 1 if changed else 0
    for name, text in changed.items():
        (ROOT / name).write_text(text)
        print(f"{name}: rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
