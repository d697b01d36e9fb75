"""Where the Planetoid loader's files come from (graphemb.datasets.load_planetoid): the
root, $GRAPHEMB_PLANETOID_DIR or the cache, each file checked against its published
sha256 (computed here with hashlib from the shared copy), and downloads into the cache
from a local HTTP server (complete and verified, or nothing under the final name).
"""

from __future__ import annotations

import hashlib
import http.server
import shutil
import threading
import time
from pathlib import Path

import pytest
from helpers import PLANETOID_PARTS as PARTS
from helpers import every_planetoid_file

from graphemb.datasets import (
    CACHE_DIR_ENV,
    PLANETOID_DIR_ENV,
    PLANETOID_URL_ENV,
    load_planetoid,
)
from graphemb.datasets import planetoid as planetoid_module


@pytest.fixture(scope="session")
def planetoid_dir() -> Path:
    """The folder with the real files ($GRAPHEMB_PLANETOID_DIR, else the shared copy)."""
    return every_planetoid_file()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Planetoid env vars (CI sets one), and an empty cache; returns the cache dir."""
    monkeypatch.delenv(PLANETOID_DIR_ENV, raising=False)
    monkeypatch.delenv(PLANETOID_URL_ENV, raising=False)
    cache_root = tmp_path / "cache_root"
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache_root))
    return cache_root / "planetoid"


def _copy_cora(source: Path, destination: Path, skip: tuple[str, ...] = ()) -> Path:
    destination.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        if part not in skip:
            shutil.copyfile(source / f"ind.cora.{part}", destination / f"ind.cora.{part}")
    return destination


def _flip_last_byte(path: Path) -> str:
    """Corrupt a file in place; return the sha256 of the corrupted bytes."""
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    return hashlib.sha256(bytes(data)).hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------- Planetoid: local files


def test_corrupted_local_file_raises_with_both_digests(planetoid_dir, tmp_path, clean_env):
    root = _copy_cora(planetoid_dir, tmp_path / "root")
    expected = _sha256(planetoid_dir / "ind.cora.ally")
    actual = _flip_last_byte(root / "ind.cora.ally")
    with pytest.raises(ValueError) as info:
        load_planetoid("cora", root=root)
    message = str(info.value)
    assert "ind.cora.ally" in message and expected in message and actual in message


def test_missing_file_without_download_names_file_and_directory(planetoid_dir, clean_env):
    _copy_cora(planetoid_dir, clean_env, skip=("tx",))
    with pytest.raises(FileNotFoundError) as info:
        load_planetoid("cora", download=False)
    message = str(info.value)
    assert "ind.cora.tx" in message and str(clean_env) in message
    assert "ind.cora.allx" not in message  # only the missing file is named


# ------------------------------------------------------------- Planetoid: where files come from


def test_root_beats_env_dir_and_cache(planetoid_dir, tmp_path, clean_env, monkeypatch):
    root = _copy_cora(planetoid_dir, tmp_path / "root")
    monkeypatch.setenv(PLANETOID_DIR_ENV, str(tmp_path / "empty_env_dir"))
    assert load_planetoid("cora", root=root, download=False).num_nodes == 2708

    # And no silent fallback: an empty root fails although the env dir has the files.
    monkeypatch.setenv(PLANETOID_DIR_ENV, str(root))
    empty_root = tmp_path / "empty_root"
    with pytest.raises(FileNotFoundError, match="empty_root"):
        load_planetoid("cora", root=empty_root)


def test_env_dir_beats_cache(planetoid_dir, tmp_path, clean_env, monkeypatch):
    env_dir = _copy_cora(planetoid_dir, tmp_path / "env_dir")
    monkeypatch.setenv(PLANETOID_DIR_ENV, str(env_dir))
    assert load_planetoid("cora", download=False).num_nodes == 2708
    assert not clean_env.exists()

    _copy_cora(planetoid_dir, clean_env)
    empty_env_dir = tmp_path / "empty_env_dir"
    monkeypatch.setenv(PLANETOID_DIR_ENV, str(empty_env_dir))
    with pytest.raises(FileNotFoundError, match="empty_env_dir"):
        load_planetoid("cora")


def test_cache_is_used_without_root_or_env_dir(planetoid_dir, clean_env, monkeypatch):
    _copy_cora(planetoid_dir, clean_env)
    monkeypatch.setenv(PLANETOID_DIR_ENV, "")  # empty means unset
    assert load_planetoid("cora", download=False).num_nodes == 2708


def test_default_cache_is_under_home(planetoid_dir, tmp_path, clean_env, monkeypatch):
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _copy_cora(planetoid_dir, tmp_path / "home" / ".cache" / "graphemb" / "planetoid")
    assert load_planetoid("cora", download=False).num_nodes == 2708


# ------------------------------------------------------------- Planetoid: downloads


class _FileServer:
    """A local HTTP server over a directory that records requested paths."""

    def __init__(self, directory: Path) -> None:
        self.requests: list[str] = []
        self.truncate = False  # send half of each file, then hang up
        self.pause_midway = False  # send half of a file, then wait for release
        self.midway = threading.Event()  # set once a paused response is half sent
        self.stall = threading.Event()  # while set, requests get no answer until release
        self.release = threading.Event()
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(directory), **kwargs)

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(self.path)
                if server.stall.is_set():
                    server.release.wait(timeout=30)
                    return
                if server.truncate or server.pause_midway:
                    body = (directory / self.path.lstrip("/")).read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    if server.pause_midway:
                        server.midway.set()
                        server.release.wait(timeout=30)
                    self.close_connection = True
                    return
                super().do_GET()

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def served(planetoid_dir, tmp_path):
    """A local server over a temporary copy of the Cora files."""
    server = _FileServer(_copy_cora(planetoid_dir, tmp_path / "served"))
    yield server, tmp_path / "served"
    server.close()


def _cache_leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_download_fills_cache_once(planetoid_dir, served, clean_env):
    server, _ = served
    data = load_planetoid("cora", url=server.url)
    assert data.num_nodes == 2708 and data.num_edges == 10556
    assert sorted(server.requests) == sorted(f"/ind.cora.{part}" for part in PARTS)
    assert _cache_leftovers(clean_env) == sorted(f"ind.cora.{part}" for part in PARTS)
    for part in PARTS:
        name = f"ind.cora.{part}"
        assert _sha256(clean_env / name) == _sha256(planetoid_dir / name)

    load_planetoid("cora", url=server.url)
    assert len(server.requests) == len(PARTS), "second load must not download again"


def test_download_fetches_only_missing_files_from_env_url(
    planetoid_dir, served, clean_env, monkeypatch
):
    server, _ = served
    _copy_cora(planetoid_dir, clean_env, skip=("graph", "ty"))
    monkeypatch.setenv(PLANETOID_URL_ENV, server.url.rstrip("/"))  # no trailing slash
    assert load_planetoid("cora").num_nodes == 2708
    assert sorted(server.requests) == ["/ind.cora.graph", "/ind.cora.ty"]


def test_corrupted_download_is_rejected_and_not_kept(planetoid_dir, served, clean_env):
    server, served_dir = served
    expected = _sha256(planetoid_dir / "ind.cora.graph")
    actual = _flip_last_byte(served_dir / "ind.cora.graph")
    with pytest.raises(ValueError) as info:
        load_planetoid("cora", url=server.url)
    message = str(info.value)
    assert "ind.cora.graph" in message and expected in message and actual in message
    leftovers = _cache_leftovers(clean_env)
    assert "ind.cora.graph" not in leftovers
    assert not [name for name in leftovers if "graph" in name], leftovers  # no temp file


def test_truncated_download_leaves_nothing_under_final_name(served, clean_env):
    server, _ = served
    server.truncate = True
    with pytest.raises((ValueError, OSError)):
        load_planetoid("cora", url=server.url)
    assert _cache_leftovers(clean_env) == []


def test_download_in_progress_is_invisible_under_final_name(served, clean_env):
    server, _ = served
    server.pause_midway = True
    errors: list[BaseException] = []

    def load() -> None:
        try:
            load_planetoid("cora", url=server.url)
        except BaseException as exc:  # collected for the main thread
            errors.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    assert server.midway.wait(timeout=10), "download never started"
    assert "ind.cora.x" not in _cache_leftovers(clean_env)  # half a file is on the wire
    server.release.set()  # the server hangs up: the client sees a truncated body
    worker.join(timeout=10)
    assert len(errors) == 1 and isinstance(errors[0], (ValueError, OSError)), errors
    assert _cache_leftovers(clean_env) == []


def test_http_error_names_the_file(served, clean_env):
    server, served_dir = served
    (served_dir / "ind.cora.tx").unlink()
    with pytest.raises(OSError, match="ind.cora.tx"):
        load_planetoid("cora", url=server.url)
    assert "ind.cora.tx" not in _cache_leftovers(clean_env)


def test_stalled_download_times_out(served, clean_env, monkeypatch):
    server, _ = served
    server.stall.set()
    monkeypatch.setattr(planetoid_module, "DOWNLOAD_TIMEOUT_S", 0.3)
    started = time.monotonic()
    with pytest.raises(OSError, match="ind.cora.x"):
        load_planetoid("cora", url=server.url)
    # Without the timeout the client would wait for the server's 30 s.
    assert time.monotonic() - started < 10
    assert _cache_leftovers(clean_env) == []


def test_download_disabled_does_not_touch_the_network(served, clean_env):
    server, _ = served
    with pytest.raises(FileNotFoundError, match="ind.cora.x"):
        load_planetoid("cora", download=False, url=server.url)
    assert server.requests == []
