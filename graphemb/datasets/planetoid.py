"""Cora and CiteSeer with the standard Planetoid public split.

The raw files are the ones published with Planetoid (Yang et al., 2016) at
github.com/kimiyoung/planetoid; the processing reproduces Kipf & Welling's GCN
code (and therefore DGL's ``CoraGraphDataset`` / ``CiteseerGraphDataset`` and
PyG's ``Planetoid``), so accuracies are comparable with published numbers.

Example
-------
>>> from graphemb.datasets import load_planetoid
>>> cora = load_planetoid("cora")                       # doctest: +SKIP
>>> cora.num_nodes, cora.num_classes, cora.features.shape[1], cora.num_edges  # doctest: +SKIP
(2708, 7, 1433, 10556)
"""

from __future__ import annotations

import hashlib
import http.client
import os
import pickle
import tempfile
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .graphs import NodeSplits, symmetric_simple_edges

__all__ = [
    "CACHE_DIR_ENV",
    "DEFAULT_PLANETOID_URL",
    "PLANETOID_DIR_ENV",
    "PLANETOID_NAMES",
    "PLANETOID_URL_ENV",
    "PlanetoidDataset",
    "load_planetoid",
]

#: Directory that directly holds the ``ind.<name>.*`` files (CI points it at a shared copy).
PLANETOID_DIR_ENV = "GRAPHEMB_PLANETOID_DIR"
#: Root of graphemb's download cache; Planetoid files go to ``<it>/planetoid``.
CACHE_DIR_ENV = "GRAPHEMB_CACHE_DIR"
#: Base URL to download the ``ind.<name>.*`` files from (a mirror, or a local test server).
PLANETOID_URL_ENV = "GRAPHEMB_PLANETOID_URL"
DEFAULT_PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data/"
#: Seconds a download may stall (connect or read) before it is abandoned.
DOWNLOAD_TIMEOUT_S = 60.0

_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
_PICKLED_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph")

# Full sha256 of every published file. Files are verified before they are unpickled:
# pickle can run arbitrary code, so only the exact published bytes are ever loaded.
_SHA256 = {
    "ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
}

#: Dataset names :func:`load_planetoid` accepts (case-insensitive).
PLANETOID_NAMES = ("citeseer", "cora")

# The public split: validation is the 500 nodes right after the labelled training nodes.
_NUM_VAL = 500


@dataclass(frozen=True, eq=False, repr=False)
class PlanetoidDataset(NodeSplits):
    """A Planetoid citation graph with its standard public split.

    ``eq=False``: datasets compare by identity (element-wise tensor equality has no
    single truth value).

    Attributes
    ----------
    name : str
        Lower-case dataset name, ``"cora"`` or ``"citeseer"``.
    num_nodes : int
        Number of nodes ``N`` (Cora 2708, CiteSeer 3327).
    num_classes : int
        Number of classes ``C`` (Cora 7, CiteSeer 6).
    features : torch.Tensor
        ``float32 [N, F]`` raw 0/1 bag-of-words (Cora F=1433, CiteSeer F=3703), not
        normalised; see :meth:`row_normalized_features`. The 15 CiteSeer nodes without
        published features are all-zero rows.
    labels : torch.Tensor
        ``int64 [N]`` class ids in ``[0, C)``. The 15 padded CiteSeer nodes have no
        published label and get class 0 (argmax of an all-zero row, as in GCN and DGL);
        they belong to no split, so they never count towards training or metrics.
    src, dst : torch.Tensor
        ``int64 [E]`` directed edge list: every undirected edge in both directions,
        no self loops, no duplicates, sorted by ``(src, dst)``.
    train_idx, val_idx, test_idx : torch.Tensor
        ``int64`` sorted node ids of the public split: 20 labelled nodes per class,
        the next 500 nodes, and the 1000 test nodes of ``ind.<name>.test.index``.
    """

    name: str
    num_nodes: int
    num_classes: int
    features: torch.Tensor
    labels: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor

    @property
    def num_features(self) -> int:
        """Feature dimension ``F``."""
        return int(self.features.shape[1])

    def row_normalized_features(self) -> torch.Tensor:
        """Return a copy of :attr:`features` with every row scaled to sum to 1.

        This is the preprocessing of the GCN paper (and of DGL's loaders). Rows that
        are all zero stay zero instead of becoming NaN.

        Returns
        -------
        torch.Tensor
            ``float32 [N, F]``.
        """
        row_sums = self.features.sum(dim=1, keepdim=True)
        return self.features / row_sums.clamp_min(1e-12)

    def __repr__(self) -> str:
        return (
            f"PlanetoidDataset(name={self.name!r}, num_nodes={self.num_nodes}, "
            f"num_edges={self.num_edges}, num_features={self.num_features}, "
            f"num_classes={self.num_classes}, train/val/test="
            f"{self.train_idx.numel()}/{self.val_idx.numel()}/{self.test_idx.numel()})"
        )


def load_planetoid(
    name: str = "cora",
    root: str | os.PathLike[str] | None = None,
    *,
    download: bool = True,
    url: str | None = None,
) -> PlanetoidDataset:
    """Load Cora or CiteSeer with the standard public (GCN) split.

    The files are read from exactly one directory, chosen in this order:

    1. ``root``, if given;
    2. else ``$GRAPHEMB_PLANETOID_DIR``, if set (it directly holds the ``ind.*`` files);
    3. else the cache, ``$GRAPHEMB_CACHE_DIR/planetoid`` or ``~/.cache/graphemb/planetoid``.

    Only the cache is ever written to: missing files are downloaded into it when
    ``download`` is true. A ``root`` or ``$GRAPHEMB_PLANETOID_DIR`` that lacks files is
    an error rather than a silent fallback, so a typo never loads other data.
    Every file read is checked against its published sha256 before it is parsed.

    Parameters
    ----------
    name : str
        ``"cora"`` or ``"citeseer"`` (case-insensitive).
    root : str or os.PathLike, optional
        Directory that directly contains the ``ind.<name>.*`` files.
    download : bool
        Download files missing from the cache. Downloads are written to a temporary
        file and renamed only once their sha256 matches, so the cache never holds a
        partial or corrupted file under its final name.
    url : str, optional
        Base URL of the files; default ``$GRAPHEMB_PLANETOID_URL`` or
        :data:`DEFAULT_PLANETOID_URL`. ``<url>/ind.<name>.<part>`` is fetched.

    Returns
    -------
    PlanetoidDataset
        Features ``float32 [N, F]``, labels ``int64 [N]``, symmetric edge list
        ``src, dst`` ``int64 [E]`` and the split indices.

    Raises
    ------
    ValueError
        Unknown ``name``, or a file whose sha256 differs from the published one.
    FileNotFoundError
        Files are missing and cannot be downloaded (``download=False``, or the
        directory is ``root`` / ``$GRAPHEMB_PLANETOID_DIR``).
    ImportError
        scipy is not installed (the files pickle scipy sparse matrices).
    OSError
        A download failed (network error, HTTP error, timeout).

    Examples
    --------
    >>> cora = load_planetoid("cora")                        # doctest: +SKIP
    >>> cora.features.shape, cora.train_idx.numel()          # doctest: +SKIP
    (torch.Size([2708, 1433]), 140)
    >>> x = cora.row_normalized_features()                   # doctest: +SKIP
    """
    key = name.lower() if isinstance(name, str) else name
    if key not in PLANETOID_NAMES:
        raise ValueError(
            f"unknown Planetoid dataset {name!r}; supported names: {', '.join(PLANETOID_NAMES)}"
        )
    _require_scipy()
    directory = _directory_with_files(key, root, download, url)
    raw = {part: _read_verified(directory / f"ind.{key}.{part}") for part in _PARTS}
    return _build_dataset(key, raw)


def _directory_with_files(
    key: str, root: str | os.PathLike[str] | None, download: bool, url: str | None
) -> Path:
    """The directory that :func:`load_planetoid` reads (see there), the files of ``key``
    downloaded into it where they are missing and it may; FileNotFoundError, with the
    remedy, where they are missing and it may not."""
    directory, how_chosen, writable = _resolve_directory(root)
    filenames = [f"ind.{key}.{part}" for part in _PARTS]
    missing = [f for f in filenames if not (directory / f).is_file()]
    if not missing:
        return directory
    if not (writable and download):
        if writable:
            remedy = (
                f"pass download=True to fetch them, or set {PLANETOID_DIR_ENV} to a "
                "directory holding them"
            )
        else:
            remedy = (
                f"put them there; downloads only go to the cache (root=None with "
                f"{PLANETOID_DIR_ENV} unset)"
            )
        raise FileNotFoundError(
            f"Planetoid file(s) {', '.join(missing)} not found; directory searched: "
            f"{directory} ({how_chosen}). To fix: {remedy}."
        )
    base_url = url or os.environ.get(PLANETOID_URL_ENV) or DEFAULT_PLANETOID_URL
    directory.mkdir(parents=True, exist_ok=True)
    for filename in missing:
        _download_verified(base_url, filename, directory)
    return directory


def _require_scipy() -> None:
    # The pickles reference scipy.sparse classes; fail early with an actionable message.
    try:
        import scipy.sparse  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "load_planetoid needs scipy to read the Planetoid files (they pickle scipy "
            "sparse matrices): pip install scipy"
        ) from exc


def _resolve_directory(root: str | os.PathLike[str] | None) -> tuple[Path, str, bool]:
    """Return ``(directory, how it was chosen, whether downloads may go there)``."""
    if root is not None:
        return Path(root).expanduser(), "the root argument", False
    env_dir = os.environ.get(PLANETOID_DIR_ENV)
    if env_dir:
        return Path(env_dir).expanduser(), f"${PLANETOID_DIR_ENV}", False
    cache_root = os.environ.get(CACHE_DIR_ENV)
    if cache_root:
        cache_dir = Path(cache_root).expanduser() / "planetoid"
        return cache_dir, f"the cache under ${CACHE_DIR_ENV}", True
    return Path.home() / ".cache" / "graphemb" / "planetoid", "the default cache", True


def _checksum_error(filename: str, source: str, actual: str) -> ValueError:
    return ValueError(
        f"sha256 mismatch for {filename} ({source}): expected {_SHA256[filename]}, "
        f"got {actual}. The file is corrupted or not the published Planetoid file."
    )


def _read_verified(path: Path) -> bytes:
    # Hash the very bytes that are parsed, so nothing can change between check and use.
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != _SHA256[path.name]:
        raise _checksum_error(path.name, f"read from {path}; delete or replace it", actual)
    return data


def _download_verified(base_url: str, filename: str, directory: Path) -> None:
    """Fetch one file into ``directory``; it appears under its final name only if intact."""
    file_url = base_url.rstrip("/") + "/" + filename
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{filename}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(file_url, timeout=DOWNLOAD_TIMEOUT_S) as response:
                    while chunk := response.read(1 << 16):
                        digest.update(chunk)
                        out.write(chunk)
            except (OSError, http.client.HTTPException) as exc:
                # URLError, HTTPError and timeouts are OSErrors; a truncated body is not.
                raise OSError(
                    f"could not download {filename} from {file_url}: {exc}. Set "
                    f"{PLANETOID_DIR_ENV} to a directory holding the files, or pass "
                    f"url= / set {PLANETOID_URL_ENV} to a reachable mirror."
                ) from exc
        actual = digest.hexdigest()
        if actual != _SHA256[filename]:
            raise _checksum_error(filename, f"downloaded from {file_url}; not kept", actual)
        os.replace(tmp_name, directory / filename)
    except BaseException:
        # Also on KeyboardInterrupt: never leave the temporary file behind.
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _unpickle(data: bytes) -> object:
    # Python-2 pickles; recent scipy warns that the pickled class paths
    # (scipy.sparse.csr.csr_matrix) are deprecated aliases.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pickle.loads(data, encoding="latin1")


def _dense(matrix: object) -> np.ndarray:
    array = matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)
    return np.asarray(array, dtype=np.float32)


def _build_dataset(name: str, raw: dict[str, bytes]) -> PlanetoidDataset:
    """Reproduce the preprocessing of Kipf's GCN ``load_data`` (as DGL and PyG do)."""
    parsed = {part: _unpickle(raw[part]) for part in _PICKLED_PARTS}
    allx, tx = _dense(parsed["allx"]), _dense(parsed["tx"])
    ally, ty = np.asarray(parsed["ally"]), np.asarray(parsed["ty"])
    num_train = int(np.asarray(parsed["y"]).shape[0])
    adjacency: dict[int, list[int]] = parsed["graph"]  # type: ignore[assignment]

    # test.index lists the test nodes in the order of the rows of tx/ty.
    test_idx_reorder = np.array(raw["test.index"].decode("ascii").split(), dtype=np.int64)
    test_idx_range = np.sort(test_idx_reorder)

    # Test nodes occupy ids min..max of test.index. CiteSeer has ids in that range with
    # no row in tx/ty (isolated nodes): give them zero features and a zero label row,
    # exactly as GCN pads them. For Cora the range is complete and this changes nothing.
    first_test, last_test = int(test_idx_range[0]), int(test_idx_range[-1])
    positions = test_idx_range - first_test
    tx_full = np.zeros((last_test - first_test + 1, tx.shape[1]), dtype=np.float32)
    tx_full[positions] = tx
    ty_full = np.zeros((last_test - first_test + 1, ty.shape[1]), dtype=ty.dtype)
    ty_full[positions] = ty

    features = np.vstack((allx, tx_full))
    features[test_idx_reorder] = features[test_idx_range]
    onehot = np.vstack((ally, ty_full))
    onehot[test_idx_reorder] = onehot[test_idx_range]
    # An all-zero (padded) row has argmax 0: class 0, as in GCN and DGL.
    labels = np.argmax(onehot, axis=1).astype(np.int64)
    num_nodes = features.shape[0]

    src, dst = _undirected_edge_list(adjacency, num_nodes, name)
    return PlanetoidDataset(
        name=name,
        num_nodes=num_nodes,
        num_classes=int(onehot.shape[1]),
        features=torch.from_numpy(features),
        labels=torch.from_numpy(labels),
        src=torch.from_numpy(src),
        dst=torch.from_numpy(dst),
        train_idx=torch.arange(num_train, dtype=torch.int64),
        val_idx=torch.arange(num_train, num_train + _NUM_VAL, dtype=torch.int64),
        test_idx=torch.from_numpy(test_idx_range),
    )


def _undirected_edge_list(
    adjacency: dict[int, list[int]], num_nodes: int, name: str
) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of every edge, without self loops or duplicates, sorted.

    Edge counts: Cora 10556, CiteSeer 9104 (as in PyG). DGL reports 9228 for CiteSeer
    because it keeps the 124 self loops of ``ind.citeseer.graph`` (networkx stores each
    once); Cora has none, so both agree on 10556 there.
    """
    heads = np.fromiter(
        (node for node, neighbours in adjacency.items() for _ in neighbours), dtype=np.int64
    )
    tails = np.fromiter(
        (n for neighbours in adjacency.values() for n in neighbours), dtype=np.int64
    )
    ends = np.concatenate((heads, tails))
    if ends.size and (ends.min() < 0 or ends.max() >= num_nodes):
        raise ValueError(
            f"ind.{name}.graph refers to node ids outside [0, {num_nodes}); "
            "the files do not belong together"
        )
    return symmetric_simple_edges(heads, tails)
