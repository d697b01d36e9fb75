"""Small helpers shared by several test files (imported as ``helpers``: conftest puts this
folder on sys.path): device parameters, which stack this is, the Planetoid folder,
``RESULT`` lines of the examples, running notebooks on a kernel of this interpreter, graph
files that fail to read, ``python -m graphemb`` processes and the files they leave, the
benchmarks' quick modes and their JSON lines, the Planetoid files and edge pairs."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent

CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ],
)
DEVICES = ["cpu", CUDA]


def _compiled_skipgram_runs() -> bool:
    from graphemb.skipgram.backends import compiled_kernel

    return compiled_kernel() is not None


#: The skip-gram's compiled backend, as a parameter skipped where the kernels are disabled
#: (``make test-fallback``).
COMPILED_BACKEND = pytest.param(
    "compiled",
    marks=pytest.mark.skipif(
        not _compiled_skipgram_runs(),
        reason="the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)",
    ),
)

# The stack under test: "dgl" where DGL is installed (.venv/dgl), else "modern". Tests marked
# ``one_stack(name, why)`` run on that stack only (conftest skips them elsewhere, with `why`).
DGL_INSTALLED = importlib.util.find_spec("dgl") is not None
STACK = "dgl" if DGL_INSTALLED else "modern"
EVERY_STACK_VARIABLE = "GRAPHEMB_TEST_EVERY_STACK"  # =1: one_stack tests run on every stack


def planetoid_dir() -> str:
    """$GRAPHEMB_PLANETOID_DIR, else the shared copy beside the checkout (as CI does); skips
    the test where neither holds the Planetoid files."""
    for candidate in (
        os.environ.get("GRAPHEMB_PLANETOID_DIR"),
        REPO.parent / "shared/datasets/planetoid",
    ):
        if candidate and (Path(candidate) / "ind.cora.graph").exists():
            return str(candidate)
    pytest.skip(
        "Planetoid files not found: set GRAPHEMB_PLANETOID_DIR to a folder holding ind.cora.*"
    )


def result_of(stdout: str) -> dict:
    """The JSON of the one ``RESULT {json}`` line an example prints (rank 0 only)."""
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, f"expected one RESULT line (rank 0 only), got:\n{stdout}"
    return json.loads(lines[0][len("RESULT ") :])


# ---------------------------------------------------------------------------- notebooks
def kernel_of_this_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, display_name: str
) -> Path:
    """A kernelspec ``name`` that starts ``sys.executable`` (the notebook runs on the stack
    under test, whatever `python3` kernel a machine has installed), the Planetoid folder and
    an output folder in the environment; returns the output folder (not created)."""
    spec_dir = tmp_path / "jupyter" / "kernels" / name
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name,
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("GRAPHEMB_PLANETOID_DIR", planetoid_dir())
    monkeypatch.setenv("GRAPHEMB_NOTEBOOK_DIR", str(tmp_path / "outputs"))
    return tmp_path / "outputs"


def outputs_of(cell) -> tuple[str, list[str]]:
    """(printed text, MIME types of displayed data) of an executed cell."""
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    return text, [m for o in cell.outputs for m in o.get("data", {})]


def tagged(notebook, tag: str) -> list[int]:
    """Indices of the cells of ``notebook`` tagged ``tag``."""
    return [i for i, c in enumerate(notebook.cells) if tag in c.metadata.get("tags", [])]


def assert_committed_without_outputs(path: Path) -> None:
    """The notebook at ``path`` is valid and committed without outputs or execution counts
    (outputs belong to a run, not to the repository)."""
    nbformat = pytest.importorskip("nbformat", reason="needs nbformat (the dev extra)")
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]


# The usage errors of the examples' --checkpoint / --resume (examples/_launch.py, shared).
RESUME_USAGE_ERRORS = [
    (["--resume"], "--resume needs --checkpoint PATH"),
    (["--resume", "--checkpoint", "no/such.ckpt"], "--resume: no checkpoint at no/such.ckpt"),
]


def assert_usage_error(main, args: list[str], message: str, capsys) -> None:
    """``main(args)`` exits as argparse does for a usage error (code 2), saying ``message``
    on stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------ graph files, the command line
def graph_file_error(path: Path, text: str, **options):
    """The :class:`~graphemb.io.GraphFileError` that ``read_graph`` raises for a file
    ``path`` holding ``text``, read with ``options`` (the test fails if none is raised)."""
    from graphemb.io import GraphFileError, read_graph

    path.write_text(text)
    with pytest.raises(GraphFileError) as error:
        read_graph(path, **options)
    return error.value


def run_graphemb(*argv: str, cwd: Path | str = REPO, timeout: float = 300):
    """``python -m graphemb ARGV`` in a process of this interpreter, this checkout first on
    its path; the finished process, its output as text."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "graphemb", *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=path),
        cwd=cwd,
        timeout=timeout,
    )


BENCHMARKS = REPO / "benchmarks"


def run_quick_benchmark(script: str, *args: str, timeout: float = 240):
    """``python benchmarks/SCRIPT --quick ARGS``, asserted to succeed; the finished process."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick", *args],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def json_line(stdout: str, prefix: str) -> dict:
    """The JSON of the one line of ``stdout`` that starts with ``prefix``."""
    lines = [line for line in stdout.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, f"{len(lines)} lines start with {prefix!r}"
    return json.loads(lines[0][len(prefix) :])


def files_in(folder: Path | str) -> list[str]:
    """Every path under ``folder`` (hidden temporary files too), relative to it, sorted."""
    return sorted(
        os.path.relpath(os.path.join(root, name), folder)
        for root, folders, files in os.walk(folder)
        for name in folders + files
    )


# ---------------------------------------------------------------------------- datasets
#: The files of a Planetoid dataset ``name``: ``ind.<name>.<part>``.
PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


def every_planetoid_file() -> Path:
    """The folder of :func:`planetoid_dir`, where it holds every file of Cora and CiteSeer;
    skips the test where it lacks one."""
    folder = Path(planetoid_dir())
    missing = [
        f"ind.{name}.{part}"
        for name in ("cora", "citeseer")
        for part in PLANETOID_PARTS
        if not (folder / f"ind.{name}.{part}").is_file()
    ]
    if missing:
        pytest.skip(f"{folder} lacks Planetoid files: {', '.join(missing)}")
    return folder


def edge_pairs(src: torch.Tensor, dst: torch.Tensor) -> list[tuple[int, int]]:
    """The edges ``(src[i], dst[i])`` as pairs of ints."""
    return list(zip(src.tolist(), dst.tolist(), strict=True))
