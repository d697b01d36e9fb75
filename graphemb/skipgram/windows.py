"""Which walk positions pair up: context windows, word2vec's dynamic window and frequent-node
subsampling.

A walk is a row of node ids, :data:`~graphemb.sampling.walks.PAD` after its end. Position
``i`` (the center) and position ``j`` (the context) of one walk form a positive pair when
``0 < |i - j| <= radius`` and both hold real nodes. The functions here build those pairs
explicitly (:func:`context_pairs`), as a ``(W, T, T)`` mask (:func:`pair_mask`) or as slots
over the offsets ``-window .. -1, 1 .. window`` (:func:`slot_mask`); they draw word2vec's
per-position radius (:func:`dynamic_radii`) and drop frequent nodes before the windows are
formed (:func:`keep_probabilities`, :func:`subsample_walks`).
"""

from __future__ import annotations

import functools
import math

import torch

from .._checks import as_size, check_walks
from ..sampling.walks import PAD

__all__ = [
    "context_pairs",
    "diagonal_blocks",
    "diagonal_permutation",
    "dynamic_radii",
    "keep_probabilities",
    "pair_mask",
    "pair_offsets",
    "slot_mask",
    "subsample_walks",
]


def pair_offsets(window: int) -> torch.Tensor:
    """Offsets of a center's context slots: ``-window .. -1, 1 .. window`` (int64, 2 * window).

    >>> pair_offsets(2)
    tensor([-2, -1,  1,  2])
    """
    window = as_size("window", window, minimum=1)
    offsets = torch.arange(-window, window + 1)
    return offsets[offsets != 0]


def diagonal_blocks(
    num_walks: int, length: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Which centers each block of negatives serves with ``sharing="batch"``.

    The center at position ``t`` of walk ``w`` scores the negatives of block
    ``(w + t) % num_walks``: a block serves one center of each of ``min(T, W)`` walks
    (consecutive positions of one walk are near-duplicates of each other in the graph, so
    a block shared along a walk pushes its noise rows with one coherent gradient).

    Returns
    -------
    Tensor of int64, shape (W, T)
        ``order[b, t]``: the flat index ``w * T + t`` of the center that block ``b``
        serves at position ``t``, i.e. ``w = (b - t) % W``; a permutation of
        ``0 .. W*T - 1``.

    Examples
    --------
    >>> diagonal_blocks(3, 2)            # block 0 serves (w=0, t=0) and (w=2, t=1)
    tensor([[0, 5],
            [2, 1],
            [4, 3]])
    """
    block = torch.arange(num_walks, device=device).unsqueeze(1)
    position = torch.arange(length, device=device).unsqueeze(0)
    return ((block - position) % max(num_walks, 1)) * length + position


def dynamic_radii(
    shape: tuple[int, ...] | torch.Size,
    window: int,
    *,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """word2vec's dynamic window: an int64 radius per walk position, uniform in
    ``1 .. window`` (see ``radii`` of :meth:`SkipGram.forward` for whose window it is).

    A pair at distance ``d`` is then used with probability ``(window - d + 1) / window``:
    near nodes weigh more than far ones.
    """
    window = as_size("window", window, minimum=1)
    return torch.randint(1, window + 1, tuple(shape), device=device, generator=generator)


def keep_probabilities(counts: torch.Tensor, sample: float) -> torch.Tensor:
    """word2vec's frequent-token subsampling: probability of keeping each token.

    With ``f = counts / counts.sum()`` and threshold ``sample`` (word2vec's ``-sample``,
    gensim's ``sample``), a token of frequency ``f`` is kept with probability
    ``min(1, (sqrt(f / sample) + 1) * sample / f)``, as in word2vec's C code and gensim;
    ``sample = 0`` keeps everything.

    Parameters
    ----------
    counts : Tensor, shape (N,)
        Occurrences (or expected occurrences, e.g. degrees for walks on an undirected
        graph) of every node, >= 0.
    sample : float
        Threshold, >= 0 (1e-3 in gensim, 1e-5 .. 1e-3 usual).

    Returns
    -------
    Tensor of float64, shape (N,)
    """
    if not (isinstance(sample, (int, float)) and math.isfinite(sample) and sample >= 0):
        raise ValueError(f"sample must be a finite number >= 0, got {sample!r}")
    counts = counts.to(torch.float64)
    if sample == 0 or counts.numel() == 0:
        return torch.ones_like(counts)
    threshold = sample * float(counts.sum())
    safe = counts.clamp(min=1e-300)
    keep = ((safe / threshold).sqrt() + 1) * threshold / safe
    return keep.clamp_(max=1.0)


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
        From :func:`keep_probabilities`.

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


def context_pairs(walks: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every ``(center, context)`` pair at most ``window`` steps apart in a walk.

    Both directions are returned: nodes ``a`` and ``b`` ``j <= window`` steps apart give
    ``(a, b)`` and ``(b, a)``. Entries equal to :data:`PAD` (-1) take part in no pair.

    Parameters
    ----------
    walks : Tensor of int64, shape (W, T)
        Node ids, :data:`PAD` after the end of a walk.
    window : int
        Largest distance between a center and its context (>= 1).

    Returns
    -------
    centers, contexts : Tensor of int64, shape (P,)
        Ordered by offset ``j = 1 .. window``; within an offset, the forward pairs
        ``(walks[:, t], walks[:, t + j])`` in row-major order, then the backward ones.

    Examples
    --------
    >>> context_pairs(torch.tensor([[1, 2, 3, -1]]), window=1)
    (tensor([1, 2, 2, 3]), tensor([2, 3, 1, 2]))
    """
    walks = check_walks(walks)
    window = as_size("window", window, minimum=1)
    centers, contexts = [], []
    for offset in range(1, min(window, walks.shape[1] - 1) + 1):
        left, right = walks[:, :-offset], walks[:, offset:]
        valid = (left != PAD) & (right != PAD)
        left, right = left[valid], right[valid]
        centers += [left, right]
        contexts += [right, left]
    if not centers:
        empty = walks.new_empty(0)
        return empty, empty.clone()
    return torch.cat(centers), torch.cat(contexts)


def pair_mask(walks: torch.Tensor, window: int, radii: torch.Tensor | None) -> torch.Tensor:
    """``mask[w, i, j]``: positions ``i`` (center) and ``j`` (context) of walk ``w`` form a
    pair: ``0 < |i - j| <= min(radii[w, j], window)`` -- the window drawn at the context's
    position, as word2vec draws it -- both real nodes.

    Parameters
    ----------
    walks : Tensor of int64, shape (W, T)
    window : int
        Largest distance.
    radii : Tensor of int64, shape (W, T), optional
        The window drawn at each position (None: ``window`` everywhere).

    Returns
    -------
    Tensor of bool, shape (W, T, T)
    """
    real = walks != PAD
    if radii is None:
        reach = torch.full_like(walks, window)
    elif radii.shape != walks.shape:
        raise ValueError(
            f"radii must have the shape of walks {tuple(walks.shape)}, got {tuple(radii.shape)}"
        )
    else:
        reach = radii.clamp(max=window)
    reach = reach.masked_fill(~real, 0)  # a padding context pairs with nothing
    position = torch.arange(walks.shape[1], device=walks.device)
    distance = (position[:, None] - position[None, :]).abs_()
    distance.fill_diagonal_(window + 1)  # a node is not its own context
    return (distance <= reach.unsqueeze(1)) & real.unsqueeze(2)


def slot_mask(mask: torch.Tensor, window: int) -> torch.Tensor:
    """The pairs of ``mask`` (W, T, T) over the offsets of :func:`pair_offsets`: shape
    ``(W, T, 2 * window)``, entry ``[w, t, s]`` True when center ``t`` pairs with the
    position at offset ``pair_offsets(window)[s]``."""
    length = mask.shape[1]
    offsets = pair_offsets(window).to(mask.device)
    position = torch.arange(length, device=mask.device)
    target = position[:, None] + offsets[None, :]  # (T, S)
    inside = (target >= 0) & (target < length)
    gathered = mask.gather(2, target.clamp(0, length - 1).expand(mask.shape[0], -1, -1))
    return gathered & inside


@functools.lru_cache(maxsize=16)
def diagonal_permutation(
    num_walks: int, length: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(order, position_of)``, flat, for steps of one shape: ``order`` of
    :func:`diagonal_blocks` (the center at each slot of the blocks) and its inverse
    (the slot of center ``w * T + t``: ``((w + t) % W) * T + t``)."""
    order = diagonal_blocks(num_walks, length, device).view(-1)
    walk = torch.arange(num_walks, device=device).unsqueeze(1)
    position = torch.arange(length, device=device).unsqueeze(0)
    position_of = (((walk + position) % num_walks) * length + position).view(-1)
    return order, position_of
