"""Checks of the files a run reads and writes (graphemb.io.paths), and the errors of the
whole-or-nothing writer (graphemb.io.atomic): they name the user's path, never the
temporary file, and leave nothing behind."""

from __future__ import annotations

import os
import stat
import tempfile

import numpy as np
import pytest

from graphemb.io import write_embeddings
from graphemb.io.atomic import atomic_path
from graphemb.io.paths import check_readable_file, check_writable_file


def test_readable_file_checks_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"no such file: '{tmp_path}/x.txt'"):
        check_readable_file(tmp_path / "x.txt")
    with pytest.raises(IsADirectoryError, match=f"'{tmp_path}' is a directory"):
        check_readable_file(tmp_path)
    (tmp_path / "x.txt").write_text("1 2\n")
    check_readable_file(tmp_path / "x.txt")


def test_writable_file_checks_name_the_path_and_its_folder(tmp_path):
    target = tmp_path / "no" / "out.emb"
    with pytest.raises(FileNotFoundError, match=f"cannot write '{target}': no directory"):
        check_writable_file(target)
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match=f"'{tmp_path}/file' is not a directory"):
        check_writable_file(tmp_path / "file" / "out.emb")
    with pytest.raises(IsADirectoryError, match="it is a directory"):
        check_writable_file(tmp_path)
    check_writable_file(tmp_path / "out.emb")
    check_writable_file("out.emb")  # the working directory


def test_a_missing_folder_is_named_by_the_writer_too(tmp_path):
    target = tmp_path / "gone" / "out.emb"
    with pytest.raises(FileNotFoundError) as error:
        write_embeddings(target, np.zeros((2, 2), dtype=np.float32))
    assert str(target) in str(error.value) and "/." not in str(error.value)


def test_a_failing_temporary_file_is_reported_under_the_users_name(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", f"{tmp_path}/.out.emb.x1y2.tmp")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(OSError) as error:
        with atomic_path(tmp_path / "out.emb"):
            pass
    assert str(error.value) == f"cannot write '{tmp_path}/out.emb': Permission denied"


def test_an_interrupt_while_writing_leaves_no_file(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(tmp_path / "out.emb") as temporary:
            with open(temporary, "w") as stream:
                stream.write("half")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_written_files_get_the_mode_of_new_files(tmp_path):
    """Not mkstemp's 0600: what ``open`` would give under the umask, or the replaced
    file's own mode."""
    umask = os.umask(0o022)
    try:
        write_embeddings(tmp_path / "a.emb", np.ones((1, 1), dtype=np.float32))
        assert stat.S_IMODE(os.stat(tmp_path / "a.emb").st_mode) == 0o644
        os.chmod(tmp_path / "a.emb", 0o640)
        write_embeddings(tmp_path / "a.emb", np.ones((1, 1), dtype=np.float32))
        assert stat.S_IMODE(os.stat(tmp_path / "a.emb").st_mode) == 0o640
    finally:
        os.umask(umask)
