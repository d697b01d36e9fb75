"""Embedding files: the word2vec text format parsed independently, .npy round trips, and
nothing half-written."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphemb.io import GraphFileError, read_embeddings, write_embeddings
from graphemb.io import embeddings as embeddings_module


def parse_word2vec(path):
    """An independent reader of the word2vec text format."""
    lines = path.read_text().splitlines()
    count, dim = map(int, lines[0].split())
    names = [line.split(" ")[0] for line in lines[1:]]
    rows = np.array([[np.float32(v) for v in line.split(" ")[1:]] for line in lines[1:]])
    assert len(lines) == count + 1 and rows.shape == (count, dim)
    return names, rows


@pytest.mark.parametrize("suffix", [".emb", ".txt"])
def test_word2vec_text_format_keeps_names_and_exact_float32_values(tmp_path, suffix):
    rows = torch.randn(5, 3, generator=torch.Generator().manual_seed(0)) * 1e3
    rows[0, 0] = 1e-30
    names = np.array(["alice", "bob", "7", "dave", "héloïse"])
    path = tmp_path / f"out{suffix}"

    write_embeddings(path, rows, names)

    parsed_names, parsed_rows = parse_word2vec(path)
    assert parsed_names == names.tolist()
    np.testing.assert_array_equal(parsed_rows, rows.numpy())
    back, back_names = read_embeddings(path)
    assert back.dtype == torch.float32
    torch.testing.assert_close(back, rows, rtol=0, atol=0)
    assert back_names.tolist() == names.tolist()


def test_float_values_are_written_as_python_rounds_them_and_read_back_exactly(tmp_path):
    """Every finite float value as Python's correctly rounded ``%.8e`` (negative values) or
    ``%.9e`` (the others: one more digit where the sign would be), however large or small;
    rows with inf / nan, and float64 beyond two-digit exponents, as ``%.9g``."""
    rng = np.random.default_rng(5)
    tricky = [0.0, -0.0, 1.0, -1.0, 10.0, 0.1, 9.9999999, 99999.99, 0.5, 1e10, 1e-10,
              123456789.0, 999999999.0, 999999.94, 1e-45, -1.4e-45, 1.1754944e-38,
              3.4028235e38, -3.4028235e38]  # fmt: skip
    spread = rng.standard_normal(3000) * 10.0 ** rng.integers(-44, 38, 3000)
    values = np.concatenate([tricky, spread, rng.standard_normal(3000)]).astype(np.float32)
    rows = values[: values.size // 6 * 6].reshape(-1, 6)
    path = tmp_path / "out.emb"

    write_embeddings(path, rows)

    tokens = [line.split(" ")[1:] for line in path.read_text().splitlines()[1:]]
    expected = [[f"{v:.8e}" if np.signbit(v) else f"{v:.9e}" for v in row] for row in rows]
    assert tokens == expected
    np.testing.assert_array_equal(parse_word2vec(path)[1].view(np.int32), rows.view(np.int32))

    special = np.array([[1.5, np.inf], [-np.nan, 2.0]], dtype=np.float32)
    huge = np.array([[1e-300, -2.5], [1e150, 3.0]])
    for array in (special, huge):
        write_embeddings(path, array)
        tokens = [line.split(" ")[1:] for line in path.read_text().splitlines()[1:]]
        assert tokens == [[f"{v:.9g}" for v in row] for row in array.tolist()]


def test_default_names_are_node_ids(tmp_path):
    write_embeddings(tmp_path / "out.emb", np.eye(3, dtype=np.float64))
    names, rows = parse_word2vec(tmp_path / "out.emb")
    assert names == ["0", "1", "2"]
    np.testing.assert_array_equal(rows, np.eye(3))


def test_gensim_reads_the_text_format(tmp_path):
    gensim_models = pytest.importorskip(
        "gensim.models", reason="gensim (an optional benchmark dependency) is not installed"
    )
    rows = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    write_embeddings(tmp_path / "out.emb", rows, ["a", "b", "c", "d"])
    vectors = gensim_models.KeyedVectors.load_word2vec_format(str(tmp_path / "out.emb"))
    assert vectors.index_to_key == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(vectors["c"], rows[2])


def test_npy_rows_in_node_order_and_names_beside_them(tmp_path):
    rows = np.random.default_rng(1).normal(size=(4, 2)).astype(np.float32)
    path = tmp_path / "out.npy"

    write_embeddings(path, rows, np.array([10, 500, 7000, 9]))

    np.testing.assert_array_equal(np.load(path), rows)
    assert (tmp_path / "out.npy.names").read_text().split("\n") == ["10", "500", "7000", "9"]
    back, names = read_embeddings(path)
    np.testing.assert_array_equal(back.numpy(), rows)
    assert names.tolist() == ["10", "500", "7000", "9"]

    write_embeddings(path, rows)  # names 0..N-1: no names file, and no stale one
    assert not (tmp_path / "out.npy.names").exists()
    assert read_embeddings(path)[1].tolist() == ["0", "1", "2", "3"]


@pytest.mark.parametrize(
    ("rows", "names", "message"),
    [
        (np.zeros(3), None, r"shape \(N, D\), got shape \(3,\)"),
        (np.zeros((2, 2)), ["a"], r"node_names must have shape \(2,\), got \(1,\)"),
        (np.zeros((2, 2)), ["a", "b c"], "node name 'b c' is empty or contains whitespace"),
        (np.zeros((2, 2)), ["a", ""], "node name '' is empty"),
    ],
)
def test_bad_arguments_write_nothing(tmp_path, rows, names, message):
    path = tmp_path / "out.emb"
    path.write_text("old")
    with pytest.raises(ValueError, match=message):
        write_embeddings(path, rows, names)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.emb"]


@pytest.mark.parametrize("suffix", [".emb", ".npy"])
def test_a_failure_while_writing_leaves_the_old_file(tmp_path, monkeypatch, suffix):
    path = tmp_path / f"out{suffix}"
    path.write_text("old")

    def fail(*args, **kwargs):
        raise OSError("disk full")

    # Fails in the middle: .npy after the temporary file was created, .emb after its first
    # row was written (one row a block here).
    monkeypatch.setattr(np, "save", fail)
    format_block = embeddings_module._word2vec_lines
    blocks = []

    def second_block_fails(names, rows):
        blocks.append(names)
        return format_block(names, rows) if len(blocks) == 1 else fail()

    monkeypatch.setattr(embeddings_module, "_VALUES_PER_WRITE", 2)
    monkeypatch.setattr(embeddings_module, "_word2vec_lines", second_block_fails)
    with pytest.raises(OSError, match="disk full"):
        write_embeddings(path, np.ones((3, 2)), ["a", "b", "c"])
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert blocks == ([] if suffix == ".npy" else [["a"], ["b"]])


def test_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"cannot tell the embedding format of .*out.bin"):
        write_embeddings(tmp_path / "out.bin", np.zeros((1, 1)))
    write_embeddings(tmp_path / "out.bin", np.zeros((1, 1)), format="word2vec")
    names, rows = parse_word2vec(tmp_path / "out.bin")
    assert names == ["0"] and rows.tolist() == [[0.0]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2 x\n", "out.emb:1: expected a header 'N D'"),
        ("2 2\na 1 2\nb 1\n", "out.emb:3: expected a name and 2 values, got 2 fields"),
        ("1 2\na 1 2\nb 1 2\n", "out.emb:3: more rows than the 1 of the header"),
        ("2 2\na 1 x\n", "out.emb:2: a value is not a number: 'a 1 x'"),
        ("3 2\na 1 2\n", "out.emb: the header announces 3 rows, the file has 1"),
    ],
)
def test_malformed_embedding_files_are_named(tmp_path, text, message):
    (tmp_path / "out.emb").write_text(text)
    with pytest.raises(GraphFileError) as error:
        read_embeddings(tmp_path / "out.emb")
    assert str(error.value).startswith(f"{tmp_path}/{message}")
