"""Which walk positions pair up: word2vec's subsampling of frequent nodes, its dynamic
window, and the pairs of a batch of walks in rounds that update each row once.

A walk is a row of node ids, :data:`~graphemb.sampling.walks.PAD` after its end. Frequent
nodes are dropped first and the gaps closed
(:func:`~graphemb.sampling.subsampling.keep_probabilities`, :func:`subsample_walks`), so
the remaining neighbours move closer, as in word2vec. Then
the node at position ``t`` (the output row) and the node at position ``c`` (the input
row, the context) form a pair when ``0 < |t - c| <= radius[t]``, the radius drawn per
position (:func:`dynamic_radii`).

:func:`pair_rounds` groups the pairs of a batch by their offset ``c - t``: within one
offset, every position is the node of one pair and the context of one other, so each row
of either table is updated at most once per round (but for a node repeated within a
walk) -- the rounds are word2vec's sequential updates in another order.
"""

from __future__ import annotations

import torch

from .._checks import as_size, check_walks
from ..sampling.walks import PAD

__all__ = ["dynamic_radii", "pair_rounds", "subsample_walks"]


def dynamic_radii(
    shape: tuple[int, ...] | torch.Size,
    window: int,
    *,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """word2vec's dynamic window: an int64 radius per walk position, uniform in
    ``1 .. window``; the radius of a node's position bounds the distance of its contexts.

    A pair at distance ``d`` is then used with probability ``(window - d + 1) / window``:
    near nodes weigh more than far ones.
    """
    window = as_size("window", window, minimum=1)
    return torch.randint(1, window + 1, tuple(shape), device=device, generator=generator)


def subsample_walks(
    walks: torch.Tensor, keep: torch.Tensor, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Drop each walk token with probability ``1 - keep[node]``, closing the gaps.

    As in word2vec, dropped tokens are removed before the context windows are formed, so
    the remaining neighbours move closer. :data:`PAD` fills the end of each row.

    Parameters
    ----------
    walks : Tensor of int64, shape (W, T)
    keep : Tensor of float, shape (N,)
        From :func:`~graphemb.sampling.subsampling.keep_probabilities`.

    Returns
    -------
    Tensor of int64, shape (W, T)
    """
    walks = check_walks(walks)
    real = walks != PAD
    draw = torch.rand(walks.shape, dtype=torch.float64, device=walks.device, generator=generator)
    kept = real & (
        draw < keep.to(walks.device).index_select(0, walks.clamp(min=0).view(-1)).view(walks.shape)
    )
    # Stable order: kept tokens first, in walk order (argsort of a 0/1 key is not stable
    # in every torch version, so sort on key * T + position).
    length = walks.shape[1]
    key = (~kept).long() * length + torch.arange(length, device=walks.device)
    order = key.argsort(dim=1)
    compact = walks.gather(1, order)
    return compact.masked_fill_(~kept.gather(1, order), PAD)


def pair_rounds(
    walks: torch.Tensor, radii: torch.Tensor, window: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The (context, node) pairs of a batch of walks, one round per offset.

    Round ``(d, side)`` holds the pairs whose context lies ``d`` positions after
    (``side = +1``) or before (``side = -1``) the node's position, ``d = 1 .. window``,
    kept where the node's radius is at least ``d``.

    Parameters
    ----------
    walks : Tensor of int64, shape (W, T)
        Subsampled walks, :data:`PAD` after their ends.
    radii : Tensor of int64, shape (W, T)
        The radius of every position (:func:`dynamic_radii`).
    window : int
        The largest radius.

    Returns
    -------
    list of (Tensor, Tensor)
        ``2 * window`` rounds of ``(contexts (P,), nodes (P,))``: input rows and output rows.

    Examples
    --------
    >>> walks = torch.tensor([[7, 8, 9]])
    >>> [(c.tolist(), n.tolist()) for c, n in pair_rounds(walks, torch.full((1, 3), 2), 2)]
    [([8, 9], [7, 8]), ([7, 8], [8, 9]), ([9], [7]), ([7], [9])]
    """
    walks = check_walks(walks)
    rounds = []
    for distance in range(1, min(window, walks.shape[1] - 1) + 1):
        before, after = walks[:, :-distance], walks[:, distance:]
        both = (before != PAD) & (after != PAD)
        node_before = both & (radii[:, :-distance] >= distance)  # the context comes after
        node_after = both & (radii[:, distance:] >= distance)  # the context comes before
        rounds.append((after[node_before], before[node_before]))
        rounds.append((before[node_after], after[node_after]))
    return rounds
