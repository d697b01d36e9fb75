"""The compiled edge-list parser (``graphemb_kernels.parse_integer_edges``) against numpy's
``loadtxt`` and the line-by-line reader, on random and adversarial files cut into many
parts; files it refuses read exactly as without it."""

from __future__ import annotations

import numpy as np
import pytest

from graphemb import _compiled
from graphemb.io import GraphFileError, parse_edge_list
from graphemb.io.edge_list import _parse_compiled, _parse_lines

PARSE = getattr(_compiled.compiled_module(), "parse_integer_edges", None)
pytestmark = pytest.mark.skipif(
    PARSE is None,
    reason="graphemb_kernels without parse_integer_edges here (rebuild it: make kernels)",
)
PARTS = [1, 2, 3, 7, 64]  # 0: one part per thread, at least 1 MiB each


@pytest.fixture(autouse=True)
def compiled_parser_on(monkeypatch):
    """The compiled parser in use, whatever the environment says (tests that compare with
    the other paths switch it off themselves)."""
    monkeypatch.delenv(_compiled.DISABLE_VARIABLE, raising=False)


def random_lines(rng, count, *, weighted, delimiter, blank_lines=("", "# only a comment")):
    """Edge lines with the spellings a plain integer file may have, and their values."""
    big = 2**63 - 1
    pool = np.concatenate(
        [rng.integers(0, 50, 20), rng.integers(-(2**40), 2**40, 10), [0, big, -big - 1, -1]]
    )
    src, dst = rng.choice(pool, count), rng.choice(pool, count)
    weights = rng.standard_normal(count) * 10.0 ** rng.integers(-8, 8, count)
    lines = []
    for u, v, w in zip(src.tolist(), dst.tolist(), weights.tolist(), strict=True):
        fields = [
            ("+" if u >= 0 and rng.random() < 0.1 else "") + str(u),
            ("0" if v >= 0 and rng.random() < 0.1 else "") + str(v),
        ]
        if weighted:
            spelling = rng.integers(4)
            fields.append(
                repr(w)
                if spelling == 0
                else f"{w:.3e}"
                if spelling == 1
                else f"{w:g}"
                if spelling == 2
                else f"+{abs(w):f}"
            )
        blank = [" ", "\t", "  ", " \t "][rng.integers(4)]
        sep = blank if delimiter is None else f"{blank[:1] if rng.random() < 0.3 else ''},"
        line = (" " if rng.random() < 0.1 else "") + sep.join(fields)
        line += " " if rng.random() < 0.1 else ""
        if rng.random() < 0.05:
            line += " # a comment, 3 4"
        lines.append(line)
        if rng.random() < 0.05:
            lines.append(blank_lines[rng.integers(len(blank_lines))])
    return lines, src, dst


def write(path, lines, *, crlf=False, final_newline=True):
    end = "\r\n" if crlf else "\n"
    path.write_bytes((end.join(lines) + (end if final_newline else "")).encode())
    return path


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("delimiter", [None, ","])
@pytest.mark.parametrize("crlf", [False, True])
def test_random_files_read_as_loadtxt_reads_them(tmp_path, weighted, delimiter, crlf):
    rng = np.random.default_rng([weighted, delimiter is None, crlf])
    lines, src, dst = random_lines(rng, 400, weighted=weighted, delimiter=delimiter)
    lines = ["# made by a test", "src dst"] + lines
    path = write(tmp_path / "edges.txt", lines, crlf=crlf, final_newline=not crlf)
    columns = 3 if weighted else 2
    oracle = np.loadtxt(
        path,
        dtype=[("src", np.int64), ("dst", np.int64)] + ([("w", np.float64)] if weighted else []),
        comments="#",
        delimiter=delimiter,
        skiprows=2,
        encoding="utf-8",
    )
    np.testing.assert_array_equal(oracle["src"], src)  # the test's own spellings
    np.testing.assert_array_equal(oracle["dst"], dst)

    for parts in PARTS + [0]:
        parsed = PARSE(str(path), 2, delimiter or "", columns, weighted, parts=parts)
        assert parsed is not None, parts
        (got_src, got_dst), got_weights, low, high, dense = parsed
        np.testing.assert_array_equal(got_src.numpy(), oracle["src"])
        np.testing.assert_array_equal(got_dst.numpy(), oracle["dst"])
        if weighted:
            np.testing.assert_array_equal(got_weights.numpy(), oracle["w"])  # bit for bit
        else:
            assert got_weights is None
        both = np.concatenate([src, dst])
        assert (low, high, dense) == (both.min(), both.max(), False)


def test_every_cut_of_a_small_file(tmp_path):
    """Parts cut at every byte offset: mid-number, mid-CRLF, inside comments, at blank
    lines; and the last line without a line break."""
    text = "1 2\r\n\r\n# c 9 9\r\n 3\t-4 # x\r\n\r\n5 6\r\n7 8"
    path = tmp_path / "edges.txt"
    path.write_bytes(text.encode())
    for parts in range(1, len(text) + 2):
        parsed = PARSE(str(path), 0, "", 2, False, parts=parts)
        assert parsed is not None, parts
        assert parsed[0].tolist() == [[1, 3, 5, 7], [2, -4, 6, 8]], parts
        assert parsed[2:] == (-4, 8, False)


def test_a_large_file_in_parts_per_thread(tmp_path):
    """Over 1 MiB, with comment lines that leave gaps between the parts' edges."""
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 10**6, (2, 150_000))
    lines = [f"{u} {v}" for u, v in zip(src.tolist(), dst.tolist(), strict=True)]
    for at in rng.choice(len(lines), 2000, replace=False):
        lines[at] += "\n# between"
    path = write(tmp_path / "edges.txt", lines)
    for parts in [0, 2, 5]:
        (got_src, got_dst), _, _, _, _ = PARSE(str(path), 0, "", 2, False, parts=parts)
        np.testing.assert_array_equal(got_src.numpy(), src)
        np.testing.assert_array_equal(got_dst.numpy(), dst)


@pytest.mark.parametrize(
    ("ids", "dense"),
    [
        ([0, 1, 2, 3, 4], True),
        ([4, 3, 2, 1, 0, 2], True),
        ([1, 2, 3], False),
        ([0, 1, 3], False),
        ([0, 0, 0], True),
        ([-1, 0, 1], False),
        ([0, 1, 2**40], False),
    ],
)
def test_dense_means_every_id_from_zero_to_the_largest(tmp_path, ids, dense):
    """Checked by the parser on all threads; the ids are then their own node ids."""
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v in zip(ids, ids[1:] + ids[:1], strict=True)))
    for parts in [1, 2]:
        assert PARSE(str(path), 0, "", 2, False, parts=parts)[4] is dense
    edges = parse_edge_list(path)
    assert edges.node_names.tolist() == sorted(set(ids))
    assert edges.node_names[edges.src].tolist() == ids


REFUSED = {
    "lone CR (a line break for Python)": b"1 2\r3 4\n",
    "lone CR in a comment": b"1 2 # a\r3 4\n",
    "string name": b"1 2\n2 x\n",
    "non-ASCII in a comment": "1 2 # caf\u00e9\n".encode(),
    "Latin-1 byte": b"1 2\n3 \xe9\n",
    "id beyond int64": f"1 {2**63}\n".encode(),
    "id below int64": f"1 {-(2**63) - 1}\n".encode(),
    "float id": b"1 2.0\n",
    "20 digits": b"1 10000000000000000002\n",
    "four columns": b"1 2\n3 4 5 6\n",
    "one column": b"1 2\n3\n",
    "vertical tab": b"1\x0b2\n",
    "NUL byte": b"1 2\x00\n",
    "sign alone": b"1 -\n",
    "double sign": b"1 +-2\n",
}
REFUSED_WEIGHTED = {
    "nan weight": b"1 2 nan\n",
    "inf weight": b"1 2 inf\n",
    "exponent without digits": b"1 2 1e\n",
    "sign then sign": b"1 2 +-1\n",
    "underscore": b"1 2 1_0\n",
    "word weight": b"1 2 heavy\n",
    "overflowing weight": b"1 2 1e999\n",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_lines(tmp_path, name):
    path = tmp_path / "edges.txt"
    path.write_bytes(b"5 6\n" * 10 + REFUSED[name])
    for parts in [1, 3]:
        assert PARSE(str(path), 0, "", 2, False, parts=parts) is None


@pytest.mark.parametrize("name", sorted(REFUSED_WEIGHTED))
def test_refused_weights(tmp_path, name):
    path = tmp_path / "edges.txt"
    path.write_bytes(b"5 6 0.5\n" * 10 + REFUSED_WEIGHTED[name])
    assert PARSE(str(path), 0, "", 3, True) is None
    # unweighted, a third column is ignored whatever it holds
    assert PARSE(str(path), 0, "", 3, False)[0][0].tolist() == [5] * 10 + [1]


def test_csv_empty_field_is_refused_and_a_missing_file_gives_none(tmp_path):
    path = tmp_path / "edges.csv"
    path.write_bytes(b"1,,2\n")
    assert PARSE(str(path), 0, ",", 2, False) is None
    assert PARSE(str(tmp_path / "missing.txt"), 0, "", 2, False) is None


def read_both_ways(path, monkeypatch, **options):
    """parse_edge_list with and without the compiled parser: arrays, or the error text."""
    results = []
    for disable in ["0", "1"]:
        monkeypatch.setenv(_compiled.DISABLE_VARIABLE, disable)
        try:
            results.append(parse_edge_list(path, **options))
        except GraphFileError as error:
            results.append(str(error))
    return results


@pytest.mark.parametrize("name", sorted(REFUSED) + sorted(REFUSED_WEIGHTED))
def test_refused_files_read_as_without_the_compiled_parser(tmp_path, monkeypatch, name):
    content = REFUSED.get(name) or (b"5 6 0.5\n" * 10 + REFUSED_WEIGHTED[name])
    path = tmp_path / "edges.txt"
    path.write_bytes(content)
    compiled, reference = read_both_ways(path, monkeypatch)
    if isinstance(reference, str):
        assert compiled == reference
        assert reference.startswith(f"{path}:")  # the file and the bad line
    else:
        for a, b in zip(compiled, reference, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("delimiter", [None, ","])
def test_accepted_file_reads_as_the_line_by_line_reader(tmp_path, delimiter):
    """Also lines of blanks and indented comments (numpy's loadtxt refuses those with a
    delimiter; the line-by-line reader skips them)."""
    rng = np.random.default_rng(2)
    blank_lines = ("", "   ", "# only a comment", "\t# indented")
    lines, _, _ = random_lines(
        rng, 300, weighted=True, delimiter=delimiter, blank_lines=blank_lines
    )
    path = write(tmp_path / "edges.txt", ["# header"] + lines)
    compiled, table = _parse_compiled(str(path), delimiter, 2, 3, True)
    np.testing.assert_array_equal(table.numpy(), [compiled.src, compiled.dst])
    reference = _parse_lines(str(path), delimiter, 2, 3, True)
    for a, b in zip(compiled, reference, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_bad_line_far_into_a_large_file_is_named(tmp_path, monkeypatch):
    path = tmp_path / "edges.txt"
    path.write_bytes(b"1 2\n" * 400_000 + b"3 4 5 6\n" + b"1 2\n" * 10)
    with pytest.raises(GraphFileError) as error:
        parse_edge_list(path)
    assert str(error.value) == f"{path}:400001: expected 2 columns (as on line 1), got 4: '3 4 5 6'"


@pytest.mark.parametrize("kernels", ["0", "1"])
def test_ids_beyond_int64_and_float_ids_are_names_on_every_path(tmp_path, monkeypatch, kernels):
    """As the line-by-line reader reads them (numpy < 2's loadtxt would read them through
    a float, to wrong ids)."""
    monkeypatch.setenv(_compiled.DISABLE_VARIABLE, kernels)
    path = tmp_path / "edges.txt"
    path.write_text(f"1 {2**63}\n2 {-(2**63) - 1}\n3 2.0\n")
    edges = parse_edge_list(path)
    reference = _parse_lines(str(path), None, 1, 2, False)
    assert edges.node_names.tolist() == ["1", str(2**63), "2", str(-(2**63) - 1), "3", "2.0"]
    for a, b in zip(edges, reference, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("delimiter", [";", "|", "\u00e4", "\x00", "::", "e"])
def test_other_delimiters_read_as_the_line_by_line_reader(tmp_path, delimiter):
    """One printable ASCII character that no field holds goes to the compiled parser;
    others (non-ASCII, control, longer, a letter of a number) to the other paths."""
    path = tmp_path / "edges.txt"
    path.write_text(f"1{delimiter}2\n3 {delimiter} 4\n", encoding="utf-8")
    taken = _parse_compiled(str(path), delimiter, 1, 2, False) is not None
    assert taken == (delimiter in (";", "|"))
    edges = parse_edge_list(path, delimiter=delimiter)
    reference = _parse_lines(str(path), delimiter, 1, 2, False)
    for a, b in zip(edges, reference, strict=True):
        np.testing.assert_array_equal(a, b)
