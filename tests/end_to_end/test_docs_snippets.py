"""Every ```` ```python ```` block of the README and of ``docs/`` runs as written: each
Markdown file's blocks in order, as one script (``docs_snippets.py``), in a temporary
working directory, offline -- the Planetoid files from ``GRAPHEMB_PLANETOID_DIR``, any
download pointed at a closed port. Blocks that start several processes start them (two
gloo ranks on CPU). The README stays short and its links lead somewhere."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import docs_snippets
import pytest
from helpers import REPO, planetoid_dir

MAX_SKIPPED = 2  # blocks marked <!-- snippet: skip reason="..." --> in all the files
FILE_TIMEOUT_S = 180
README_MAX_LINES = 300
README_MAX_WIDTH = 120

FILES = [
    path
    for path in docs_snippets.markdown_files()
    if any(block.skip is None for block in docs_snippets.blocks(path))
]
RUN = pytest.mark.one_stack(
    "modern",
    "the documentation's code blocks (a minute), the same code on both stacks; they run on "
    "the stack that builds the documentation",
)


def _name(path: Path) -> str:
    return str(path.relative_to(REPO))


def _planetoid() -> str | None:
    try:
        return planetoid_dir()
    except pytest.skip.Exception:
        return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[Path, dict]:
    """Runs every file's script once (one runner process, a fork per file): path ->
    ``{"rc", "seconds", "log", "cwd", "script"}``; files that need the Planetoid files
    are left out where there are none."""
    root = tmp_path_factory.mktemp("snippets")
    folder = _planetoid()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the tests' own
    env.update(
        GRAPHEMB_CACHE_DIR=str(root / "cache"),
        GRAPHEMB_PLANETOID_URL="http://127.0.0.1:9/",  # offline: a download fails at once
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
        MPLBACKEND="Agg",
    )
    if folder:
        env["GRAPHEMB_PLANETOID_DIR"] = folder
    jobs = {}
    for path in FILES:
        if folder is None and "load_planetoid" in path.read_text():
            continue
        name = _name(path).replace("/", "__")
        cwd = root / name
        cwd.mkdir()
        script = root / "scripts" / f"{name}.py"
        script.parent.mkdir(exist_ok=True)
        script.write_text(docs_snippets.script(path))
        jobs[path] = {"script": str(script), "cwd": str(cwd), "log": str(root / f"{name}.log")}
    manifest = root / "manifest.json"
    manifest.write_text(json.dumps({"jobs": list(jobs.values()), "timeout": FILE_TIMEOUT_S}))
    results = root / "results.json"
    runner = subprocess.run(
        [sys.executable, docs_snippets.__file__, str(manifest), str(results)],
        env=env,
        capture_output=True,
        text=True,
        timeout=FILE_TIMEOUT_S * len(jobs) + 120,
    )
    assert runner.returncode == 0, f"the snippet runner failed:\n{runner.stdout}{runner.stderr}"
    outcome = json.loads(results.read_text())
    return {path: {**job, **outcome[job["script"]]} for path, job in jobs.items()}


@RUN
@pytest.mark.parametrize("path", FILES, ids=_name)
def test_the_code_blocks_of_a_page_run_as_written(path, runs):
    if path not in runs:
        pytest.skip("its code loads Cora: set GRAPHEMB_PLANETOID_DIR to the Planetoid files")
    run = runs[path]
    log = Path(run["log"]).read_text(errors="replace")
    assert run["rc"] == 0, (
        f"the code blocks of {_name(path)} exit with {run['rc']} after {run['seconds']} s "
        f"(line numbers are those of {_name(path)}; rerun: cd {run['cwd']} && "
        f"{sys.executable} {run['script']}):\n{log}"
    )


def test_few_blocks_are_skipped_and_each_says_why():
    found = [b for path in docs_snippets.markdown_files() for b in docs_snippets.blocks(path)]
    skipped = [f"{block.where}: {block.skip}" for block in found if block.skip is not None]
    assert len(found) >= 15, f"only {len(found)} python blocks found: is the extractor broken?"
    assert len(skipped) <= MAX_SKIPPED, "blocks that do not run:\n" + "\n".join(skipped)


def test_a_script_keeps_the_line_numbers_of_its_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 1\n```\n\ntext\n\n"
        '<!-- snippet: skip reason="needs 2 GPUs" -->\n\n```python\nraise SystemExit(3)\n```\n'
        "```bash\nexit 1\n```\n```python\nprint(x)\n\nassert x == 1\n```\n"
    )
    blocks = docs_snippets.blocks(page)
    assert [(b.line, b.skip) for b in blocks] == [(4, None), (12, "needs 2 GPUs"), (18, None)]
    lines = docs_snippets.script(page).split("\n")
    assert lines[3] == "x = 1" and lines[17] == "print(x)" and lines[19] == "assert x == 1"
    assert "SystemExit" not in "\n".join(lines)
    page.write_text("<!-- snippet: skipp -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="page.md:1: malformed snippet marker"):
        docs_snippets.blocks(page)
    page.write_text("```python\nx = 1\n")
    with pytest.raises(ValueError, match="page.md:1: ```python block never closed"):
        docs_snippets.blocks(page)


def test_the_readme_is_short_and_its_links_lead_somewhere():
    text = (REPO / "README.md").read_text()
    lines = text.split("\n")
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    wide = [i + 1 for i, line in enumerate(lines) if len(line) > README_MAX_WIDTH]
    assert not wide, f"README.md: lines over {README_MAX_WIDTH} characters: {wide}"
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert local, "README.md links to no guide"
    missing = [t for t in local if not (REPO / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
