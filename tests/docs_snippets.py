"""The ```` ```python ```` blocks of the README and of ``docs/``, as scripts that run.

Each Markdown file's blocks, in order, make one script: every block's lines sit at the
line numbers they have in the Markdown file (the lines between are blank), so a traceback's
line number is the Markdown file's. A block preceded by the comment
``<!-- snippet: skip reason="..." -->`` (on the nearest non-blank line above it) is left
out, with its reason.

Run as a program, this module is the runner the tests start once
(``python docs_snippets.py MANIFEST RESULTS``): it imports torch, graphemb and the
libraries the snippets share, then forks one child per script -- its own working directory,
its own output file, ``__name__ == "__main__"`` -- so that each script starts as from a
fresh ``python script.py`` without paying those imports each time (torch and PyG take
seconds to import). A child that outlives its timeout is killed with every process it
started.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_FENCE_OPEN = re.compile(r"^```python\s*$")
_FENCE_CLOSE = re.compile(r"^```\s*$")
_SKIP = re.compile(r'^<!--\s*snippet:\s*skip\s+reason="([^"]+)"\s*-->\s*$')
_ANY_MARKER = re.compile(r"^<!--\s*snippet:")
# Imported once by the runner before it forks (those that are installed).
PRELOAD = (
    "torch",
    "graphemb",
    "graphemb.optim",
    "graphemb.io",
    "graphemb.skipgram",
    "torch_geometric",
    "sklearn.linear_model",
    "scipy.sparse",
)


@dataclasses.dataclass(frozen=True)
class Block:
    """One ```` ```python ```` block: its first code line (1-based) and its code."""

    path: Path
    line: int
    code: str
    skip: str | None = None  # the reason, for a block marked to be skipped

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def markdown_files() -> list[Path]:
    """The README and every Markdown page of ``docs/`` (not its build tooling)."""
    docs = sorted(p for p in (REPO / "docs").rglob("*.md") if "_tooling" not in p.parts)
    return [REPO / "README.md", *docs]


def blocks(path: Path) -> list[Block]:
    """The Python blocks of ``path``, in order; a malformed block or marker is an error
    naming ``path:line``."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        if not _FENCE_OPEN.match(lines[i]):
            if _ANY_MARKER.match(lines[i].strip()) and not _SKIP.match(lines[i].strip()):
                raise ValueError(f"{path}:{i + 1}: malformed snippet marker {lines[i]!r}")
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if _FENCE_CLOSE.match(lines[j])), None)
        if end is None:
            raise ValueError(f"{path}:{i + 1}: ```python block never closed")
        above = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip = _SKIP.match(above)
        code = "\n".join(lines[i + 1 : end])
        found.append(Block(path, i + 2, code, skip.group(1) if skip else None))
        i = end + 1
    return found


def script(path: Path) -> str:
    """The blocks of ``path`` not marked to be skipped, as one script whose line numbers
    are those of ``path``."""
    out: list[str] = []
    for block in blocks(path):
        if block.skip is not None:
            continue
        out += [""] * (block.line - 1 - len(out))
        out += block.code.split("\n")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ runner
def _run_child(job: dict) -> None:
    """In the forked child: run one script as ``__main__``; never returns."""
    import runpy
    import traceback

    os.setpgid(0, 0)  # a group of its own: a timeout kills the ranks it spawned too
    fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(job["cwd"])
    sys.argv = [job["script"]]
    sys.path[0] = os.path.dirname(job["script"])
    code = 0
    try:
        runpy.run_path(job["script"], run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    except BaseException:  # noqa: BLE001 - reported in the log, then the exit code
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    """The exit status of child ``pid``, killed with its group after ``timeout`` s (-9)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -signal.SIGKILL
        time.sleep(0.05)


def run_all(jobs: list[dict], timeout: float) -> dict[str, dict]:
    """Each job (``script``, ``cwd``, ``log``) in a forked child, one after the other:
    ``{script: {"rc", "seconds"}}``."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    results = {}
    for job in jobs:
        sys.stdout.flush()
        sys.stderr.flush()
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _run_child(job)
        rc = _wait(pid, timeout)
        results[job["script"]] = {"rc": rc, "seconds": round(time.monotonic() - start, 2)}
    return results


if __name__ == "__main__":
    manifest = json.loads(Path(sys.argv[1]).read_text())
    outcome = run_all(manifest["jobs"], manifest["timeout"])
    Path(sys.argv[2]).write_text(json.dumps(outcome))
