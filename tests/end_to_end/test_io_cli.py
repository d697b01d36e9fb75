"""``python -m graphemb``: the skeleton and the ``score`` subcommand."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from helpers import run_graphemb
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

from graphemb.cli import main
from graphemb.io import write_embeddings


def labelled_files(tmp_path, multi_label):
    """Embeddings of named nodes whose labels are readable from them, plus a label file
    listing only some nodes, in another order than the embeddings."""
    rng = np.random.default_rng(0)
    count = 120
    names = np.array([f"n{i}" for i in rng.permutation(count)])
    if multi_label:
        labels = (rng.random((count, 3)) < 0.4).astype(np.int64)
        labels[labels.sum(1) == 0, 0] = 1
        features = labels + 0.05 * rng.normal(size=labels.shape)
        lines = [
            f"{names[i]} " + " ".join(f"c{c}" for c in np.flatnonzero(labels[i]))
            for i in range(100)
        ]
    else:
        labels = rng.integers(0, 3, count)
        features = np.eye(3)[labels] + 0.05 * rng.normal(size=(count, 3))
        lines = [f"{names[i]},c{labels[i]}" for i in range(100)]
    write_embeddings(tmp_path / "emb.emb", features.astype(np.float32), names)
    suffix = ".txt" if multi_label else ".csv"
    (tmp_path / f"labels{suffix}").write_text("\n".join(lines[::-1]) + "\n")
    return tmp_path / "emb.emb", tmp_path / f"labels{suffix}"


@pytest.mark.parametrize("multi_label", [False, True])
def test_score_prints_the_f1_table(tmp_path, capsys, multi_label):
    embeddings, labels = labelled_files(tmp_path, multi_label)

    code = main(
        [
            "score",
            "--embeddings",
            str(embeddings),
            "--labels",
            str(labels),
            "--ratios",
            "0.2,0.8",
            "--repeats",
            "2",
        ]
    )

    out = capsys.readouterr().out
    assert code == 0
    kind = "multi-label" if multi_label else "single-label"
    assert f"120 embeddings of dimension 3; 100 labelled nodes, 3 classes ({kind})" in out
    rows = [line.split() for line in out.splitlines() if line.strip().endswith("0.0000")]
    assert [r[0] for r in rows] == ["20%", "80%"]
    assert all(float(r[1]) == 1.0 and float(r[4]) == 1.0 for r in rows)  # separable


def test_score_is_the_independent_f1_on_a_single_split(tmp_path, capsys):
    """Noisy labels, one split each: the table's Micro-F1 is accuracy from scikit-learn."""
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 200)
    features = (labels[:, None] + 1.0 * rng.normal(size=(200, 2))).astype(np.float32)
    write_embeddings(tmp_path / "e.npy", features)
    (tmp_path / "l.txt").write_text("".join(f"{i} {c}\n" for i, c in enumerate(labels)))

    assert (
        main(
            [
                "score",
                "--embeddings",
                str(tmp_path / "e.npy"),
                "--labels",
                str(tmp_path / "l.txt"),
                "--ratios",
                "0.5",
                "--repeats",
                "1",
            ]
        )
        == 0
    )

    order = np.random.default_rng(0).permutation(200)  # the documented split of seed 0
    train, test = order[:100], order[100:]
    model = LogisticRegression(solver="liblinear").fit(features[train], labels[train])
    expected = f1_score(labels[test], model.predict(features[test]), average="micro")
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[0] == "50%" and float(row[1]) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--labels", "{tmp}/missing.txt"], "--labels: no such file: '{tmp}/missing.txt'"),
        (["--labels", "{tmp}/bad.txt"], "bad.txt:2: node 'nobody' is not in the graph"),
        (["--labels", "{tmp}/multi.txt", "--single-label"], "multi.txt:1: node 'n1' has several"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, args, message):
    embeddings, _ = labelled_files(tmp_path, multi_label=False)
    (tmp_path / "bad.txt").write_text("n1 a\nnobody b\n")
    (tmp_path / "multi.txt").write_text("n1 a b\n")
    argv = ["score", "--embeddings", str(embeddings)] + [a.format(tmp=tmp_path) for a in args]

    assert main(argv) == 2

    err = capsys.readouterr().err
    assert err.startswith("python -m graphemb score: error: ")
    assert message.format(tmp=tmp_path) in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_flags_and_no_command(capsys):
    argv = ["score", "--embeddings", "a.emb", "--labels", "l.txt", "--ratios", "0.5,1.5"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "fractions must lie in (0, 1), got 1.5" in err and err.count("\n") == 1
    assert main(["score", "--embeddings", "a.emb", "--labels", "l.txt", "--repeats", "0"]) == 2
    assert "--repeats: expected a positive integer, got '0'" in capsys.readouterr().err
    assert main([]) == 2
    assert "score" in capsys.readouterr().err
    assert main(["score", "--help"]) == 0


def test_python_dash_m_graphemb_help():
    result = run_graphemb("score", "--help", timeout=120)
    assert result.returncode == 0, result.stderr
    for flag in ("--embeddings", "--labels", "--ratios", "--repeats", "--multi-label"):
        assert flag in result.stdout


def test_score_reads_the_group_of_a_mat_file(tmp_path, capsys):
    import scipy.io
    import scipy.sparse

    rng = np.random.default_rng(2)
    group = (rng.random((80, 3)) < 0.4).astype(np.float64)
    group[group.sum(1) == 0, 1] = 1
    scipy.io.savemat(tmp_path / "blog.mat", {"group": scipy.sparse.csc_matrix(group)})
    order = rng.permutation(80)  # rows written in another order than the .mat's
    features = (group + 0.05 * rng.normal(size=group.shape)).astype(np.float32)
    write_embeddings(tmp_path / "blog.emb", features[order], order)

    argv = ["score", "--embeddings", str(tmp_path / "blog.emb"), "--labels",
            str(tmp_path / "blog.mat"), "--ratios", "0.5", "--repeats", "2"]  # fmt: skip
    assert main(argv) == 0

    out = capsys.readouterr().out
    assert "80 labelled nodes, 3 classes (multi-label)" in out
    row = out.splitlines()[-1].split()
    assert row[0] == "50%" and float(row[1]) == 1.0 and float(row[4]) == 1.0


def test_a_missing_optional_package_is_named(tmp_path, capsys, monkeypatch):
    embeddings, labels = labelled_files(tmp_path, multi_label=False)
    monkeypatch.setitem(sys.modules, "sklearn.linear_model", None)  # import fails
    argv = ["score", "--embeddings", str(embeddings), "--labels", str(labels), "--ratios", "0.5"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "needs an optional package" in err and "graphemb[examples]" in err
    assert "Traceback" not in err


def two_groups_file(tmp_path):
    """A complete graph of 20 nodes whose weights alone make two groups: 10 within a
    group, 0.1 across (unweighted, every node looks alike)."""
    lines = [
        f"v{u} v{v} {10.0 if (u < 10) == (v < 10) else 0.1}\n"
        for u in range(20)
        for v in range(u + 1, 20)
    ]
    path = tmp_path / "groups.txt"
    path.write_text("".join(lines))
    return path


def group_separation(path) -> float:
    """Mean cosine similarity within the groups minus across them."""
    from graphemb.io import read_embeddings

    rows, names = read_embeddings(path)
    rows = rows.double().numpy()
    rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    group = np.array([int(str(n)[1:]) < 10 for n in names])
    same = group[:, None] == group[None, :]
    similarity = rows @ rows.T
    np.fill_diagonal(same, False)
    across = group[:, None] != group[None, :]
    return float(similarity[same].mean() - similarity[across].mean())


@pytest.mark.parametrize("command", ["deepwalk", "node2vec"])
def test_weighted_embeddings_follow_the_weights(tmp_path, command):
    path = two_groups_file(tmp_path)
    # a tiny graph: many walks, a large learning rate, no subsampling (20 frequent nodes)
    common = ["--input", str(path), "--num-walks", "40", "--walk-length", "10",
              "--dimensions", "16", "--window-size", "3", "--sample", "0", "--lr", "0.2",
              "--workers", "1", "--quiet"]  # fmt: skip
    if command == "node2vec":
        common += ["--p", "0.5", "--q", "2"]
    assert main([command, *common, "--output", str(tmp_path / "w.emb"), "--weighted"]) == 0
    assert main([command, *common, "--output", str(tmp_path / "u.emb")]) == 0
    weighted, uniform = group_separation(tmp_path / "w.emb"), group_separation(tmp_path / "u.emb")
    assert weighted > 0.3 and abs(uniform) < 0.15, (weighted, uniform)


def test_weighted_on_a_file_without_weights_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "plain.txt"
    path.write_text("a b\nb c\n")
    argv = ["deepwalk", "--input", str(path), "--output", str(tmp_path / "o.emb"), "--weighted"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: no weight column" in err and "Traceback" not in err
    assert not (tmp_path / "o.emb").exists()
    # a matrix whose values are all 1 is weighted when asked: its weights are all 1
    import scipy.sparse

    scipy.sparse.save_npz(tmp_path / "g.npz", scipy.sparse.csr_matrix(np.ones((3, 3))))
    argv = ["deepwalk", "--input", str(tmp_path / "g.npz"), "--output", str(tmp_path / "o.npy")]
    argv += ["--weighted", "--num-walks", "2", "--walk-length", "4", "--workers", "1", "--quiet"]
    assert main(argv) == 0 and (tmp_path / "o.npy").exists()


@pytest.mark.parametrize(
    ("backend", "workers"), [("compiled", "2"), ("torch", "1"), ("torch", "2")]
)
def test_a_diverging_run_writes_nothing_and_exits_2(tmp_path, capsys, backend, workers):
    """On either backend, with one or two threads."""
    from graphemb.skipgram.backends import compiled_kernel

    if backend == "compiled" and compiled_kernel() is None:
        pytest.skip("the compiled kernels are disabled (GRAPHEMB_DISABLE_KERNELS)")
    ring = "\n".join(f"{i} {(i + 1) % 30}\n{i} {(i + 7) % 30}" for i in range(30))
    (tmp_path / "g.edgelist").write_text(ring + "\n")
    out = tmp_path / "g.npy"
    argv = ["deepwalk", "--input", str(tmp_path / "g.edgelist"), "--output", str(out)]
    argv += ["--lr", "1e6", "--backend", backend, "--num-walks", "10", "--walk-length", "20"]
    argv += ["--workers", workers, "--quiet"]

    assert main(argv) == 2

    err = capsys.readouterr().err
    assert "diverged in walk chunk" in err and "lower lr" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()
    # The same graph at the default rate trains and writes finite rows.
    assert main(argv[:5] + argv[7:]) == 0
    assert np.isfinite(np.load(out)).all()
