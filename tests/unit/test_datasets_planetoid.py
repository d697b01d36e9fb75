"""The Planetoid loader's data (graphemb.datasets.load_planetoid): Cora and CiteSeer as
published, and as GCN and DGL preprocess them.

Expected values come from outside the code under test: published dataset statistics
(GCN paper, PyG/DGL documentation), a plain-Python re-reading of the raw files and DGL's
own preprocessing (on the DGL stack). Where the files come from:
test_datasets_planetoid_files.py.
"""

from __future__ import annotations

import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import edge_pairs, every_planetoid_file

from graphemb.datasets import PlanetoidDataset, load_planetoid


@pytest.fixture(scope="session")
def planetoid_dir() -> Path:
    """The folder with the real files ($GRAPHEMB_PLANETOID_DIR, else the shared copy)."""
    return every_planetoid_file()


@pytest.fixture(scope="module")
def cora(planetoid_dir: Path) -> PlanetoidDataset:
    return load_planetoid("cora", root=planetoid_dir)


@pytest.fixture(scope="module")
def citeseer(planetoid_dir: Path) -> PlanetoidDataset:
    return load_planetoid("citeseer", root=planetoid_dir)


def _raw(directory: Path, name: str, part: str):
    with open(directory / f"ind.{name}.{part}", "rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pickle.load(f, encoding="latin1")


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
    pairs = edge_pairs(data.src, data.dst)
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
    assert set(edge_pairs(data.src, data.dst)) == expected


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
    dgl_pairs = set(edge_pairs(dgl_src, dgl_dst))
    assert graph.num_edges() == data.num_edges + dgl_self_loops
    assert {(u, v) for u, v in dgl_pairs if u != v} == set(edge_pairs(data.src, data.dst))


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


def test_missing_scipy_gives_install_hint(planetoid_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)  # makes `import scipy` fail
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)
    with pytest.raises(ImportError, match="pip install scipy"):
        load_planetoid("cora", root=planetoid_dir)
