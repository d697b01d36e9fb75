"""The bad-input suite of ``python -m graphemb``: malformed files and flag combinations.

Each case runs the command line (in this process, ``graphemb.cli.main``; a few as real
``python -m graphemb`` processes) and expects exit code 2, one line on stderr that names
the file (with its line, for content errors) or the flag, no traceback, and nothing
written: the folder holds the same files before and after (no output, no temporary file).
The cases marked ``before_read`` fail before the graph is read (the reader is replaced by
one that fails the test).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from graphemb.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TEXT_FILES = {
    "ok.txt": "1 2\n2 3\n3 1\n",
    "w.txt": "1 2 0.5\n2 3 1.5\n",
    "cols4.txt": "1 2\n2 3 4 5\n",
    "onecol.txt": "1\n",
    "mixed.txt": "1 2 0.5\n2 3\n",
    "word.txt": "1 2 0.5\n2 3 heavy\n",
    "nan.txt": "1 2 0.5\n2 3 nan\n",
    "inf.txt": "# weights\n1 2 0.5\n\n2 3 inf\n",
    "neg.txt": "a b 1\nb c -1\n",
    "zero.txt": "1 2 0\n2 3 0.0\n",
    "empty.txt": "",
    "comments.txt": "# nothing\n% here\n",
    "header_only.txt": "source target\n",
    "single.txt": "1 2\n",
    "names.txt": "1 2\n2 b\n",
    "negative.txt": "1 2\n-1 2\n",
    "bad.mat": "not a MATLAB file\n",
    "bad.npz": "not a numpy file\n",
    "bad.mtx": "1 2\n",
    "rect.mtx": "%%MatrixMarket matrix coordinate real general\n2 3 1\n1 2 1\n",
    "empty.adjlist": "# no nodes\n",
    "graph.gml": "graph [ ]\n",
    "emb.emb": "3 2\n1 0.5 1.0\n2 1.5 0.0\n3 0.0 2.0\n",
    "badhead.emb": "three two\n1 0.5 1.0\n",
    "badrow.emb": "3 2\n1 0.5 1.0\n2 1.5\n3 0.0 2.0\n",
    "emb.vec": "3 2\n1 0.5 1.0\n2 1.5 0.0\n3 0.0 2.0\n",
    "labels.txt": "1 a\n2 b\n3 a\n",
    "labels_bad.txt": "1 a\nzz b\n",
    "labels_short.txt": "1\n",
    "labels_multi.txt": "1 a b\n",
}


@pytest.fixture
def folder(tmp_path):
    """Every file of the cases, and an empty output folder ``out/``."""
    for name, text in TEXT_FILES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "latin1.txt").write_bytes(b"1 2\ncaf\xe9 3\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "a_folder.txt").mkdir()
    network = sp.csc_matrix(np.array([[0, 1.0], [1.0, 0]]))
    scipy.io.savemat(tmp_path / "nonet.mat", {"graph": network})
    scipy.io.savemat(tmp_path / "rect.mat", {"network": sp.csc_matrix(np.ones((2, 3)))})
    nan = sp.csc_matrix(([np.nan, 1.0], ([0, 1], [1, 0])), shape=(2, 2))
    scipy.io.savemat(tmp_path / "nan.mat", {"network": nan})
    scipy.io.savemat(tmp_path / "ok.mat", {"network": network})
    sp.save_npz(tmp_path / "ok.npz", network.tocsr())
    (tmp_path / "ok.adjlist").write_text("1 2 3\n2 3\n")
    return tmp_path


def embed(graph: str, *flags: str, command: str = "deepwalk") -> list[str]:
    return [command, "--input", f"{{d}}/{graph}", "--output", "{d}/out/o.emb", *flags]


def score(embeddings: str = "emb.emb", labels: str = "labels.txt", *flags: str) -> list[str]:
    return ["score", "--embeddings", f"{{d}}/{embeddings}", "--labels", f"{{d}}/{labels}", *flags]


# (id, argv, what stderr must say, whether the error comes before the graph is read)
CONTENT = [
    (
        "four-columns",
        embed("cols4.txt"),
        "{d}/cols4.txt:2: expected 2 columns (as on line 1), got 4",
    ),
    ("one-column", embed("onecol.txt"), "{d}/onecol.txt:1: expected 2 or 3 columns, got 1"),
    ("mixed-columns", embed("mixed.txt", "--weighted"), "{d}/mixed.txt:2: expected 3 columns"),
    (
        "word-weight",
        embed("word.txt", "--weighted"),
        "{d}/word.txt:2: weight 'heavy' is not a number",
    ),
    (
        "nan-weight",
        embed("nan.txt", "--weighted"),
        "{d}/nan.txt:2: weight nan is not a finite number",
    ),
    ("inf-weight", embed("inf.txt", "--weighted"), "{d}/inf.txt:4: weight inf is not a finite"),
    ("negative-weight", embed("neg.txt", "--weighted"), "{d}/neg.txt:2: weight -1.0 is negative"),
    ("zero-weights", embed("zero.txt", "--weighted"), "{d}/zero.txt: every edge weight is 0"),
    ("weighted-two-columns", embed("ok.txt", "--weighted"), "{d}/ok.txt:1: no weight column"),
    ("empty-file", embed("empty.txt"), "{d}/empty.txt: no edges in the file"),
    ("only-comments", embed("comments.txt"), "{d}/comments.txt: no edges in the file"),
    (
        "only-a-header",
        embed("header_only.txt"),
        "{d}/header_only.txt: no edges in the file (line 1 is a header)",
    ),
    (
        "header-forced",
        embed("single.txt", "--header"),
        "{d}/single.txt: no edges in the file (line 1 is",
    ),
    ("not-utf8", embed("latin1.txt"), "{d}/latin1.txt:2: not UTF-8 text: byte 0xe9"),
    (
        "implicit-ids-name",
        embed("names.txt", "--implicit_ids"),
        "{d}/names.txt:2: implicit ids: node name 'b'",
    ),
    (
        "implicit-ids-negative",
        embed("negative.txt", "--implicit-ids"),
        "{d}/negative.txt:2: implicit ids: node name '-1'",
    ),
    (
        "wrong-delimiter",
        embed("ok.txt", "--delimiter", ";"),
        "{d}/ok.txt:1: expected 2 or 3 columns, got 1",
    ),
    ("bad-mat", embed("bad.mat"), "{d}/bad.mat: not a readable .mat file"),
    (
        "mat-no-network",
        embed("nonet.mat"),
        "{d}/nonet.mat: no 'network' variable (found: ['graph'])",
    ),
    ("mat-not-square", embed("rect.mat"), "{d}/rect.mat: an adjacency matrix must be square"),
    ("mat-nan-weight", embed("nan.mat", "--weighted"), "{d}/nan.mat: entry (0, 1): weight nan"),
    ("bad-npz", embed("bad.npz"), "{d}/bad.npz: not a scipy sparse .npz file"),
    ("bad-mtx", embed("bad.mtx"), "{d}/bad.mtx: not a readable Matrix Market file"),
    ("mtx-not-square", embed("rect.mtx"), "{d}/rect.mtx: an adjacency matrix must be square"),
    ("empty-adjlist", embed("empty.adjlist"), "{d}/empty.adjlist: no nodes in the file"),
    ("score-embeddings-header", score("badhead.emb"), "{d}/badhead.emb:1: expected a header 'N D'"),
    ("score-embeddings-row", score("badrow.emb"), "{d}/badrow.emb:3: expected a name and 2 values"),
    (
        "score-unknown-node",
        score(labels="labels_bad.txt"),
        "{d}/labels_bad.txt:2: node 'zz' is not in the graph",
    ),
    (
        "score-no-label",
        score(labels="labels_short.txt"),
        "{d}/labels_short.txt:1: expected 'node label",
    ),
    (
        "score-several-labels",
        score("emb.emb", "labels_multi.txt", "--single-label"),
        "{d}/labels_multi.txt:1: node '1' has several labels",
    ),
]

FLAGS = [
    (
        "walk-length-1",
        embed("ok.txt", "--walk-length", "1"),
        "--walk-length: expected an integer >= 2 (a walk of one node",
    ),
    (
        "walk-length-0",
        embed("ok.txt", "--walk-length", "0"),
        "--walk-length: expected an integer >= 2",
    ),
    (
        "dimensions-0",
        embed("ok.txt", "--dimensions", "0"),
        "--dimensions: expected a positive integer, got '0'",
    ),
    (
        "num-walks-negative",
        embed("ok.txt", "--num-walks", "-1"),
        "--num-walks: expected a positive integer, got '-1'",
    ),
    (
        "window-size-word",
        embed("ok.txt", "--window-size", "x"),
        "--window-size: expected a positive integer, got 'x'",
    ),
    ("iter-0", embed("ok.txt", "--iter", "0"), "--iter: expected a positive integer, got '0'"),
    (
        "workers-negative",
        embed("ok.txt", "--workers", "-1"),
        "--workers: expected an integer >= 0, got '-1'",
    ),
    (
        "p-zero",
        embed("ok.txt", "--p", "0", command="node2vec"),
        "--p: expected a positive number, got '0'",
    ),
    (
        "q-nan",
        embed("ok.txt", "--q", "nan", command="node2vec"),
        "--q: expected a positive number, got 'nan'",
    ),
    ("lr-zero", embed("ok.txt", "--lr", "0"), "--lr: expected a positive number, got '0'"),
    (
        "sample-negative",
        embed("ok.txt", "--sample", "-1"),
        "--sample: expected a number >= 0, got '-1'",
    ),
    (
        "seed-negative",
        embed("ok.txt", "--seed", "-1"),
        "--seed: expected an integer >= 0, got '-1'",
    ),
    (
        "weighted-and-unweighted",
        embed("w.txt", "--weighted", "--unweighted"),
        "--unweighted: not allowed with argument --weighted",
    ),
    (
        "directed-and-undirected",
        embed("ok.txt", "--directed", "--undirected"),
        "--undirected: not allowed with argument --directed",
    ),
    (
        "header-and-no-header",
        embed("ok.txt", "--header", "--no-header"),
        "--no-header: not allowed with argument --header",
    ),
    ("empty-delimiter", embed("ok.txt", "--delimiter", ""), "--delimiter: expected a separator"),
    (
        "delimiter-on-mat",
        embed("ok.mat", "--delimiter", ","),
        "--delimiter does not apply to mat files ('{d}/ok.mat')",
    ),
    (
        "header-on-npz",
        embed("ok.npz", "--no-header"),
        "--no-header does not apply to npz files ('{d}/ok.npz')",
    ),
    (
        "weighted-on-adjlist",
        embed("ok.adjlist", "--weighted"),
        "--weighted does not apply to adjlist files ('{d}/ok.adjlist')",
    ),
    ("unknown-format", embed("ok.txt", "--format", "gml"), "--format: invalid choice: 'gml'"),
    ("missing-input", embed("missing.txt"), "--input: no such file: '{d}/missing.txt'"),
    ("input-is-a-folder", embed("a_folder.txt"), "--input: '{d}/a_folder.txt' is a directory"),
    (
        "input-unknown-suffix",
        embed("graph.gml"),
        "--input: cannot tell the graph format of '{d}/graph.gml'",
    ),
    (
        "output-in-missing-folder",
        ["deepwalk", "--input", "{d}/ok.txt", "--output", "{d}/nowhere/o.emb"],
        "--output: cannot write '{d}/nowhere/o.emb': no directory '{d}/nowhere'",
    ),
    (
        "output-is-a-folder",
        ["deepwalk", "--input", "{d}/ok.txt", "--output", "{d}/out"],
        "--output: cannot write '{d}/out': it is a directory",
    ),
    (
        "output-unknown-suffix",
        ["deepwalk", "--input", "{d}/ok.txt", "--output", "{d}/out/o.xyz"],
        "--output: cannot tell the embedding format of '{d}/out/o.xyz'",
    ),
    (
        "output-is-input",
        ["deepwalk", "--input", "{d}/ok.txt", "--output", "{d}/ok.txt"],
        "--output: '{d}/ok.txt' is the --input file",
    ),
    (
        "backend-choice",
        embed("ok.txt", "--backend", "gpu"),
        "--backend: invalid choice: 'gpu'",
    ),
    (
        "no-input",
        ["deepwalk", "--output", "{d}/out/o.emb"],
        "the following arguments are required: --input",
    ),
    ("unknown-flag", embed("ok.txt", "--bogus"), "unrecognized arguments: --bogus"),
    ("p-on-deepwalk", embed("ok.txt", "--p", "0.5"), "unrecognized arguments: --p 0.5"),
    ("epochs-zero", embed("ok.txt", "--epochs", "0"), "--epochs: "),
    ("negatives-word", embed("ok.txt", "--negatives", "five"), "--negatives: "),
    (
        "score-missing-embeddings",
        score("missing.emb"),
        "--embeddings: no such file: '{d}/missing.emb'",
    ),
    (
        "score-missing-labels",
        score(labels="missing.txt"),
        "--labels: no such file: '{d}/missing.txt'",
    ),
    (
        "score-embeddings-suffix",
        score("emb.vec"),
        "--embeddings: cannot tell the embedding format of '{d}/emb.vec'",
    ),
    (
        "score-ratio",
        score("emb.emb", "labels.txt", "--ratios", "0.5,1.5"),
        "--ratios: fractions must lie in (0, 1), got 1.5",
    ),
    (
        "score-repeats",
        score("emb.emb", "labels.txt", "--repeats", "0"),
        "--repeats: expected a positive integer, got '0'",
    ),
]

CASES = [pytest.param(argv, said, False, id=name) for name, argv, said in CONTENT] + [
    pytest.param(argv, said, True, id=name) for name, argv, said in FLAGS
]


def files_in(folder) -> list[str]:
    """Every path under ``folder`` (hidden temporary files too)."""
    return sorted(
        os.path.relpath(os.path.join(root, name), folder)
        for root, folders, files in os.walk(folder)
        for name in folders + files
    )


def test_the_suite_has_40_distinct_cases():
    argvs = {tuple(argv) for _, argv, _ in CONTENT + FLAGS}
    assert len(argvs) == len(CONTENT) + len(FLAGS) >= 40


@pytest.mark.parametrize(("argv", "said", "before_read"), CASES)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    folder, capsys, monkeypatch, argv, said, before_read
):
    assert "{d}" in said or "--" in said  # names the file, its line or the flag
    if before_read:

        def no_reading(*args, **kwargs):
            raise AssertionError("the graph was read before the flags were checked")

        monkeypatch.setattr("graphemb.cli.embed.read_graph", no_reading)
    before = files_in(folder)

    code = main([a.replace("{d}", str(folder)) for a in argv])

    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.startswith(f"python -m graphemb {argv[0]}: error: "), captured.err
    assert said.replace("{d}", str(folder)) in captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.out == ""
    assert files_in(folder) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_output_folder_without_write_permission(folder, capsys):
    (folder / "out").chmod(0o500)
    try:
        assert main(["deepwalk", "--input", str(folder / "ok.txt"), "--output",
                     str(folder / "out" / "o.emb")]) == 2  # fmt: skip
    finally:
        (folder / "out").chmod(0o700)
    assert f"directory '{folder}/out' is not writable" in capsys.readouterr().err


def test_compiled_backend_where_the_kernels_are_off(folder, capsys, monkeypatch):
    monkeypatch.setenv("GRAPHEMB_DISABLE_KERNELS", "1")
    argv = [a.replace("{d}", str(folder)) for a in embed("ok.txt", "--backend", "compiled")]
    assert main(argv) == 2
    assert "--backend compiled: the compiled kernels are not available here" in (
        capsys.readouterr().err
    )
    assert files_in(folder / "out") == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (embed("cols4.txt"), "{d}/cols4.txt:2: expected 2 columns"),
        (embed("ok.txt", "--walk-length", "1"), "--walk-length: expected an integer >= 2"),
        (
            ["deepwalk", "--input", "{d}/cols4.txt", "--output", "{d}/nowhere/o.npy"],
            "--output: cannot write '{d}/nowhere/o.npy'",
        ),
    ],  # fmt: skip
    ids=["bad-line", "bad-flag", "missing-output-folder"],
)
def test_python_dash_m_graphemb_exits_2_in_one_line(folder, argv, said):
    """The same through a real ``python -m graphemb`` process (the exit code the shell
    sees)."""
    before = files_in(folder)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "graphemb", *(a.replace("{d}", str(folder)) for a in argv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert said.replace("{d}", str(folder)) in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert files_in(folder) == before
