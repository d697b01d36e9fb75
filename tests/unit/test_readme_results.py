"""The result tables of the documentation (``docs/performance.md``, ``benchmarks/README.md``,
``benchmarks/results/deepwalk_quality.md``) are those of ``benchmarks/results/``: in sync
now, and rendered afresh when a result changes (``benchmarks/render_readme.py``; no
benchmark runs)."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
PERFORMANCE = BENCHMARKS.parent / "docs" / "performance.md"  # the "Measured here" table
sys.path.insert(0, str(BENCHMARKS))

import readme_rows  # noqa: E402
import render_readme  # noqa: E402


def _cells(text: str, first: str) -> list[str]:
    """The cells of the table row of ``text`` whose first cell is ``first``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r}")


def test_the_documents_are_in_sync_with_the_results():
    assert render_readme.stale() == {}, "run: python benchmarks/render_readme.py"
    assert render_readme.main(["--check"]) == 0


def test_every_row_links_the_results_files_it_was_rendered_from():
    rendered = "\n".join(readme_rows.measured(BENCHMARKS / "results"))
    links = re.findall(r"\]\((\.\./benchmarks/results/[^)]+)\)", rendered)
    assert len(links) >= len(rendered.splitlines()) - 2  # at least one per row
    for link in links:
        assert (PERFORMANCE.parent / link).is_file(), link


def _changed_results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    results.mkdir()
    for path in (BENCHMARKS / "results").glob("*.json"):
        shutil.copy(path, results / path.name)
    return results


def test_a_changed_deepwalk_result_changes_the_panel_table(tmp_path):
    results = _changed_results(tmp_path)
    run = json.loads((results / "deepwalk_panel.json").read_text())
    cora = [r for r in run["rows"] if r["graph"] == "cora"]
    gensim = {r["seed"]: r for r in cora if r["trainer"] == "gensim"}
    compiled = {r["seed"]: r for r in cora if r["trainer"] == "compiled"}
    gensim[0]["micro@0.5"] -= 0.2  # gensim's Cora score at 50 % labels falls 20 points on seed 0
    (results / "deepwalk_panel.json").write_text(json.dumps(run))

    readme = PERFORMANCE.read_text()
    rendered = render_readme.render(readme, results, where="docs/performance.md")
    cells = _cells(rendered, "cora")
    # independent arithmetic on the changed rows: the mean over seeds, and the paired gap
    mean = statistics.mean(r["micro@0.5"] for r in gensim.values())
    assert cells[2].split(" / ")[1] == f"{mean:.3f}"
    gap = statistics.mean(100 * (compiled[s]["micro@0.5"] - gensim[s]["micro@0.5"]) for s in gensim)
    assert cells[3].split(" / ")[1].startswith(f"{gap:+.1f} ± ")
    assert cells != _cells(readme, "cora")
    assert "docs/performance.md" in render_readme.stale(results=results)
    # every other graph's row is unchanged
    assert _cells(rendered, "dense") == _cells(readme, "dense")


def test_a_changed_sampler_result_changes_the_sampler_table(tmp_path):
    results = _changed_results(tmp_path)
    run = json.loads((results / "sampler_panel.json").read_text())
    shape = next(s for s in run["shapes"] if s["graph"] == "symmetric")
    shape["results"]["graphemb blocks"]["median_ms"] = 12.34
    (results / "sampler_panel.json").write_text(json.dumps(run))
    text = (BENCHMARKS / "README.md").read_text()
    assert _cells(render_readme.render(text, results), "symmetric")[2] == "12.3"
    assert _cells(text, "symmetric")[2] != "12.3"


@pytest.mark.parametrize(
    "text, message",
    [
        ("a\n<!-- results: nope -->\n<!-- /results -->\n", "f.md:2: unknown results region"),
        ("<!-- results: sampler_panel -->\nrow\n", "f.md:1: region 'sampler_panel' is never"),
        ("a\nb\n<!-- /results -->\n", "f.md:3: <!-- /results --> without an opening line"),
    ],
)
def test_malformed_regions_are_refused_with_their_line(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        render_readme.render(text, BENCHMARKS / "results", where="f.md")


MEMORY_RUN = {
    "environment": {
        "date": "2026-01-02 03:04 UTC",
        "loadavg_1min": 1.5,
        "loadavg_1min_start": 0.25,
    },
    "nodes": 1000,
    "edges": 5000,
    "seconds": 12.4,
    "peak_bytes": 3 * 2**30,
    "graph_bytes": 2**29,
    "tables_bytes": 2**30,
    "bound_bytes": 4 * 2**30,
    "verdict": "target <= 4 GiB: MET (load before the run 0.25)",
}


def test_a_row_is_rendered_from_its_results_file(tmp_path):
    (tmp_path / "deepwalk_memory.json").write_text(json.dumps(MEMORY_RUN))
    expected = (
        "| `python -m graphemb deepwalk` on a 1,000-node / 5,000-edge edge list, peak resident "
        "memory (`bench_deepwalk_memory.py`; "
        "[`results/deepwalk_memory.json`](../benchmarks/results/deepwalk_memory.json)) "
        "| peak 3.00 GiB, 12 s "
        "| bound: the graph 0.50 GiB + its two tables 1.00 GiB = 4.00 GiB "
        "| 0.75 of the bound "
        "| target <= 4 GiB: MET (load before the run 0.25) "
        "| 2026-01-02 03:04 UTC, load 0.25 at the start, 1.5 at the end |"
    )
    assert readme_rows.deepwalk_memory(tmp_path) == [expected]


def test_a_missing_key_is_an_error_naming_the_file(tmp_path):
    run = dict(MEMORY_RUN)
    del run["peak_bytes"]
    (tmp_path / "deepwalk_memory.json").write_text(json.dumps(run))
    path = tmp_path / "deepwalk_memory.json"
    with pytest.raises(readme_rows.ResultsError, match=f"{path}: no key 'peak_bytes'"):
        readme_rows.deepwalk_memory(tmp_path)
    with pytest.raises(readme_rows.ResultsError, match="e2e_powerlaw-in.json: cannot read"):
        readme_rows.end_to_end(tmp_path)


def test_the_end_to_end_row_follows_its_three_files(tmp_path):
    results = _changed_results(tmp_path)
    path = results / "e2e_symmetric.json"
    run = json.loads(path.read_text())
    run["ms_per_batch"]["dgl documented loop 1 proc"]["median_ms"] = 7654.4
    run["verdicts"] = ["speed-up x: 9.00x  target >= 4x: no verdict, load before the run 1.50 > 1"]
    run["environment"]["date"] = "2027-05-06 07:08 UTC"
    path.write_text(json.dumps(run))
    cells = _cells(
        render_readme.render("<!-- results: measured -->\n<!-- /results -->", results),
        readme_rows.end_to_end(results)[0].split(" | ")[0].strip("| "),
    )
    assert cells[2].split("<br>")[0].endswith(" / 7654 ms/batch")
    assert cells[4].split("<br>")[-1] == (
        "symmetric: speed-up x: 9.00x  target >= 4x: no verdict, load before the run 1.50 > 1"
    )
    assert cells[5].split("<br>")[-1].startswith("symmetric: 2027-05-06 07:08 UTC, load ")
    del run["phases"]
    path.write_text(json.dumps(run))
    with pytest.raises(readme_rows.ResultsError, match=f"{path}: no key 'phases'"):
        readme_rows.end_to_end(results)
    # a run written before the benchmarks kept their verdict lines: no row without them
    shutil.copy(BENCHMARKS / "results" / "e2e_symmetric.json", path)
    run = json.loads((results / "e2e_powerlaw-out.json").read_text())
    del run["verdicts"]
    (results / "e2e_powerlaw-out.json").write_text(json.dumps(run))
    with pytest.raises(readme_rows.ResultsError, match="e2e_powerlaw-out.json: no key 'verdicts'"):
        readme_rows.end_to_end(results)


def test_a_benchmark_summary_keeps_its_printed_verdict_lines(tmp_path, monkeypatch, capsys):
    from harness import report

    monkeypatch.setattr(report, "VERDICTS", [])
    line = "speed-up a over b: 2.00x  " + report.verdict(2.0, 1.5, load=0.25)
    report.print_verdict(line)
    report.emit_summary({"bench": "x"}, str(tmp_path / "x.json"))
    written = json.loads((tmp_path / "x.json").read_text())
    assert written["verdicts"] == [
        "speed-up a over b: 2.00x  target >= 1.5x: MET (load before the run 0.25)"
    ]
    assert capsys.readouterr().out.startswith(line + "\n")
    assert written["environment"]["loadavg_1min_start"] == round(report.START_LOAD, 2)
    # a summary that brings its own verdicts keeps them
    report.emit_summary({"verdicts": ["own"]}, str(tmp_path / "y.json"))
    assert json.loads((tmp_path / "y.json").read_text())["verdicts"] == ["own"]
