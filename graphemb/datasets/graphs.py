"""What the datasets share: split masks and the construction of simple undirected graphs."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["EdgeCount", "NodeSplits", "symmetric_simple_edges"]


class EdgeCount:
    """``num_edges`` of a dataset class whose ``src`` field is its directed edge list."""

    src: torch.Tensor  # declared here for type checkers; the dataset classes define it

    @property
    def num_edges(self) -> int:
        """Number of directed edges ``E`` (twice the number of undirected edges)."""
        return int(self.src.numel())


class NodeSplits(EdgeCount):
    """Masks and counts derived from the ``src``, ``train_idx``, ``val_idx``, ``test_idx`` and
    ``num_nodes`` fields of a dataset class."""

    # Declared here for type checkers; the dataset classes define them.
    num_nodes: int
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor

    @property
    def train_mask(self) -> torch.Tensor:
        """``bool [N]``, True on :attr:`train_idx`."""
        return _index_to_mask(self.train_idx, self.num_nodes)

    @property
    def val_mask(self) -> torch.Tensor:
        """``bool [N]``, True on :attr:`val_idx`."""
        return _index_to_mask(self.val_idx, self.num_nodes)

    @property
    def test_mask(self) -> torch.Tensor:
        """``bool [N]``, True on :attr:`test_idx`."""
        return _index_to_mask(self.test_idx, self.num_nodes)


def _index_to_mask(index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[index] = True
    return mask


def symmetric_simple_edges(heads: np.ndarray, tails: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of every drawn edge, without self loops or duplicates, sorted.

    Duplicates are removed so that sum-aggregating GNN layers see a simple graph, as
    with the Planetoid datasets; at sparse degrees they are rare anyway.
    """
    keep = heads != tails
    heads, tails = heads[keep], tails[keep]
    # One int64 key per directed edge, ordered like (src, dst). Written in place into
    # one buffer: at millions of edges, fresh temporaries cost more than the arithmetic.
    num = heads.size
    keys = np.empty(2 * num, dtype=np.int64)
    forward, backward = keys[:num], keys[num:]
    np.left_shift(heads, 32, out=forward)
    forward |= tails
    np.left_shift(tails, 32, out=backward)
    backward |= heads
    # Sort, then drop repeats: what np.unique does, without its extra bookkeeping.
    keys.sort()
    if keys.size:
        first = np.empty(keys.size, dtype=bool)
        first[0] = True
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        keys = keys[first]
    return keys >> 32, keys & 0xFFFFFFFF
