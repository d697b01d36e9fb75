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

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from helpers import files_in, run_graphemb

from graphemb.cli import main

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


# Content errors: (input file, flags, what stderr says after '{d}/FILE'), found by reading.
BAD_FILES = [
    ("cols4.txt", (), ":2: expected 2 columns (as on line 1), got 4"),
    ("onecol.txt", (), ":1: expected 2 or 3 columns, got 1"),
    ("mixed.txt", ("--weighted",), ":2: expected 3 columns"),
    ("word.txt", ("--weighted",), ":2: weight 'heavy' is not a number"),
    ("nan.txt", ("--weighted",), ":2: weight nan is not a finite number"),
    ("inf.txt", ("--weighted",), ":4: weight inf is not a finite"),
    ("neg.txt", ("--weighted",), ":2: weight -1.0 is negative"),
    ("zero.txt", ("--weighted",), ": every edge weight is 0"),
    ("ok.txt", ("--weighted",), ":1: no weight column"),
    ("empty.txt", (), ": no edges in the file"),
    ("comments.txt", (), ": no edges in the file"),
    ("header_only.txt", (), ": no edges in the file (line 1 is a header)"),
    ("single.txt", ("--header",), ": no edges in the file (line 1 is"),
    ("latin1.txt", (), ":2: not UTF-8 text: byte 0xe9"),
    ("names.txt", ("--implicit_ids",), ":2: implicit ids: node name 'b'"),
    ("negative.txt", ("--implicit-ids",), ":2: implicit ids: node name '-1'"),
    ("ok.txt", ("--delimiter", ";"), ":1: expected 2 or 3 columns, got 1"),
    ("bad.mat", (), ": not a readable .mat file"),
    ("nonet.mat", (), ": no 'network' variable (found: ['graph'])"),
    ("rect.mat", (), ": an adjacency matrix must be square"),
    ("nan.mat", ("--weighted",), ": entry (0, 1): weight nan"),
    ("bad.npz", (), ": not a scipy sparse .npz file"),
    ("bad.mtx", (), ": not a readable Matrix Market file"),
    ("rect.mtx", (), ": an adjacency matrix must be square"),
    ("empty.adjlist", (), ": no nodes in the file"),
]
# Content errors of `score`: (embeddings, labels, flags, the file named, what stderr says
# after '{d}/FILE').
BAD_SCORE_FILES = [
    ("badhead.emb", "labels.txt", (), "badhead.emb", ":1: expected a header 'N D'"),
    ("badrow.emb", "labels.txt", (), "badrow.emb", ":3: expected a name and 2 values"),
    ("emb.emb", "labels_bad.txt", (), "labels_bad.txt", ":2: node 'zz' is not in the graph"),
    ("emb.emb", "labels_short.txt", (), "labels_short.txt", ":1: expected 'node label"),
    ("emb.emb", "labels_multi.txt", ("--single-label",), "labels_multi.txt",
     ":1: node '1' has several labels"),
]  # fmt: skip
# Values argparse refuses: (flag, value, what stderr says after 'FLAG: '), on ok.txt.
BAD_VALUES = [
    ("--walk-length", "1", "expected an integer >= 2 (a walk of one node"),
    ("--walk-length", "0", "expected an integer >= 2"),
    ("--dimensions", "0", "expected a positive integer, got '0'"),
    ("--num-walks", "-1", "expected a positive integer, got '-1'"),
    ("--window-size", "x", "expected a positive integer, got 'x'"),
    ("--iter", "0", "expected a positive integer, got '0'"),
    ("--workers", "-1", "expected an integer >= 0, got '-1'"),
    ("--p", "0", "expected a positive number, got '0'"),
    ("--q", "nan", "expected a positive number, got 'nan'"),
    ("--lr", "0", "expected a positive number, got '0'"),
    ("--sample", "-1", "expected a number >= 0, got '-1'"),
    ("--seed", "-1", "expected an integer >= 0, got '-1'"),
    ("--epochs", "0", ""),
    ("--negatives", "five", ""),
    ("--delimiter", "", "expected a separator"),
    ("--format", "gml", "invalid choice: 'gml'"),
    ("--backend", "gpu", "invalid choice: 'gpu'"),
]
NODE2VEC_ONLY = ("--p", "--q")
# Switches that exclude each other: (given first, given second).
EXCLUSIVE = [("--weighted", "--unweighted"), ("--directed", "--undirected"),
             ("--header", "--no-header")]  # fmt: skip
# Reading flags a format does not take: (input file, flags, the format).
NOT_FOR_FORMAT = [
    ("ok.mat", ("--delimiter", ","), "mat"),
    ("ok.npz", ("--no-header",), "npz"),
    ("ok.adjlist", ("--weighted",), "adjlist"),
]
# --output values refused: (path, what stderr says after '--output: ').
BAD_OUTPUTS = [
    ("{d}/nowhere/o.emb", "cannot write '{d}/nowhere/o.emb': no directory '{d}/nowhere'"),
    ("{d}/out", "cannot write '{d}/out': it is a directory"),
    ("{d}/out/o.xyz", "cannot tell the embedding format of '{d}/out/o.xyz'"),
    ("{d}/ok.txt", "'{d}/ok.txt' is the --input file"),
]
# Other command lines refused before any reading: (id, argv, what stderr says).
BAD_COMMAND_LINES = [
    ("missing-input", embed("missing.txt"), "--input: no such file: '{d}/missing.txt'"),
    ("input-is-a-folder", embed("a_folder.txt"), "--input: '{d}/a_folder.txt' is a directory"),
    ("input-unknown-suffix", embed("graph.gml"), "--input: cannot tell the graph format of "
     "'{d}/graph.gml'"),
    ("no-input", ["deepwalk", "--output", "{d}/out/o.emb"], "the following arguments are "
     "required: --input"),
    ("unknown-flag", embed("ok.txt", "--bogus"), "unrecognized arguments: --bogus"),
    ("p-on-deepwalk", embed("ok.txt", "--p", "0.5"), "unrecognized arguments: --p 0.5"),
    ("score-missing-embeddings", score("missing.emb"), "--embeddings: no such file: "
     "'{d}/missing.emb'"),
    ("score-missing-labels", score(labels="missing.txt"), "--labels: no such file: "
     "'{d}/missing.txt'"),
    ("score-embeddings-suffix", score("emb.vec"), "--embeddings: cannot tell the embedding "
     "format of '{d}/emb.vec'"),
    ("score-ratio", score("emb.emb", "labels.txt", "--ratios", "0.5,1.5"), "--ratios: "
     "fractions must lie in (0, 1), got 1.5"),
    ("score-repeats", score("emb.emb", "labels.txt", "--repeats", "0"), "--repeats: expected "
     "a positive integer, got '0'"),
]  # fmt: skip


def cases() -> list:
    """Every case as ``pytest.param(argv, said, before_read, id=...)``: ``said`` is what
    stderr must say; ``before_read``, whether the error comes before the graph is read."""
    found = []
    for file, flags, said in BAD_FILES:
        name = " ".join([file, *flags])
        found.append((name, embed(file, *flags), f"{{d}}/{file}{said}", False))
    for embeddings, labels, flags, named, said in BAD_SCORE_FILES:
        argv = score(embeddings, labels, *flags)
        found.append((f"score {named}", argv, f"{{d}}/{named}{said}", False))
    for flag, value, said in BAD_VALUES:
        command = "node2vec" if flag in NODE2VEC_ONLY else "deepwalk"
        argv = embed("ok.txt", flag, value, command=command)
        found.append((f"{flag}={value}", argv, f"{flag}: {said}", True))
    for first, second in EXCLUSIVE:
        said = f"{second}: not allowed with argument {first}"
        found.append((f"{first} {second}", embed("ok.txt", first, second), said, True))
    for file, flags, format in NOT_FOR_FORMAT:
        said = f"{flags[0]} does not apply to {format} files ('{{d}}/{file}')"
        found.append((f"{flags[0]} on {format}", embed(file, *flags), said, True))
    for path, said in BAD_OUTPUTS:
        argv = ["deepwalk", "--input", "{d}/ok.txt", "--output", path]
        found.append((f"--output {path}", argv, f"--output: {said}", True))
    found += [(name, argv, said, True) for name, argv, said in BAD_COMMAND_LINES]
    return [pytest.param(argv, said, before, id=name) for name, argv, said, before in found]


CASES = cases()


def test_the_suite_has_40_distinct_cases():
    argvs = {tuple(case.values[0]) for case in CASES}
    assert len(argvs) == len(CASES) >= 40


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
    done = run_graphemb(*(a.replace("{d}", str(folder)) for a in argv), cwd=folder)
    assert done.returncode == 2, done.stderr
    assert said.replace("{d}", str(folder)) in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert files_in(folder) == before
