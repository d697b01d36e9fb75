"""Skip-gram with negative sampling (SGNS) over random walks: DeepWalk and node2vec.

Three pieces, each usable alone:

* :func:`context_pairs` -- every ``(center, context)`` pair of nodes at most ``window``
  steps apart in a walk (word2vec's symmetric context window), :data:`PAD` skipped;
* :class:`NegativeSampler` -- nodes drawn with probability proportional to
  ``degree ** 0.75`` (word2vec's unigram ** 0.75 noise distribution);
* :class:`SkipGram` -- two :class:`~graphemb.NodeEmbedding` tables, ``center`` (the node
  embeddings one keeps) and ``context``, and the loss

  .. math::

      \\mathcal{L} = -\\frac{1}{P} \\sum_{(c, o)} \\Big[\\log\\sigma(u_c \\cdot v_o)
      + \\sum_{k=1}^{K} \\log\\sigma(-u_c \\cdot v_{n_k})\\Big]

  over the ``P`` positive pairs of a batch, ``u`` rows of ``center`` and ``v`` rows of
  ``context``.

The tables are ordinary embeddings: any :mod:`graphemb.optim` optimizer trains them, in one
process or on N ranks (shared memory or partitioned), with no change to the model.

:meth:`SkipGram.forward` reads a batch of walks directly: the rows of every walk position
are looked up once -- not once per pair, ``2 * window`` pairs per position -- and one
batched product per walk scores every center against every context (the pairs are its
band ``0 < |i - j| <= window``). Its negatives are drawn per center position and shared by
that center's context pairs, so ``K`` negative rows per position instead of per pair; the
objective is the same in expectation as with negatives per pair. Fewer rows looked up means
fewer gradient rows for the optimizer: about ``2 * window`` times fewer than a plain
pair-by-pair skip-gram on the same samples. :meth:`SkipGram.pair_loss` takes explicit
pairs.

Example
-------
>>> import torch
>>> from graphemb.graph import Graph
>>> from graphemb.optim import SparseAdam
>>> from graphemb.sampling.walks import RandomWalker
>>> from graphemb.skipgram import NegativeSampler, SkipGram
>>> ring = Graph.from_edges(torch.arange(6), (torch.arange(6) + 1) % 6)
>>> walker, sampler = RandomWalker(ring), NegativeSampler.from_graph(ring)
>>> model = SkipGram(ring.num_nodes, 8, window=2, name="doc-ring")
>>> opt = SparseAdam(model.embeddings, lr=0.05)
>>> walks = walker(torch.arange(6), walk_length=5)                  # (6, 6)
>>> loss = model(walks, sampler((6, 6, 3)))                          # 3 negatives per position
>>> loss.backward()
>>> opt.step()
>>> model.num_pairs(walks, window=2)                                 # 6 walks x 18 pairs
108
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.nn.functional as F

from ._checks import as_size
from .distributed.coordination import DEFAULT_TIMEOUT
from .embedding import NodeEmbedding
from .graph import Graph
from .sampling.walks import PAD
from .storage import Partition

__all__ = ["NegativeSampler", "SkipGram", "context_pairs"]


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
    walks = _checked_walks(walks)
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


class NegativeSampler:
    """Draws nodes with probability proportional to ``weights ** power``.

    Sampling inverts the cumulative distribution (float64, one binary search per draw), so
    a node of weight 0 is never drawn.

    Parameters
    ----------
    weights : Tensor, shape (N,)
        Non-negative weight of every node, e.g. its degree; at least one positive. Its
        device is where samples are drawn.
    power : float
        Exponent applied to the weights (word2vec: 0.75; 0 gives uniform over the nodes of
        positive weight).

    Examples
    --------
    >>> sampler = NegativeSampler(torch.tensor([0.0, 1.0, 16.0]), power=0.75)
    >>> sampler.probabilities
    tensor([0.0000, 0.1111, 0.8889], dtype=torch.float64)
    >>> sampler((2, 3), generator=torch.Generator().manual_seed(0)).shape
    torch.Size([2, 3])
    """

    def __init__(self, weights: torch.Tensor, power: float = 0.75) -> None:
        if not isinstance(weights, torch.Tensor) or weights.dim() != 1:
            raise TypeError(
                f"weights must be a 1-dimensional tensor, got "
                f"{getattr(weights, 'shape', type(weights).__name__)}"
            )
        if weights.dtype == torch.bool or weights.is_complex():
            raise TypeError(f"weights must be real numbers, got dtype {weights.dtype}")
        if (
            isinstance(power, bool)
            or not isinstance(power, (int, float))
            or not (math.isfinite(power) and power >= 0)
        ):
            raise ValueError(f"power must be a finite number >= 0, got {power!r}")
        weights = weights.to(torch.float64)
        if weights.numel() == 0 or not bool(torch.isfinite(weights).all()):
            raise ValueError("weights must be a non-empty tensor of finite numbers")
        if bool((weights < 0).any()):
            bad = int(torch.nonzero(weights < 0)[0])
            raise ValueError(f"weights must be >= 0, weights[{bad}] = {float(weights[bad])}")
        scaled = torch.where(weights > 0, weights.pow(power), torch.zeros_like(weights))
        total = float(scaled.sum())
        if total <= 0:
            raise ValueError("weights are all zero: no node can be drawn")
        self._probabilities = scaled / total
        cdf = torch.cumsum(scaled, 0).div_(total)
        # The last positive node's cumulative value is exactly 1: a draw u < 1 finds a node.
        cdf[int(torch.nonzero(scaled)[-1]) :] = 1.0
        self._cdf = cdf
        self._power = float(power)

    @classmethod
    def from_graph(cls, graph: Graph, power: float = 0.75) -> NegativeSampler:
        """Weights = in-degrees of ``graph`` (how often walks enter a node; equal to the
        degree for undirected graphs), on the graph's device."""
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a graphemb.graph.Graph, got {type(graph).__name__}")
        return cls(graph.in_degrees(), power)

    @property
    def probabilities(self) -> torch.Tensor:
        """Probability of drawing each node, float64, shape (N,)."""
        return self._probabilities

    @property
    def num_nodes(self) -> int:
        return self._cdf.numel()

    @property
    def device(self) -> torch.device:
        return self._cdf.device

    def __call__(
        self, shape: tuple[int, ...] | torch.Size, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Independent draws, int64 node ids of the given ``shape``, on :attr:`device`."""
        shape = tuple(as_size("shape", s) for s in shape)
        if generator is not None and generator.device.type != self.device.type:
            raise ValueError(f"generator is on {generator.device}, the sampler on {self.device}")
        uniform = torch.rand(shape, dtype=torch.float64, device=self.device, generator=generator)
        nodes = torch.searchsorted(self._cdf, uniform.reshape(-1), right=True)
        return nodes.clamp_(max=self.num_nodes - 1).view(shape)

    def __repr__(self) -> str:
        return f"NegativeSampler(num_nodes={self.num_nodes}, power={self._power})"


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
    ) -> None:
        super().__init__()
        self.window = as_size("window", window, minimum=1)
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

    @property
    def embeddings(self) -> list[NodeEmbedding]:
        """``[center, context]``, for the optimizer and checkpoints."""
        return [self.center, self.context]

    # ------------------------------------------------------------------ losses
    def forward(self, walks: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """Mean SGNS loss over the context pairs of ``walks`` (see :func:`context_pairs`).

        Parameters
        ----------
        walks : Tensor of int64, shape (W, T)
            Walks, :data:`PAD` after their end.
        negatives : Tensor of int64, shape (W, T, K)
            ``K`` negative nodes per walk position, shared by the position's context pairs
            (the loss term of each pair adds ``sum_k log sigmoid(-u_c . v_{n_k})``).

        Returns
        -------
        Tensor, scalar
            The loss divided by the number of positive pairs ``P`` (0 when ``P == 0``).
            With ``negatives[w, t]`` repeated for each pair of center ``walks[w, t]``,
            equal to :meth:`pair_loss` on :func:`context_pairs`.

        Notes
        -----
        The scores of a walk form a ``(T, T)`` matrix: memory and work grow with ``T**2``
        per walk, cheap up to walks of a few hundred steps; split longer walks into pieces
        (pairs across a cut are then lost).
        """
        walks = _checked_walks(walks)
        if not isinstance(negatives, torch.Tensor):
            raise TypeError(f"negatives must be a tensor, got {type(negatives).__name__}")
        if negatives.dim() != 3 or tuple(negatives.shape[:2]) != tuple(walks.shape):
            raise ValueError(
                f"negatives must have shape (W, T, K) = ({walks.shape[0]}, {walks.shape[1]}, K)"
                f", got {tuple(negatives.shape)}"
            )
        length = walks.shape[1]
        real = walks != PAD
        # mask[w, i, j]: positions i and j of walk w form a pair (0 < |i - j| <= window).
        distance = torch.arange(length, device=walks.device)
        distance = (distance[:, None] - distance[None, :]).abs_()
        band = (distance > 0) & (distance <= self.window)
        everywhere = bool(real.all())
        mask = band.expand(walks.shape[0], length, length)
        if not everywhere:
            mask = mask & real[:, :, None] & real[:, None, :]
        pairs_of = mask.sum(-1)  # (W, T): context pairs of each position
        used = pairs_of > 0
        everywhere = everywhere and (bool(used.all()) or walks.numel() == 0)
        # Look up only positions that are in some pair: a row looked up without a gradient
        # would still count as updated (Adam's moments decay, its step count grows).
        if everywhere:
            centers = self.center(walks)
            contexts = self.context(walks)
            noise = self.context(negatives)
        else:
            centers = _scatter_rows(self.center(walks[used]), used)
            contexts = _scatter_rows(self.context(walks[used]), used)
            noise = _scatter_rows(self.context(negatives[used]), used)
        # Every center against every context of its walk in one batched product (fast
        # GEMMs, cheap backward), then the band of pairs; shifted views of the rows per
        # offset would cost a full-size gradient buffer per view in backward.
        scores = torch.bmm(centers, contexts.transpose(1, 2))  # (W, T, T)
        positive = (F.logsigmoid(scores) * mask).sum()
        negative_scores = (noise * centers.unsqueeze(2)).sum(-1)  # (W, T, K)
        negative = (F.logsigmoid(-negative_scores).sum(-1) * pairs_of).sum()
        num_pairs = int(pairs_of.sum())
        return -(positive + negative) / max(num_pairs, 1)

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
        walks = _checked_walks(walks)
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


def _checked_walks(walks: torch.Tensor) -> torch.Tensor:
    if not isinstance(walks, torch.Tensor):
        raise TypeError(f"walks must be a tensor of node ids, got {type(walks).__name__}")
    if walks.dtype == torch.bool or walks.is_floating_point() or walks.is_complex():
        raise TypeError(f"walks must hold integer node ids, got dtype {walks.dtype}")
    if walks.dim() != 2:
        raise ValueError(f"walks must have shape (W, T), got {tuple(walks.shape)}")
    return walks
