"""The documentation builds with warnings as errors (``mkdocs build --strict``, as ``make
docs``): guides, their links (into the repository too) and the API reference read from the
docstrings. Runs where the ``docs`` extra is installed (the modern stack)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import REPO

BUILD_TIMEOUT_S = 240


def test_the_documentation_builds_without_warnings(tmp_path):
    for module in ("mkdocs", "mkdocstrings_handlers.python", "material"):
        pytest.importorskip(
            module, reason="the docs extra is not installed here (the modern stack has it)"
        )
    site = tmp_path / "site"
    config = ["--config-file", str(REPO / "mkdocs.yml"), "--site-dir", str(site)]
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", *config],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}{build.stderr}"
    reference = (site / "reference" / "graphemb" / "index.html").read_text()
    assert "all_get_embedding" in reference, "the API reference lacks NodeEmbedding's methods"
    # a number's results file is copied beside the pages that link to it
    assert (site / "repo" / "benchmarks" / "results" / "sparse_step.json").is_file()
