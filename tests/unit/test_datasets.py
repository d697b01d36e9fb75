"""Tests for graphemb.datasets: the Planetoid loader and the synthetic SBM generator.

Expected values come from outside the code under test: published dataset statistics
(GCN paper, PyG/DGL documentation), a plain-Python re-reading of the raw files, DGL's
own preprocessing (on the DGL stack), and sha256 of the shared files via hashlib.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import os
import pickle
import shutil
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from graphemb.datasets import (
    CACHE_DIR_ENV,
    PLANETOID_DIR_ENV,
    PLANETOID_URL_ENV,
    PlanetoidDataset,
    SyntheticGraph,
    load_planetoid,
    stochastic_block_model,
)
from graphemb.datasets import planetoid as planetoid_module

SHARED_PLANETOID_DIR = Path("/work/shared/datasets/planetoid")
PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


# --------------------------------------------------------------------------- fixtures


def _has_files(directory: Path, name: str) -> bool:
    return all((directory / f"ind.{name}.{part}").is_file() for part in PARTS)


@pytest.fixture(scope="session")
def planetoid_dir() -> Path:
    """The directory with the real files: $GRAPHEMB_PLANETOID_DIR, else the shared copy."""
    candidates = [Path(p) for p in (os.environ.get(PLANETOID_DIR_ENV),) if p]
    candidates.append(SHARED_PLANETOID_DIR)
    for directory in candidates:
        if _has_files(directory, "cora") and _has_files(directory, "citeseer"):
            return directory
    pytest.skip(
        f"Planetoid files not found: set {PLANETOID_DIR_ENV} to a directory holding "
        f"ind.cora.* and ind.citeseer.* (looked in {', '.join(map(str, candidates))})"
    )


@pytest.fixture(scope="module")
def cora(planetoid_dir: Path) -> PlanetoidDataset:
    return load_planetoid("cora", root=planetoid_dir)


@pytest.fixture(scope="module")
def citeseer(planetoid_dir: Path) -> PlanetoidDataset:
    return load_planetoid("citeseer", root=planetoid_dir)


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


def _raw(directory: Path, name: str, part: str):
    with open(directory / f"ind.{name}.{part}", "rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pickle.load(f, encoding="latin1")


def _edge_pairs(src: torch.Tensor, dst: torch.Tensor) -> list[tuple[int, int]]:
    return list(zip(src.tolist(), dst.tolist(), strict=True))


# ------------------------------------------------------------- Planetoid: published facts


@pytest.mark.parametrize(
    "name, nodes, classes, features, train, edges",
    [
        # GCN paper Table 1 / PyG docs: Cora 2708 nodes, 1433 features, 7 classes,
        # 10556 directed edges; CiteSeer 3327, 3703, 6 and 9104 (PyG, no self loops).
        ("cora", 2708, 7, 1433, 140, 10556),
        ("citeseer", 3327, 6, 3703, 120, 9104),
    ],
)
def test_planetoid_published_sizes(planetoid_dir, name, nodes, classes, features, train, edges):
    data = load_planetoid(name, root=planetoid_dir)
    assert data.name == name
    assert (data.num_nodes, data.num_classes, data.num_features) == (nodes, classes, features)
    assert data.features.shape == (nodes, features)
    assert data.features.dtype == torch.float32
    assert data.labels.shape == (nodes,) and data.labels.dtype == torch.int64
    assert int(data.labels.min()) >= 0 and int(data.labels.max()) == classes - 1
    split_sizes = (data.train_idx.numel(), data.val_idx.numel(), data.test_idx.numel())
    assert split_sizes == (train, 500, 1000)
    assert data.num_edges == edges
    for tensor in (data.src, data.dst, data.train_idx, data.val_idx, data.test_idx):
        assert tensor.dtype == torch.int64


@pytest.mark.parametrize("dataset", ["cora", "citeseer"])
def test_public_split_is_disjoint_with_20_training_labels_per_class(request, dataset):
    data = request.getfixturevalue(dataset)
    train, val, test = (set(t.tolist()) for t in (data.train_idx, data.val_idx, data.test_idx))
    assert not (train & val) and not (train & test) and not (val & test)
    assert train == set(range(len(train)))  # the labelled nodes come first
    assert val == set(range(len(train), len(train) + 500))
    # The public split takes 20 labelled nodes per class (Yang et al. 2016).
    counts = torch.bincount(data.labels[data.train_idx], minlength=data.num_classes)
    assert counts.tolist() == [20] * data.num_classes
    assert data.train_mask.sum() == len(train) and data.train_mask[data.train_idx].all()
    assert data.val_mask.sum() == 500 and data.test_mask.sum() == 1000


@pytest.mark.parametrize("dataset", ["cora", "citeseer"])
def test_edge_list_is_symmetric_simple_and_sorted(request, dataset):
    data = request.getfixturevalue(dataset)
    pairs = _edge_pairs(data.src, data.dst)
    assert all(u != v for u, v in pairs), "self loop"
    assert len(set(pairs)) == len(pairs), "duplicate edge"
    assert set(pairs) == {(v, u) for u, v in pairs}, "missing reverse edge"
    assert pairs == sorted(pairs)
    assert 0 <= min(min(p) for p in pairs) and max(max(p) for p in pairs) < data.num_nodes


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_edges_match_a_plain_python_reading_of_the_graph_file(planetoid_dir, name):
    adjacency = _raw(planetoid_dir, name, "graph")
    expected = set()
    for node, neighbours in adjacency.items():
        for other in neighbours:
            if node != other:
                expected.update({(node, other), (other, node)})
    data = load_planetoid(name, root=planetoid_dir)
    assert set(_edge_pairs(data.src, data.dst)) == expected


def test_citeseer_has_48_isolated_nodes_and_15_padded_ones(citeseer):
    # 48 isolated nodes is a documented CiteSeer property (PyG); 15 test ids in the
    # test-id range have no row in tx and get zero features (GCN's padding).
    degree = torch.bincount(citeseer.src, minlength=citeseer.num_nodes)
    assert int((degree == 0).sum()) == 48
    zero_rows = (citeseer.features.sum(dim=1) == 0).nonzero().flatten()
    assert zero_rows.numel() == 15
    test_range = set(range(int(citeseer.test_idx.min()), int(citeseer.test_idx.max()) + 1))
    padded = test_range - set(citeseer.test_idx.tolist())
    assert set(zero_rows.tolist()) == padded
    # They belong to no split, and carry label 0 like in DGL (argmax of a zero row).
    assert not (citeseer.train_mask | citeseer.val_mask | citeseer.test_mask)[zero_rows].any()
    assert (citeseer.labels[zero_rows] == 0).all()


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_features_and_labels_follow_the_published_row_order(planetoid_dir, name):
    """Rows of allx/ally are nodes 0..; row i of tx/ty is node test.index[i]."""
    data = load_planetoid(name, root=planetoid_dir)
    allx = _raw(planetoid_dir, name, "allx").toarray()
    ally = _raw(planetoid_dir, name, "ally")
    tx = _raw(planetoid_dir, name, "tx").toarray()
    ty = _raw(planetoid_dir, name, "ty")
    test_index_text = (planetoid_dir / f"ind.{name}.test.index").read_text()
    test_order = [int(line) for line in test_index_text.split()]
    assert sorted(test_order) == data.test_idx.tolist()
    np.testing.assert_array_equal(data.features[: len(allx)].numpy(), allx)
    np.testing.assert_array_equal(data.labels[: len(ally)].numpy(), ally.argmax(axis=1))
    np.testing.assert_array_equal(data.features[test_order].numpy(), tx)
    np.testing.assert_array_equal(data.labels[test_order].numpy(), ty.argmax(axis=1))
    assert set(np.unique(data.features.numpy()).tolist()) <= {0.0, 1.0}


def test_row_normalized_features_sum_to_one_and_keep_zero_rows(citeseer):
    normalized = citeseer.row_normalized_features()
    row_sums = normalized.sum(dim=1)
    nonzero = citeseer.features.sum(dim=1) > 0
    assert torch.allclose(row_sums[nonzero], torch.ones(int(nonzero.sum())), atol=1e-5)
    assert (normalized[~nonzero] == 0).all() and not torch.isnan(normalized).any()
    assert citeseer.features.max() == 1.0, "raw features must not be modified"


@pytest.mark.dgl
@pytest.mark.parametrize("name, dgl_self_loops", [("cora", 0), ("citeseer", 124)])
def test_matches_dgl_preprocessing(planetoid_dir, name, dgl_self_loops):
    """DGL's own CitationGraphDataset.process on the same files, without downloading."""
    pytest.importorskip("dgl")
    from dgl.data.citation_graph import CitationGraphDataset

    class OfflineCitationGraph(CitationGraphDataset):
        def __init__(self) -> None:  # skip download/caching; process() reads raw_path
            self._name, self._reverse_edge, self._reorder, self._verbose = name, True, False, False

        @property
        def raw_path(self) -> str:
            return str(planetoid_dir)

    reference = OfflineCitationGraph()
    reference.process()
    graph = reference._g
    data = load_planetoid(name, root=planetoid_dir)

    assert graph.num_nodes() == data.num_nodes and reference.num_classes == data.num_classes
    assert torch.equal(graph.ndata["label"].long(), data.labels)
    for split in ("train", "val", "test"):
        assert torch.equal(graph.ndata[f"{split}_mask"].bool(), getattr(data, f"{split}_mask"))
    torch.testing.assert_close(graph.ndata["feat"], data.row_normalized_features())
    # DGL keeps the self loops of the graph file (CiteSeer: 124, hence its 9228 edges).
    dgl_src, dgl_dst = graph.edges()
    dgl_pairs = set(_edge_pairs(dgl_src, dgl_dst))
    assert graph.num_edges() == data.num_edges + dgl_self_loops
    assert {(u, v) for u, v in dgl_pairs if u != v} == set(_edge_pairs(data.src, data.dst))


# That importing graphemb.datasets imports no DGL (nor PyG) is checked by test_nn.py's
# test_imports_pyg_and_dgl_only_on_demand_with_clear_errors_without_them, in the fresh
# interpreter it starts for its import checks anyway.


# ------------------------------------------------------------- Planetoid: errors


def test_unknown_name_lists_supported_names(planetoid_dir):
    with pytest.raises(ValueError, match="pubmed") as info:
        load_planetoid("pubmed", root=planetoid_dir)
    assert "cora" in str(info.value) and "citeseer" in str(info.value)


def test_name_is_case_insensitive(planetoid_dir):
    assert load_planetoid("CiteSeer", root=planetoid_dir).name == "citeseer"


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


def test_missing_scipy_gives_install_hint(planetoid_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)  # makes `import scipy` fail
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)
    with pytest.raises(ImportError, match="pip install scipy"):
        load_planetoid("cora", root=planetoid_dir)


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


# ------------------------------------------------------------- stochastic block model


def _fields(graph) -> dict:
    return {f.name: getattr(graph, f.name) for f in dataclasses.fields(graph)}


def _same_graph(a: SyntheticGraph, b: SyntheticGraph) -> bool:
    fa, fb = _fields(a), _fields(b)
    return fa.keys() == fb.keys() and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
        for x, y in zip(fa.values(), fb.values(), strict=True)
    )


def test_sbm_is_deterministic_per_seed():
    first = stochastic_block_model(5_000, 5, seed=7)
    assert _same_graph(first, stochastic_block_model(5_000, 5, seed=7))
    other = stochastic_block_model(5_000, 5, seed=8)
    assert not torch.equal(first.labels, other.labels)
    assert first.src.shape != other.src.shape or not torch.equal(first.src, other.src)


# sha256 of (labels, src, dst, train_idx, val_idx, test_idx) as little-endian int64 for
# stochastic_block_model(1_000, 4, avg_degree=6.0, intra_fraction=0.7, seed=123).
SBM_DIGEST = "9460e9eefdf30f36a8487eb4e7f6578d2b5dbd4772b68d1c3d53b72356b87a43"


def test_sbm_is_identical_across_numpy_and_torch_versions():
    # Pinned digest: the suite runs under numpy 1.26 / torch 2.2 and numpy 2.x / torch
    # 2.13, so equality with one constant shows both stacks build the same graph.
    graph = stochastic_block_model(1_000, 4, avg_degree=6.0, intra_fraction=0.7, seed=123)
    digest = hashlib.sha256()
    tensors = (graph.labels, graph.src, graph.dst, graph.train_idx, graph.val_idx, graph.test_idx)
    for tensor in tensors:
        digest.update(tensor.numpy().astype("<i8").tobytes())
    assert digest.hexdigest() == SBM_DIGEST


def test_sbm_sizes_labels_and_balanced_communities():
    graph = stochastic_block_model(10_001, 7, avg_degree=12.0, seed=3)
    assert (graph.num_nodes, graph.num_classes, graph.features) == (10_001, 7, None)
    assert graph.labels.shape == (10_001,) and graph.labels.dtype == torch.int64
    sizes = torch.bincount(graph.labels, minlength=7)
    assert sizes.sum() == 10_001 and int(sizes.max() - sizes.min()) <= 1
    assert graph.src.dtype == graph.dst.dtype == torch.int64
    assert 0 <= int(graph.src.min()) and int(graph.src.max()) < graph.num_nodes
    # round(N * d / 2) undirected draws, both directions, minus rare loops/duplicates.
    assert 0.99 * 10_001 * 12.0 <= graph.num_edges <= 10_001 * 12.0 + 1


def test_sbm_edges_are_symmetric_without_loops_or_duplicates():
    graph = stochastic_block_model(3_000, 3, avg_degree=20.0, seed=5)
    pairs = _edge_pairs(graph.src, graph.dst)
    assert all(u != v for u, v in pairs)
    assert len(set(pairs)) == len(pairs)
    assert set(pairs) == {(v, u) for u, v in pairs}
    assert pairs == sorted(pairs)


@pytest.mark.parametrize("intra_fraction", [0.0, 0.3, 0.8, 1.0])
def test_sbm_intra_community_edge_fraction(intra_fraction):
    graph = stochastic_block_model(
        20_000, 5, avg_degree=10.0, intra_fraction=intra_fraction, seed=11
    )
    same = (graph.labels[graph.src] == graph.labels[graph.dst]).double().mean().item()
    # ~100k independent draws: the standard error is below 0.0016; 0.01 is > 6 sigma.
    assert abs(same - intra_fraction) < 0.01


def test_sbm_splits_are_disjoint_and_cover_all_nodes():
    graph = stochastic_block_model(1_000, 4, seed=2, train_fraction=0.25, val_fraction=0.15)
    sizes = (graph.train_idx.numel(), graph.val_idx.numel(), graph.test_idx.numel())
    assert sizes == (250, 150, 600)
    combined = torch.cat((graph.train_idx, graph.val_idx, graph.test_idx))
    assert torch.equal(combined.sort().values, torch.arange(1_000))
    assert (graph.train_mask.long() + graph.val_mask.long() + graph.test_mask.long() == 1).all()
    assert int(graph.train_idx.max()) > 250, "train split should be random, not a prefix"


def test_sbm_one_million_nodes():
    # Vectorised generation: about a second on 2 CPU cores (not timed here).
    graph = stochastic_block_model(1_000_000, 10, avg_degree=10.0, seed=0)
    assert graph.num_nodes == 1_000_000 and graph.labels.shape == (1_000_000,)
    assert 0.999 * 10_000_000 <= graph.num_edges <= 10_000_000
    assert int(graph.labels.max()) == 9 and bool((graph.src != graph.dst).all())


@pytest.mark.parametrize(
    "kwargs, bad",
    [
        (dict(num_nodes=0, num_communities=1), "num_nodes"),
        (dict(num_nodes=10, num_communities=11), "num_communities"),
        (dict(num_nodes=10, num_communities=0), "num_communities"),
        (dict(num_nodes=10, num_communities=2, avg_degree=-1.0), "avg_degree"),
        (dict(num_nodes=10, num_communities=2, intra_fraction=1.5), "intra_fraction"),
        (dict(num_nodes=10, num_communities=2, train_fraction=-0.1), "train_fraction"),
        (
            dict(num_nodes=10, num_communities=2, train_fraction=0.6, val_fraction=0.5),
            "val_fraction",
        ),
    ],
)
def test_sbm_rejects_bad_arguments(kwargs, bad):
    with pytest.raises(ValueError, match=bad):
        stochastic_block_model(**kwargs)


def test_synthetic_and_planetoid_share_field_names():
    planetoid_fields = {f.name for f in dataclasses.fields(PlanetoidDataset)}
    synthetic_fields = {f.name for f in dataclasses.fields(SyntheticGraph)}
    assert synthetic_fields <= planetoid_fields
