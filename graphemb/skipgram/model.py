"""The skip-gram model: two embedding tables and the loss of skip-gram with negative
sampling over a batch of walks.

:class:`SkipGram` holds a ``center`` and a ``context`` :class:`~graphemb.NodeEmbedding`
(word2vec's input and output vectors) and computes

.. math::

    \\mathcal{L} = -\\frac{1}{P} \\sum_{(c, o)} \\Big[\\log\\sigma(u_c \\cdot v_o)
    + \\sum_{k=1}^{K} \\log\\sigma(-u_c \\cdot v_{n_k})\\Big]

over the ``P`` positive pairs of a batch, ``u`` rows of ``center`` and ``v`` rows of
``context``: from walks directly (:meth:`SkipGram.forward`, the rows of each walk position
looked up once and one batched product per walk), from explicit pairs
(:meth:`SkipGram.pair_loss`), or as a fused SGD step (:meth:`SkipGram.sgd_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import torch
import torch.nn.functional as F

from .._checks import as_size, check_walks
from ..distributed.coordination import DEFAULT_TIMEOUT
from ..embedding import NodeEmbedding
from ..sampling.walks import PAD
from ..storage import Partition
from .sharing import Sharing, layout
from .step import OccurrenceCounter, sgd_step
from .windows import pair_mask

__all__ = ["SkipGram"]


class SkipGram(torch.nn.Module):
    """Skip-gram with negative sampling: a ``center`` and a ``context`` embedding table.

    A :class:`torch.nn.Module` without dense parameters: train :attr:`embeddings` with a
    :mod:`graphemb.optim` optimizer. Created collectively with a process group (the two
    tables are :class:`~graphemb.NodeEmbedding` objects), and every call of
    :meth:`forward` / :meth:`pair_loss` looks up exactly three times -- center rows,
    context rows, negative rows -- whatever the batch, so partitioned tables (whose
    lookups are collective) work with batches of any size, empty included.

    Parameters
    ----------
    num_nodes : int
        Rows of each table.
    embedding_dim : int
        Size of each row ``D``.
    window : int
        Context window of :meth:`forward`: nodes at most this many steps apart in a walk
        form a positive pair.
    name : str
        The tables are named ``f"{name}.center"`` and ``f"{name}.context"``.
    device, partition, dtype, timeout
        Passed to both :class:`~graphemb.NodeEmbedding` tables.
    seed : int
        Seeds the initial center rows.
    sharing : str or Sharing
        How the centers of a batch share negatives: a name of :data:`SHARING` ("pair",
        word2vec's ``K`` per pair, by default) or a layout object of
        :mod:`graphemb.skipgram.sharing`; fixes the shape of ``negatives`` in
        :meth:`forward` and :meth:`sgd_step`.
    num_negatives : int
        ``K``: negatives per (center, context) pair, or the per-pair count that shared
        negatives are weighted to stand for.

    Notes
    -----
    Initialisation follows word2vec: center rows uniform in ``[-0.5 / D, 0.5 / D)``
    (drawn from a generator seeded with ``seed``: the same table on every run with the same
    storage), context rows zero.

    Examples
    --------
    >>> model = SkipGram(100, 16, window=3, name="doc-sg")
    >>> [e.name for e in model.embeddings]
    ['doc-sg.center', 'doc-sg.context']
    >>> loss = model.pair_loss(torch.tensor([0, 1]), torch.tensor([1, 2]),
    ...                        torch.tensor([[5, 6], [7, 8]]))
    >>> round(loss.item(), 4)                       # context rows start at 0: 3 * log 2
    2.0794
    """

    def __init__(
        self,
        num_nodes: int,
        embedding_dim: int,
        window: int = 5,
        name: str = "skipgram",
        *,
        device: torch.device | str | None = None,
        partition: Partition | None = None,
        dtype: torch.dtype = torch.float32,
        timeout: timedelta | float = DEFAULT_TIMEOUT,
        seed: int = 0,
        sharing: str | Sharing = "pair",
        num_negatives: int = 5,
    ) -> None:
        super().__init__()
        self.window = as_size("window", window, minimum=1)
        self.layout = layout(sharing)
        self.sharing = self.layout.name
        self.num_negatives = as_size("num_negatives", num_negatives, minimum=1)
        num_nodes = as_size("num_nodes", num_nodes, minimum=1)
        embedding_dim = as_size("embedding_dim", embedding_dim, minimum=1)
        bound = 0.5 / embedding_dim

        def init_center(table: torch.Tensor) -> None:
            generator = torch.Generator(device=table.device).manual_seed(seed)
            table.uniform_(-bound, bound, generator=generator)

        def table(part: str, init: Callable[[torch.Tensor], None] | None) -> NodeEmbedding:
            return NodeEmbedding(
                num_nodes,
                embedding_dim,
                f"{name}.{part}",
                init_func=init,
                device=device,
                partition=partition,
                dtype=dtype,
                timeout=timeout,
            )

        self.center = table("center", init_center)
        self.context = table("context", None)  # zeros, as word2vec's output vectors
        self._occurrences = OccurrenceCounter()  # sgd_step's count of repeated rows

    @property
    def embeddings(self) -> list[NodeEmbedding]:
        """``[center, context]``, for the optimizer and checkpoints."""
        return [self.center, self.context]

    # ------------------------------------------------------------------ losses
    def forward(
        self,
        walks: torch.Tensor,
        negatives: torch.Tensor,
        *,
        radii: torch.Tensor | None = None,
        reduction: str = "mean",
    ) -> torch.Tensor:
        """SGNS loss over the context pairs of ``walks``.

        Center position ``t`` of a walk pairs with every position ``j`` with
        ``0 < |t - j| <= radii[w, j]`` (both real nodes); without ``radii`` the radius is
        :attr:`window` everywhere (the pairs of :func:`context_pairs`).

        Parameters
        ----------
        walks : Tensor of int64, shape (W, T)
            Walks, :data:`PAD` after their end.
        negatives : Tensor of int64
            Negative nodes; the shape depends on :attr:`sharing`:

            * ``"pair"`` -- shape ``(W, T, 2 * window, K)``: ``K`` negatives of their own
              for the pair of center ``t`` and the context at offset
              ``pair_offsets(window)[s]`` (``-window .. -1, 1 .. window``); slots of
              offsets outside the radius are ignored. word2vec's semantics.
            * ``"batch"`` -- shape ``(W, M)``: ``W`` blocks of ``M`` negatives; the
              center at position ``t`` of walk ``w`` scores block ``(w + t) % W`` (see
              :func:`diagonal_blocks`), each negative weighted
              ``num_negatives * pairs(t) / M`` so that the expected loss equals the
              per-pair one (PyTorch-BigGraph-style batch negatives; a block serves
              centers of different walks).
            * ``"walk"`` -- shape ``(W, M)``: as ``"batch"``, but block ``w`` serves
              every center of walk ``w``: the centers of a walk are alike, and their
              shared noise rows move in one coherent push.
            * ``"position"`` -- shape ``(W, T, K)``: ``K`` negatives per center, shared
              by its context pairs and weighted by their number. Same loss in
              expectation but far noisier with a wide window: a center sees ``K``
              distinct noise nodes where word2vec draws ``K`` per pair.

            The layouts are the objects of :mod:`graphemb.skipgram.sharing`.
        radii : Tensor of int64, shape (W, T), optional
            The window drawn at each position (word2vec's dynamic window: uniform in
            ``1 .. window``, see :func:`dynamic_radii`); values above :attr:`window` act
            as :attr:`window`. As in word2vec, the window belongs to the node that is
            predicted: position ``j``'s ``context`` row (its output vector) is scored
            against the ``center`` rows (input vectors) within ``radii[w, j]`` of it
            (drawn at the center instead, all of a center's pairs would share one draw).
        reduction : {"mean", "sum"}
            ``"mean"`` divides the loss by the number of positive pairs ``P`` (0 when
            ``P == 0``); ``"sum"`` gives word2vec's per-pair SGD with a sparse SGD
            optimizer.

        Returns
        -------
        Tensor, scalar
            With ``sharing="pair"``, equal to :meth:`pair_loss` on the same pairs and
            negatives.

        Notes
        -----
        The scores of a walk form a ``(T, T)`` matrix: memory and work grow with ``T**2``
        per walk, cheap up to walks of a few hundred steps.
        """
        walks = check_walks(walks)
        if reduction not in ("mean", "sum"):
            raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
        if not isinstance(negatives, torch.Tensor):
            raise TypeError(f"negatives must be a tensor, got {type(negatives).__name__}")
        num_walks, length = walks.shape
        self.layout.check_negatives(negatives, num_walks, length, self.window)
        mask = pair_mask(walks, self.window, radii)
        pairs_of = mask.sum(-1)  # (W, T): context pairs of each center
        # Look up only positions that are in some pair: a row looked up without a gradient
        # would still count as updated (Adam's moments decay, its step count grows).
        in_pair = (pairs_of > 0) | mask.any(1)
        if bool(in_pair.all()):
            centers = self.center(walks)
            contexts = self.context(walks)
        else:
            centers = _scatter_rows(self.center(walks[in_pair]), in_pair)
            contexts = _scatter_rows(self.context(walks[in_pair]), in_pair)
        # Every center against every context of its walk in one batched product (fast
        # GEMMs, cheap backward), then the pairs of the mask; shifted views of the rows per
        # offset would cost a full-size gradient buffer per view in backward.
        scores = torch.bmm(centers, contexts.transpose(1, 2))  # (W, T, T)
        positive = (F.logsigmoid(scores) * mask).sum()
        negative = self.layout.negative_loss(
            centers,
            negatives,
            mask,
            pairs_of,
            self.context,
            window=self.window,
            num_negatives=self.num_negatives,
        )
        loss = -(positive + negative)
        if reduction == "sum":
            return loss
        return loss / max(int(pairs_of.sum()), 1)

    def negatives_shape(
        self, walks_shape: tuple[int, ...] | torch.Size, block_size: int | None = None
    ) -> tuple[int, ...]:
        """Shape of the ``negatives`` that :meth:`forward` and :meth:`sgd_step` take for
        walks of ``walks_shape`` ``(W, T)``, under :attr:`sharing`.

        ``block_size`` is ``M`` of ``"batch"`` and ``"walk"``; default
        ``num_negatives * (window + 1)``, the noise nodes a center draws in word2vec on
        average (its dynamic window averages ``(window + 1) / 2`` each side).

        >>> SkipGram(10, 4, window=2, name="doc-shape", sharing="batch").negatives_shape((8, 6))
        (8, 15)
        """
        num_walks, length = (as_size("walks_shape", s) for s in walks_shape)
        return self.layout.negatives_shape(
            num_walks, length, self.window, self.num_negatives, block_size
        )

    @property
    def fused_step(self) -> bool:
        """Whether :meth:`sgd_step` can train this model: its layout of negatives has a
        fused step and every row of both tables lives in this process (local or shared
        storage, whose lookups are not collective)."""
        return self.layout.fused_step and not self.center.storage.collective_lookups

    @torch.no_grad()
    def sgd_step(
        self,
        walks: torch.Tensor,
        negatives: torch.Tensor,
        *,
        lr: float,
        radii: torch.Tensor | None = None,
        matmul_dtype: torch.dtype | None = None,
        duplicates: str = "sum",
        return_loss: bool = True,
    ) -> float | None:
        """One SGD step on the summed loss of :meth:`forward`, written straight into the
        tables: word2vec's update, batched, without autograd or an optimizer.

        ``w -= lr * grad`` of ``forward(walks, negatives, radii=radii, reduction="sum")``
        for every row, duplicates summed, gradients taken at the rows as they were before
        the step (as a :class:`~graphemb.optim.SparseSGD` step would do). Tables in shared
        memory are updated in place without locks, as word2vec's threads do ("Hogwild"):
        several processes may call this on one shared table at the same time.

        Needs every row in this process (local or shared storage, see
        :attr:`fused_step`); for partitioned tables use :meth:`forward` and a
        :mod:`graphemb.optim` optimizer. ``sharing="position"`` is not supported here.
        Returns the summed loss of the batch before the step (as
        ``forward(..., reduction="sum")``), or None with ``return_loss=False`` (which
        skips its computation).

        ``duplicates`` says how a row that occurs several times in the batch (as a
        center, or as a context or negative) moves: ``"sum"`` of its occurrences'
        gradients (the exact gradient step), ``"mean"``, ``"sqrt"`` (sum / sqrt(count))
        or ``"cap:C"`` (the sum, but at most ``C`` times the mean). word2vec applies the
        occurrences one after the other, each seeing the previous ones; summed at once
        they overshoot for rows repeated many times (hubs, a pair repeated along a walk
        that bounces between two nodes) and the tables can diverge; "mean" starves hubs
        on graphs with heavy-tailed degrees. :func:`train_node_embeddings` uses
        "cap:1.5" (the README's skip-gram section has the measurements).

        ``matmul_dtype`` (e.g. ``torch.bfloat16``) runs the batched products in that
        dtype, the tables and the update staying in theirs: faster on CPUs with bfloat16
        units (see :func:`fast_matmul_dtype`), scores exact to about 1 %, which SGD's own
        noise dwarfs.
        """
        if self.center.storage.collective_lookups:
            raise ValueError(
                f"sgd_step needs local or shared tables, got {self.center.storage_kind!r}"
            )
        return sgd_step(
            self.center.weight,
            self.context.weight,
            walks,
            negatives,
            self.layout,
            self.window,
            self.num_negatives,
            lr=lr,
            radii=radii,
            matmul_dtype=matmul_dtype,
            duplicates=duplicates,
            return_loss=return_loss,
            counter=self._occurrences,
        )

    def pair_loss(
        self, centers: torch.Tensor, contexts: torch.Tensor, negatives: torch.Tensor
    ) -> torch.Tensor:
        """Mean SGNS loss of explicit pairs.

        Parameters
        ----------
        centers, contexts : Tensor of int64, shape (P,)
            Positive pairs.
        negatives : Tensor of int64, shape (P, K)
            Negatives of each pair.

        Returns
        -------
        Tensor, scalar
            ``-(1/P) sum_i [log sigma(u_c . v_o) + sum_k log sigma(-u_c . v_{n_k})]``
            (0 when ``P == 0``).
        """
        if centers.dim() != 1 or contexts.shape != centers.shape:
            raise ValueError(
                f"centers and contexts must have one shape (P,), got {tuple(centers.shape)} "
                f"and {tuple(contexts.shape)}"
            )
        if negatives.dim() != 2 or negatives.shape[0] != centers.shape[0]:
            raise ValueError(
                f"negatives must have shape (P, K) with P = {centers.shape[0]}, got "
                f"{tuple(negatives.shape)}"
            )
        u = self.center(centers)
        v = self.context(contexts)
        noise = self.context(negatives)
        positive = F.logsigmoid((u * v).sum(-1)).sum()
        scores = (noise * u.unsqueeze(1)).sum(-1)  # (P, K)
        negative = F.logsigmoid(-scores).sum()
        return -(positive + negative) / max(centers.shape[0], 1)

    @staticmethod
    def num_pairs(walks: torch.Tensor, window: int) -> int:
        """Number of positive pairs :meth:`forward` trains on for ``walks``."""
        walks = check_walks(walks)
        window = as_size("window", window, minimum=1)
        real = walks != PAD
        return sum(
            2 * int((real[:, :-j] & real[:, j:]).sum())
            for j in range(1, min(window, walks.shape[1] - 1) + 1)
        )

    def extra_repr(self) -> str:
        return (
            f"num_nodes={self.center.num_embeddings}, embedding_dim="
            f"{self.center.embedding_dim}, window={self.window}, "
            f"storage={self.center.storage_kind!r}"
        )


def _scatter_rows(rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``rows`` (M, ...) placed at the True entries of ``mask`` (shape S), zeros elsewhere:
    shape ``S + rows.shape[1:]``, differentiable."""
    out = rows.new_zeros(*mask.shape, *rows.shape[1:])
    return out.masked_scatter(mask.view(*mask.shape, *([1] * (rows.dim() - 1))), rows)
