"""Small skip-gram batches shared by the skip-gram tests: walks with repeats and PAD tails,
and random float64 tables."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from graphemb.sampling.walks import PAD

NUM, DIM, WINDOW, K = 12, 5, 2, 3


def tiny_walks() -> tuple[torch.Tensor, torch.Tensor]:
    """Walks with repeats, PAD tails, and a walk whose only node is in no pair (node 11)."""
    walks = torch.tensor(
        [
            [0, 1, 2, 1, 3, 4],
            [5, 6, 5, 7, PAD, PAD],
            [8, 9, PAD, PAD, PAD, PAD],
            [11, PAD, PAD, PAD, PAD, PAD],
            [2, 3, 4, 10, 4, 0],
        ]
    )
    negatives = torch.randint(0, 11, (*walks.shape, K), generator=torch.Generator().manual_seed(1))
    return walks, negatives


def initial_tables(seed=0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(NUM, DIM, generator=gen, dtype=torch.float64) * 0.5,
        torch.randn(NUM, DIM, generator=gen, dtype=torch.float64) * 0.5,
    )


def walk_centers(walks: torch.Tensor) -> Iterator[tuple[int, int, int]]:
    """``(w, t, node)`` for every position of ``walks`` (shape (W, L)) that holds a node,
    not PAD: walk by walk, left to right, the centers a position-by-position reference
    visits."""
    rows, length = walks.shape
    for w in range(rows):
        for t in range(length):
            node = int(walks[w, t])
            if node != PAD:
                yield w, t, node
