"""Writing a file whole or not at all: a temporary file in the same folder, then a rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

from .paths import check_writable_file

__all__ = ["atomic_path"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary path to write to; on success it replaces ``path`` in one rename.

    On any exception (an interrupt too) the temporary file is removed and ``path`` is left
    as it was, so a reader never sees a half-written file. Errors of the file system
    (a missing directory, a full disk) name ``path``, not the temporary file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> with atomic_path(target) as temporary:
    ...     _ = pathlib.Path(temporary).write_text("done")
    >>> target.read_text()
    'done'
    """
    target = os.fspath(path)
    check_writable_file(target)  # errors name the user's path, not the temporary one
    folder = os.path.dirname(os.path.abspath(target))
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder
        )
    except OSError as error:
        raise OSError(f"cannot write {target!r}: {error.strerror or error}") from None
    os.close(handle)
    try:
        yield temporary
        os.chmod(temporary, _file_mode(target))  # mkstemp's 0600 is no output's mode
        os.replace(temporary, target)
    except OSError as error:
        _remove(temporary)
        raise OSError(f"cannot write {target!r}: {error.strerror or error}") from None
    except BaseException:
        _remove(temporary)
        raise


def _file_mode(target: str) -> int:
    """The mode of the file being replaced, else that of a new file (0666 less the
    umask)."""
    try:
        return os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0o022)  # read it (umask can only be read by setting it)
        os.umask(umask)
        return 0o666 & ~umask


def _remove(temporary: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(temporary)
