"""MkDocs hook: links from the documentation to files of the repository outside ``docs/``.

The guides link their numbers to the files that hold them (``../benchmarks/results/*.json``)
and name scripts and examples by relative links, which GitHub follows as written. MkDocs
only knows the files of ``docs/``: this hook copies every such target into the site under
``repo/`` (as a plain file: a linked ``.md`` is not rendered as a page) and points the
link there. A link to a file that does not exist, or that leaves the repository, is a
warning, so ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.repo_links")

_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")  # ](target#anchor)
_FENCE = re.compile(r"^\s*(```|~~~)")
PREFIX = "repo"


class RepoFile(File):
    """A file of the repository copied as is (never rendered, even a ``.md``)."""

    def is_documentation_page(self) -> bool:
        return False


def _outside_targets(page_uri: str, markdown: str) -> dict[str, str]:
    """Relative link targets of ``markdown`` (a page at ``page_uri`` in the docs) that leave
    the docs folder: the link as written -> its path from the repository root."""
    targets = {}
    for line in _prose_lines(markdown):
        for match in _LINK.finditer(line):
            url = match.group(2)
            if "://" in url or url.startswith(("/", "mailto:")):
                continue
            path = posixpath.normpath(posixpath.join(posixpath.dirname(page_uri), url))
            if path.startswith("../"):
                targets[url] = path[len("../") :]
    return targets


def _prose_lines(markdown: str):
    """The lines of ``markdown`` outside fenced code blocks."""
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def _roots(config) -> tuple[Path, Path]:
    docs = Path(config["docs_dir"]).resolve()
    return docs, docs.parent


def on_files(files: Files, config) -> Files:
    docs, root = _roots(config)
    wanted: set[str] = set()
    for file in files.documentation_pages():
        text = Path(file.abs_src_path).read_text(encoding="utf-8")
        wanted.update(_outside_targets(file.src_uri, text).values())
    for path in sorted(wanted):
        source = (root / path).resolve()
        if root not in source.parents or docs in source.parents:
            continue  # reported per page below
        if source.is_file():
            files.append(RepoFile.generated(config, f"{PREFIX}/{path}", abs_src_path=str(source)))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    docs, root = _roots(config)
    targets = _outside_targets(page.file.src_uri, markdown)
    if not targets:
        return markdown
    rewritten = {}
    for url, path in targets.items():
        if f"{PREFIX}/{path}" not in files.src_uris:
            where = (root / path).resolve()
            why = "leaves the repository" if root not in where.parents else "is not a file"
            log.warning(f"Doc file '{page.file.src_uri}' links to '{url}', which {why}")
            continue
        page_dir = posixpath.dirname(page.file.src_uri) or "."
        rewritten[url] = posixpath.relpath(f"{PREFIX}/{path}", page_dir)

    out, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            line = _LINK.sub(
                lambda m: (
                    m.group(1)
                    + rewritten.get(m.group(2), m.group(2))
                    + (m.group(3) or "")
                    + m.group(4)
                ),
                line,
            )
        out.append(line)
    return "".join(out)
