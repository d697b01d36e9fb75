"""How the centers of a batch of walks share their noise nodes: one small object per layout.

word2vec draws ``K`` noise nodes of their own for every (center, context) pair. Cheaper
layouts draw fewer and let several pairs score the same ones, weighted so that the
expected loss stays word2vec's:

* :class:`PairNegatives` (``"pair"``) -- ``K`` per pair, negatives of shape
  ``(W, T, 2 * window, K)``;
* :class:`BatchNegatives` (``"batch"``) -- ``W`` blocks of ``M``, shape ``(W, M)``; block
  ``b`` serves one center of each of ``min(T, W)`` walks (:func:`~.windows.diagonal_blocks`);
* :class:`WalkNegatives` (``"walk"``) -- ``W`` blocks of ``M``, block ``w`` serving the
  centers of walk ``w``;
* :class:`PositionNegatives` (``"position"``) -- ``K`` per center, shape ``(W, T, K)``,
  shared by its context pairs.

A layout knows the shape of its negatives, the negative part of the loss of
:meth:`graphemb.skipgram.SkipGram.forward` (:meth:`Sharing.negative_loss`) and the
negative part of the fused SGD step of :meth:`~graphemb.skipgram.SkipGram.sgd_step`
(:meth:`Sharing.step_negatives`). A new layout is a subclass; :func:`layout` turns the
names users pass (``sharing="batch"``) into these objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .._checks import as_size
from .windows import diagonal_blocks, diagonal_permutation, slot_mask

__all__ = [
    "LAYOUTS",
    "SHARING",
    "TRAINER_SHARING",
    "BatchNegatives",
    "BlockNegatives",
    "PairNegatives",
    "PositionNegatives",
    "Sharing",
    "StepBatch",
    "WalkNegatives",
    "layout",
]

#: The rows of node ids, e.g. a :class:`~graphemb.NodeEmbedding`'s lookup.
Lookup = Callable[[torch.Tensor], torch.Tensor]

#: What :meth:`Sharing.step_negatives` returns: ``(center_grad, noise_ids, noise_grad, loss)``.
StepNoise = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]


@dataclasses.dataclass(frozen=True)
class StepBatch:
    """What one fused SGD step hands its layout (:meth:`Sharing.step_negatives`).

    Attributes
    ----------
    centers : Tensor, shape (W, T, D)
        Center rows of every walk position, in the dtype of the products.
    center_grad : Tensor, shape (W, T, D)
        The centers' ascent directions from their positive pairs, scaled by ``lr``.
    context_table : Tensor, shape (N, D)
        The context table (read only here).
    negatives : Tensor of int64
        Noise node ids, in the layout's shape.
    mask : Tensor of bool, shape (W, T, T)
        The pairs (:func:`~.windows.pair_mask`).
    window : int
        The model's window.
    lr : float
        The step's learning rate.
    num_negatives : int
        ``K``, the per-pair count shared negatives are weighted to stand for.
    with_loss : bool
        Whether the step also returns the negatives' part of the summed loss.
    """

    centers: torch.Tensor
    center_grad: torch.Tensor
    context_table: torch.Tensor
    negatives: torch.Tensor
    mask: torch.Tensor
    window: int
    lr: float
    num_negatives: int
    with_loss: bool


class Sharing:
    """A layout of negatives: which noise nodes each center of a batch of walks scores.

    Subclasses set :attr:`name` and implement :meth:`leading_shape`,
    :meth:`negative_loss` and, when :attr:`fused_step`, :meth:`step_negatives`.
    """

    #: The name users pass as ``sharing``.
    name: str = "abstract"
    #: Whether :meth:`graphemb.skipgram.SkipGram.sgd_step` can train with this layout.
    fused_step: bool = True
    #: Whether the torch trainer of :func:`graphemb.skipgram.train_node_embeddings`
    #: offers it.
    in_trainer: bool = True

    def leading_shape(self, num_walks: int, length: int, window: int) -> tuple[int, ...]:
        """Shape of the negatives of ``num_walks`` walks of ``length`` positions, without
        the last dimension (``K`` or ``M``, free)."""
        raise NotImplementedError

    def shape_text(self, num_walks: int, length: int, window: int) -> str:
        """The expected shape, for error messages."""
        raise NotImplementedError

    def negatives_shape(
        self, num_walks: int, length: int, window: int, num_negatives: int, block_size: int | None
    ) -> tuple[int, ...]:
        """The full shape of the negatives to draw (see
        :meth:`graphemb.skipgram.SkipGram.negatives_shape`)."""
        return (*self.leading_shape(num_walks, length, window), num_negatives)

    def check_negatives(
        self, negatives: torch.Tensor, num_walks: int, length: int, window: int
    ) -> None:
        """Raise ValueError naming the shape when ``negatives`` does not fit the walks."""
        leading = self.leading_shape(num_walks, length, window)
        if negatives.dim() != len(leading) + 1 or tuple(negatives.shape[:-1]) != leading:
            raise ValueError(
                f"negatives must have shape {self.shape_text(num_walks, length, window)} "
                f"(sharing={self.name!r}), got {tuple(negatives.shape)}"
            )

    def negative_loss(
        self,
        centers: torch.Tensor,
        negatives: torch.Tensor,
        mask: torch.Tensor,
        pairs_of: torch.Tensor,
        lookup: Lookup,
        *,
        window: int,
        num_negatives: int,
    ) -> torch.Tensor:
        """The summed ``log sigmoid(-u . v_n)`` terms of the batch (differentiable).

        Parameters
        ----------
        centers : Tensor, shape (W, T, D)
            Center rows of every walk position.
        negatives : Tensor of int64
            Noise node ids, in this layout's shape.
        mask : Tensor of bool, shape (W, T, T)
            The pairs (:func:`~.windows.pair_mask`).
        pairs_of : Tensor of int64, shape (W, T)
            Context pairs of each center, ``mask.sum(-1)``.
        lookup : callable
            Rows of noise node ids (the context table); called exactly once.
        window, num_negatives : int
            The model's window and ``K``.

        Returns
        -------
        Tensor, scalar
        """
        raise NotImplementedError

    def step_negatives(self, batch: StepBatch) -> StepNoise:
        """The negatives' part of one fused SGD step of ``batch``.

        Returns
        -------
        center_grad : Tensor, shape (W, T, D)
            ``batch.center_grad`` with the negatives' part added (possibly in place).
        noise_ids : Tensor of int64, shape (R,)
            The noise rows, flat.
        noise_grad : Tensor, shape (R, D)
            Their ascent directions, scaled by ``lr``.
        loss : Tensor, scalar, or None
            The negatives' part of the summed loss when ``batch.with_loss``.
        """
        raise ValueError(f"sgd_step does not support sharing={self.name!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class PairNegatives(Sharing):
    """``K`` negatives of their own per (center, context) pair: word2vec's draws.

    Negatives of shape ``(W, T, 2 * window, K)``: slot ``s`` of center ``t`` holds the
    negatives of its pair with the context at offset ``pair_offsets(window)[s]``; slots
    outside the drawn window are ignored.
    """

    name = "pair"
    in_trainer = False  # summed into one synchronous step it collapses rows: compiled only

    def leading_shape(self, num_walks: int, length: int, window: int) -> tuple[int, ...]:
        return (num_walks, length, 2 * window)

    def shape_text(self, num_walks: int, length: int, window: int) -> str:
        return f"(W, T, 2 * window, K) = ({num_walks}, {length}, {2 * window}, K)"

    def negative_loss(self, centers, negatives, mask, pairs_of, lookup, *, window, num_negatives):
        slot_valid = slot_mask(mask, window)  # (W, T, 2 * window)
        noise = lookup(negatives[slot_valid])  # (P, K, D)
        slot_center = slot_valid.nonzero()[:, :2]
        rows = centers[slot_center[:, 0], slot_center[:, 1]]  # (P, D)
        noise_scores = torch.bmm(noise, rows.unsqueeze(2)).squeeze(2)  # (P, K)
        return F.logsigmoid(-noise_scores).sum()

    def step_negatives(self, batch):
        centers, mask, lr = batch.centers, batch.mask, batch.lr
        num_walks, length, dim = centers.shape
        dtype, low = batch.context_table.dtype, centers.dtype
        slot_valid = slot_mask(mask, batch.window)
        noise_ids = batch.negatives[slot_valid]  # (P, K)
        per_center = slot_valid.view(num_walks * length, -1).sum(1)
        rows_of = torch.repeat_interleave(
            torch.arange(num_walks * length, device=mask.device), per_center
        )
        u = centers.view(-1, dim).index_select(0, rows_of)  # (P, D)
        noise = batch.context_table.index_select(0, noise_ids.reshape(-1))
        noise = noise.view(*noise_ids.shape, dim).to(low)
        noise_scores = torch.bmm(noise, u.unsqueeze(2)).squeeze(2).to(dtype)  # (P, K)
        loss = F.softplus(noise_scores).sum() if batch.with_loss else None
        negative = torch.sigmoid(noise_scores).mul_(-lr).to(low)
        center_grad = batch.center_grad.to(dtype)
        center_grad.view(-1, dim).index_add_(
            0, rows_of, torch.bmm(negative.unsqueeze(1), noise).squeeze(1).to(dtype)
        )
        noise_grad = (negative.unsqueeze(2) * u.unsqueeze(1)).view(-1, dim)
        return center_grad, noise_ids.reshape(-1), noise_grad, loss


class BlockNegatives(Sharing):
    """``W`` blocks of ``M`` negatives per batch of ``W`` walks, shape ``(W, M)``.

    Block ``b`` serves the centers :meth:`block_order` ``[b]``; each of its negatives is
    weighted ``num_negatives * pairs(center) / M``, so that the expected loss equals the
    per-pair one (PyTorch-BigGraph-style batch negatives). ``M`` defaults to
    ``num_negatives * (window + 1)``, the noise nodes a center draws in word2vec on average
    (its dynamic window averages ``(window + 1) / 2`` each side).
    """

    def leading_shape(self, num_walks: int, length: int, window: int) -> tuple[int, ...]:
        return (num_walks,)

    def shape_text(self, num_walks: int, length: int, window: int) -> str:
        return f"(W, M) = ({num_walks}, M)"

    def negatives_shape(self, num_walks, length, window, num_negatives, block_size):
        if block_size is None:
            block_size = num_negatives * (window + 1)
        return (num_walks, as_size("block_size", block_size, minimum=1))

    def block_order(self, num_walks: int, length: int, device: torch.device) -> torch.Tensor:
        """``(W, T)``: the flat index ``w * T + t`` of the center block ``b`` serves at
        position ``t``; a permutation of ``0 .. W*T - 1``."""
        raise NotImplementedError

    def block_permutation(
        self, num_walks: int, length: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(order, position_of)``: :meth:`block_order` flat and its inverse; None when
        block ``w`` serves walk ``w`` (no permutation needed)."""
        order = self.block_order(num_walks, length, device).view(-1)
        position_of = torch.empty_like(order)
        position_of[order] = torch.arange(order.numel(), device=device)
        return order, position_of

    def negative_loss(self, centers, negatives, mask, pairs_of, lookup, *, window, num_negatives):
        num_walks, length = pairs_of.shape
        order = self.block_order(num_walks, length, pairs_of.device)
        block_used = (pairs_of > 0).reshape(-1)[order].any(1)
        noise = lookup(negatives[block_used])  # (W', M, D)
        served = centers.reshape(num_walks * length, -1)[order][block_used]  # (W', T, D)
        noise_scores = torch.bmm(served, noise.transpose(1, 2))  # (W', T, M)
        weight = pairs_of.reshape(-1)[order][block_used].to(noise_scores.dtype)
        weight = weight * (num_negatives / max(negatives.shape[1], 1))
        return (F.logsigmoid(-noise_scores).sum(-1) * weight).sum()

    def step_negatives(self, batch):
        centers, mask, lr = batch.centers, batch.mask, batch.lr
        num_walks, length, dim = centers.shape
        dtype, low = batch.context_table.dtype, centers.dtype
        noise_ids = batch.negatives.reshape(-1)
        noise = batch.context_table.index_select(0, noise_ids).view(num_walks, -1, dim).to(low)
        weight = mask.sum(-1).to(dtype).mul_(-lr * batch.num_negatives / noise.shape[1])
        permutation = self.block_permutation(num_walks, length, mask.device)
        served = centers
        if permutation is not None:  # block b serves the centers order[b]
            order, position_of = permutation
            served = centers.view(-1, dim).index_select(0, order).view_as(centers)
            weight = weight.view(-1).index_select(0, order).view_as(weight)
        noise_scores = torch.bmm(served, noise.transpose(1, 2)).to(dtype)  # (W, T, M)
        loss = None
        if batch.with_loss:
            loss = -((F.softplus(noise_scores).sum(-1) * weight).sum() / lr)
        negative = torch.sigmoid(noise_scores).mul_(weight.unsqueeze(-1)).to(low)
        center_grad = batch.center_grad
        if permutation is not None:
            pushed = torch.bmm(negative, noise).view(-1, dim)
            # A permutation: gathering each center's row back beats a scatter-add.
            center_grad.view(-1, dim).add_(pushed.index_select(0, position_of))
        else:
            center_grad.baddbmm_(negative, noise)
        noise_grad = torch.bmm(negative.transpose(1, 2), served).view(-1, dim)
        return center_grad, noise_ids, noise_grad, loss


class BatchNegatives(BlockNegatives):
    """Block ``b`` serves one center of each of ``min(T, W)`` walks: the center at
    position ``t`` of walk ``w`` scores block ``(w + t) % W`` (:func:`~.windows.diagonal_blocks`).
    Consecutive positions of a walk are near-duplicates in the graph, so a block shared
    along a walk would push its noise rows with one coherent gradient."""

    name = "batch"

    def block_order(self, num_walks, length, device):
        return diagonal_blocks(num_walks, length, device)

    def block_permutation(self, num_walks, length, device):
        if num_walks <= 1:
            return None
        return diagonal_permutation(num_walks, length, device)


class WalkNegatives(BlockNegatives):
    """Block ``w`` serves every center of walk ``w``."""

    name = "walk"

    def block_order(self, num_walks, length, device):
        return torch.arange(num_walks * length, device=device).view(num_walks, length)

    def block_permutation(self, num_walks, length, device):
        return None


class PositionNegatives(Sharing):
    """``K`` negatives per center, shape ``(W, T, K)``, shared by its context pairs and
    weighted by their number: the per-pair loss in expectation, but a center sees ``K``
    distinct noise nodes where word2vec draws ``K`` per pair. Trained by autograd and an
    optimizer (no fused step)."""

    name = "position"
    fused_step = False

    def leading_shape(self, num_walks: int, length: int, window: int) -> tuple[int, ...]:
        return (num_walks, length)

    def shape_text(self, num_walks: int, length: int, window: int) -> str:
        return f"(W, T, K) = ({num_walks}, {length}, K)"

    def negative_loss(self, centers, negatives, mask, pairs_of, lookup, *, window, num_negatives):
        is_center = pairs_of > 0
        noise = lookup(negatives[is_center])  # (C, K, D)
        rows = centers[is_center]  # (C, D)
        noise_scores = torch.bmm(noise, rows.unsqueeze(2)).squeeze(2)  # (C, K)
        return (F.logsigmoid(-noise_scores).sum(-1) * pairs_of[is_center]).sum()


#: The layouts by name, in the order of :data:`SHARING`.
LAYOUTS: dict[str, Sharing] = {
    s.name: s for s in (PairNegatives(), BatchNegatives(), WalkNegatives(), PositionNegatives())
}

#: How :meth:`graphemb.skipgram.SkipGram.forward` shares negatives: "pair" (word2vec),
#: "batch", "walk", "position".
SHARING = tuple(LAYOUTS)

#: The torch trainer's choices of ``sharing`` (word2vec's "pair" is the compiled trainer).
TRAINER_SHARING = tuple(name for name, s in LAYOUTS.items() if s.in_trainer)


def layout(sharing: str | Sharing) -> Sharing:
    """The layout object of a name of :data:`SHARING` (a :class:`Sharing` passes through).

    >>> layout("batch")
    BatchNegatives()
    """
    if isinstance(sharing, Sharing):
        return sharing
    if sharing not in SHARING:
        raise ValueError(f"sharing must be one of {SHARING}, got {sharing!r}")
    return LAYOUTS[sharing]


def fused_names() -> str:
    """The names of the layouts :meth:`~graphemb.skipgram.SkipGram.sgd_step` supports, for
    messages: ``"'pair', 'batch' and 'walk'"``."""
    names = [repr(name) for name, s in LAYOUTS.items() if s.fused_step]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
