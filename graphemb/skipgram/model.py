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
band ``0 < |i - j| <= radius``). word2vec's semantics are the default: a dynamic window
(:func:`dynamic_radii`), ``K`` negatives of their own per (center, context) pair from
``degree ** 0.75`` (``sharing="pair"``), optional subsampling of frequent nodes
(:func:`keep_probabilities`, :func:`subsample_walks`), plain SGD whose learning rate decays
linearly over one pass. :func:`train_node_embeddings` runs word2vec's algorithm itself
(sequential per-pair updates, :mod:`graphemb.skipgram_compiled`) where the compiled module
is built; its torch trainer (CUDA graphs, fallback) uses cheaper negative layouts, by
default ``sharing="batch"``: ``W`` blocks of ``M`` negatives per step of ``W`` walks, each center
scored against a block drawn for another walk (:func:`diagonal_blocks`) and weighted to
the same expected loss (PyTorch-BigGraph's batch negatives): word2vec's F1 in
``benchmarks/bench_deepwalk_quality.py``, in a fraction of gensim's time. ``"walk"``
shares a block along one walk (up to 1.5 points lower F1 on Cora and CiteSeer), ``"position"``
shares ``K`` negatives per center among its ``2 * window`` pairs (a center sees ``K``
distinct noise nodes where word2vec sees up to ``2 * window * K``; measurably worse
embeddings, kept for comparison).

:meth:`SkipGram.sgd_step` applies word2vec's update to a batch without autograd or an
optimizer (products optionally in bfloat16); :func:`train_node_embeddings` is the whole
DeepWalk / node2vec pipeline, walks drawn and consumed chunk by chunk, optionally in
several processes writing into shared-memory tables. :meth:`SkipGram.pair_loss` takes
explicit pairs.

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
>>> loss = model(walks, sampler((6, 6, 4, 3)))    # 3 negatives per pair, 4 offsets
>>> loss.backward()
>>> opt.step()
>>> model.num_pairs(walks, window=2)                                 # 6 walks x 18 pairs
108
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.nn.functional as F

from ._checks import as_size
from .distributed.coordination import DEFAULT_TIMEOUT
from .embedding import NodeEmbedding
from .graph import Graph
from .sampling.walks import PAD
from .skipgram_compiled import (
    TrainingDiverged,
    check_finite,
    chunk_seed,
    compiled_trainer,
    hogwild_pass,
    init_tables,
)
from .storage import Partition

__all__ = [
    "COMPILED_LR",
    "SHARING",
    "TORCH_LR",
    "TRAINERS",
    "TRAINER_SHARING",
    "NegativeSampler",
    "SkipGram",
    "TrainingDiverged",
    "check_duplicates",
    "context_pairs",
    "diagonal_blocks",
    "dynamic_radii",
    "fast_matmul_dtype",
    "keep_probabilities",
    "pair_offsets",
    "subsample_walks",
]

#: Default learning rates of :func:`train_node_embeddings`: word2vec's for the compiled
#: trainer; higher for the torch trainer's batched steps (see its ``lr``).
COMPILED_LR, TORCH_LR = 0.025, 0.035

#: :func:`train_node_embeddings`' trainers.
TRAINERS = ("auto", "compiled", "torch")

#: How :meth:`SkipGram.forward` shares negatives: "pair" (word2vec), "batch", "walk",
#: "position".
SHARING = ("pair", "batch", "walk", "position")

#: The torch trainer's choices of ``sharing`` (word2vec's "pair" is the compiled trainer).
TRAINER_SHARING = ("batch", "walk", "position")


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
    walks = _checked_walks(walks)
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

    Sampling uses Walker's alias method over the nodes of positive weight (built once in
    float64, O(N)): a draw is one uniform column and one uniform number, no search (about
    5x faster than inverting the cumulative distribution), and a node of weight 0 is never
    drawn.

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
        positive = torch.nonzero(scaled).view(-1)
        keep, alias = _alias_table(self._probabilities.index_select(0, positive))
        self._nodes = positive  # column c of the table stands for node positive[c]
        self._keep = keep
        self._alias_nodes = positive.index_select(0, alias)
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
        return self._probabilities.numel()

    @property
    def alias_table(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(nodes, keep, alias_nodes)``, each of shape (n,) for the ``n`` nodes of positive
        weight: a draw picks a uniform column ``c`` and gives ``nodes[c]`` with probability
        ``keep[c]`` (float64), else ``alias_nodes[c]`` (int64 node ids)."""
        return self._nodes, self._keep, self._alias_nodes

    @property
    def device(self) -> torch.device:
        return self._probabilities.device

    def __call__(
        self, shape: tuple[int, ...] | torch.Size, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Independent draws, int64 node ids of the given ``shape``, on :attr:`device`."""
        shape = tuple(as_size("shape", s) for s in shape)
        if generator is not None and generator.device.type != self.device.type:
            raise ValueError(f"generator is on {generator.device}, the sampler on {self.device}")
        columns = torch.randint(
            self._nodes.numel(), shape, device=self.device, generator=generator
        ).view(-1)
        uniform = torch.rand(
            columns.shape, dtype=torch.float64, device=self.device, generator=generator
        )
        stays = uniform < self._keep.index_select(0, columns)
        nodes = torch.where(
            stays, self._nodes.index_select(0, columns), self._alias_nodes.index_select(0, columns)
        )
        return nodes.view(shape)

    def __repr__(self) -> str:
        return f"NegativeSampler(num_nodes={self.num_nodes}, power={self._power})"


def _alias_table(probabilities: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Walker's alias table of a distribution over ``n`` columns (Vose's construction,
    vectorized: every under-full column is paired in one round).

    Column ``c`` keeps itself with probability ``keep[c]`` and gives ``alias[c]``
    otherwise: drawing a uniform column, then that coin, draws ``c`` with probability
    ``probabilities[c]``.

    Parameters
    ----------
    probabilities : Tensor of float64, shape (n,)
        Positive, summing to 1.

    Returns
    -------
    keep : Tensor of float64, shape (n,)
    alias : Tensor of int64, shape (n,)
    """
    count = probabilities.numel()
    scaled = probabilities.cpu().double() * count  # mass of each column, in units of 1/n
    keep = torch.ones(count, dtype=torch.float64)
    alias = torch.arange(count)
    small = torch.nonzero(scaled < 1).view(-1)
    large = torch.nonzero(scaled >= 1).view(-1)
    while small.numel() and large.numel():
        # Lay the under-full columns' deficits end to end against the over-full ones'
        # excesses: each under-full column takes all it lacks from the over-full column
        # where its deficit starts. An over-full column that gave more than its excess
        # (the one deficit that straddles its end) is under-full in the next round.
        deficit = 1.0 - scaled.index_select(0, small)
        excess = scaled.index_select(0, large) - 1.0
        starts = torch.cumsum(deficit, 0) - deficit
        giver = torch.searchsorted(torch.cumsum(excess, 0), starts, right=True)
        paired = giver < large.numel()  # the rest: rounding left no excess for them
        if not bool(paired.any()):
            break
        under, over = small[paired], large.index_select(0, giver[paired])
        keep[under] = scaled.index_select(0, under)
        alias[under] = over
        scaled.index_add_(0, over, -deficit[paired])
        still_large = scaled.index_select(0, large) >= 1
        small = torch.cat([small[~paired], large[~still_large]])
        large = large[still_large]
    # Columns left unpaired hold mass 1 up to rounding: they keep themselves.
    return keep.to(probabilities.device), alias.to(probabilities.device)


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
        sharing: str = "pair",
        num_negatives: int = 5,
    ) -> None:
        super().__init__()
        self.window = as_size("window", window, minimum=1)
        if sharing not in SHARING:
            raise ValueError(f"sharing must be one of {SHARING}, got {sharing!r}")
        self.sharing = sharing
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
              ``PAIR_OFFSETS(window)[s]`` (``-window .. -1, 1 .. window``); slots of
              offsets outside the radius are ignored. word2vec's semantics.
            * ``"batch"`` -- shape ``(W, M)``: ``W`` blocks of ``M`` negatives; the
              center at position ``t`` of walk ``w`` scores block ``(w + t) % W`` (see
              :func:`diagonal_blocks`), each negative weighted
              ``num_negatives * pairs(t) / M`` so that the expected loss equals the
              per-pair one (PyTorch-BigGraph-style batch negatives; a block serves
              centers of different walks).
            * ``"walk"`` -- shape ``(W, M)``: as ``"batch"``, but block ``w`` serves
              every center of walk ``w``: the centers of a walk are alike, and their
              shared noise rows move in one coherent push (0.5 to 1.5 points of F1
              below ``"batch"`` and word2vec on Cora and CiteSeer at 10 walks per node).
            * ``"position"`` -- shape ``(W, T, K)``: ``K`` negatives per center, shared
              by its context pairs and weighted by their number. Same loss in
              expectation but far noisier with a wide window: a center sees ``K``
              distinct noise nodes where word2vec draws ``K`` per pair (kept for
              comparison; it trains worse embeddings, see
              benchmarks/bench_deepwalk_quality.py).
        radii : Tensor of int64, shape (W, T), optional
            The window drawn at each position (word2vec's dynamic window: uniform in
            ``1 .. window``, see :func:`dynamic_radii`); values above :attr:`window` act
            as :attr:`window`. As in word2vec, the window belongs to the node that is
            predicted: position ``j``'s ``context`` row (its output vector) is scored
            against the ``center`` rows (input vectors) within ``radii[w, j]`` of it.
            (Drawing it at the center instead ties all of a center's pairs to one draw;
            that scored 0.1 to 0.3 points of F1 lower on Cora, 20 seeds.)
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
        walks = _checked_walks(walks)
        if reduction not in ("mean", "sum"):
            raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
        if not isinstance(negatives, torch.Tensor):
            raise TypeError(f"negatives must be a tensor, got {type(negatives).__name__}")
        num_walks, length = walks.shape
        expected = {
            "pair": (f"(W, T, 2 * window, K) = ({num_walks}, {length}, {2 * self.window}, K)"),
            "batch": f"(W, M) = ({num_walks}, M)",
            "walk": f"(W, M) = ({num_walks}, M)",
            "position": f"(W, T, K) = ({num_walks}, {length}, K)",
        }[self.sharing]
        leading = {
            "pair": (num_walks, length, 2 * self.window),
            "batch": (num_walks,),
            "walk": (num_walks,),
            "position": (num_walks, length),
        }[self.sharing]
        if negatives.dim() != len(leading) + 1 or tuple(negatives.shape[:-1]) != leading:
            raise ValueError(
                f"negatives must have shape {expected} (sharing={self.sharing!r}), got "
                f"{tuple(negatives.shape)}"
            )
        mask = _pair_mask(walks, self.window, radii)
        pairs_of = mask.sum(-1)  # (W, T): context pairs of each center
        # Look up only positions that are in some pair: a row looked up without a gradient
        # would still count as updated (Adam's moments decay, its step count grows).
        is_center = pairs_of > 0
        in_pair = is_center | mask.any(1)
        if self.sharing == "pair":
            slot_valid = self._slot_mask(mask)  # (W, T, 2 * window)
            noise_ids = negatives[slot_valid]  # (P, K)
        elif self.sharing in ("walk", "batch"):
            order = self._block_order(num_walks, length, walks.device)
            block_used = is_center.reshape(-1)[order].any(1)
            noise_ids = negatives[block_used]  # (W', M)
        else:
            noise_ids = negatives[is_center]  # (C, K)
        if bool(in_pair.all()):
            centers = self.center(walks)
            contexts = self.context(walks)
        else:
            centers = _scatter_rows(self.center(walks[in_pair]), in_pair)
            contexts = _scatter_rows(self.context(walks[in_pair]), in_pair)
        noise = self.context(noise_ids)
        # Every center against every context of its walk in one batched product (fast
        # GEMMs, cheap backward), then the pairs of the mask; shifted views of the rows per
        # offset would cost a full-size gradient buffer per view in backward.
        scores = torch.bmm(centers, contexts.transpose(1, 2))  # (W, T, T)
        positive = (F.logsigmoid(scores) * mask).sum()
        if self.sharing == "pair":
            slot_center = slot_valid.nonzero()[:, :2]
            rows = centers[slot_center[:, 0], slot_center[:, 1]]  # (P, D)
            noise_scores = torch.bmm(noise, rows.unsqueeze(2)).squeeze(2)  # (P, K)
            negative = F.logsigmoid(-noise_scores).sum()
        elif self.sharing in ("walk", "batch"):
            served = centers.reshape(num_walks * length, -1)[order][block_used]  # (W', T, D)
            noise_scores = torch.bmm(served, noise.transpose(1, 2))  # (W', T, M)
            weight = pairs_of.reshape(-1)[order][block_used].to(noise_scores.dtype)
            weight = weight * (self.num_negatives / max(negatives.shape[1], 1))
            negative = (F.logsigmoid(-noise_scores).sum(-1) * weight).sum()
        else:
            rows = centers[is_center]  # (C, D)
            noise_scores = torch.bmm(noise, rows.unsqueeze(2)).squeeze(2)  # (C, K)
            negative = (F.logsigmoid(-noise_scores).sum(-1) * pairs_of[is_center]).sum()
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
        if self.sharing == "pair":
            return (num_walks, length, 2 * self.window, self.num_negatives)
        if self.sharing == "position":
            return (num_walks, length, self.num_negatives)
        if block_size is None:
            block_size = self.num_negatives * (self.window + 1)
        return (num_walks, as_size("block_size", block_size, minimum=1))

    def _block_order(self, num_walks: int, length: int, device: torch.device) -> torch.Tensor:
        """``(W, T)`` flat indices of the centers each block of negatives serves:
        :func:`diagonal_blocks` for ``"batch"``, walk ``b``'s own centers for ``"walk"``."""
        if self.sharing == "batch":
            return diagonal_blocks(num_walks, length, device)
        return torch.arange(num_walks * length, device=device).view(num_walks, length)

    def _slot_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """``mask`` (W, T, T) of pairs as ``(W, T, 2 * window)`` over the offsets of
        :func:`pair_offsets`."""
        length = mask.shape[1]
        offsets = pair_offsets(self.window).to(mask.device)
        position = torch.arange(length, device=mask.device)
        target = position[:, None] + offsets[None, :]  # (T, S)
        inside = (target >= 0) & (target < length)
        gathered = mask.gather(2, target.clamp(0, length - 1).expand(mask.shape[0], -1, -1))
        return gathered & inside

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

        Needs every row in this process (``storage_kind`` "local" or "shared"); for
        partitioned tables use :meth:`forward` and a :mod:`graphemb.optim` optimizer.
        ``sharing="position"`` is not supported here. Returns the summed loss of the
        batch before the step (as ``forward(..., reduction="sum")``), or None with
        ``return_loss=False`` (which skips its computation: a trainer that does not
        print it saves about a tenth of the step).

        ``duplicates`` says how a row that occurs several times in the batch (as a
        center, or as a context or negative) moves: ``"sum"`` of its occurrences'
        gradients (the exact gradient step), ``"mean"``, ``"sqrt"`` (sum / sqrt(count))
        or ``"cap:C"`` (the sum, but at most ``C`` times the mean). word2vec applies the
        occurrences one after the other, each seeing the previous ones; summed at once
        they overshoot for rows repeated many times (hubs, a pair repeated along a walk
        that bounces between two nodes) and the tables can diverge: mean row norm ~1000
        on Cora's graph with "sum" against gensim's ~4, Micro-F1 0.73 against 0.83.
        "mean" keeps Cora's norms but starves hubs on graphs with heavy-tailed degrees;
        "cap:1.5" (the trainer's default, with its learning rate 0.035) keeps both at
        gensim's F1 (benchmarks/bench_deepwalk_quality.py).

        ``matmul_dtype`` (e.g. ``torch.bfloat16``) runs the batched products in that
        dtype, the tables and the update staying in theirs: several times faster on CPUs
        with bfloat16 units (see :func:`fast_matmul_dtype`), scores exact to about 1 %,
        which SGD's own noise dwarfs.
        """
        if self.center.storage_kind not in ("local", "shared"):
            raise ValueError(
                f"sgd_step needs local or shared tables, got {self.center.storage_kind!r}"
            )
        if self.sharing == "position":
            raise ValueError("sgd_step supports sharing='pair', 'batch' and 'walk', not 'position'")
        cap = check_duplicates(duplicates)
        walks = _checked_walks(walks)
        num_walks, length = walks.shape
        if num_walks == 0 or length == 0:
            return 0.0 if return_loss else None
        center_table, context_table = self.center.weight, self.context.weight
        mask = _pair_mask(walks, self.window, radii)
        ids = walks.clamp(min=0)  # PAD rows are read, but get zero gradients
        flat = ids.view(-1)
        dim = center_table.shape[1]
        dtype = center_table.dtype
        low = dtype if matmul_dtype is None else matmul_dtype
        centers = center_table.index_select(0, flat).view(num_walks, length, dim).to(low)
        contexts = context_table.index_select(0, flat).view(num_walks, length, dim).to(low)
        # d/ds log sigmoid(s) = 1 - sigmoid(s) = sigmoid(-s); d/ds log sigmoid(-s) = -sigmoid(s).
        scores = torch.bmm(centers, contexts.transpose(1, 2)).to(dtype)
        scores.neg_()
        pair_mask = mask.to(dtype)
        loss = None
        if return_loss:  # -log sigmoid(s) = softplus(-s)
            loss = F.softplus(scores).mul_(pair_mask).sum()
        positive = torch.sigmoid(scores).mul_(pair_mask).mul_(lr).to(low)
        center_grad = torch.bmm(positive, contexts)  # ascent directions, scaled by lr
        context_grad = torch.bmm(positive.transpose(1, 2), centers)
        if self.sharing in ("walk", "batch"):
            noise_ids = negatives.reshape(-1)
            noise = context_table.index_select(0, noise_ids).view(num_walks, -1, dim).to(low)
            weight = mask.sum(-1).to(dtype).mul_(-lr * self.num_negatives / noise.shape[1])
            diagonal = self.sharing == "batch" and num_walks > 1
            if diagonal:  # block b serves the centers order[b]
                order, position_of = _diagonal_permutation(num_walks, length, walks.device)
                served = centers.view(-1, dim).index_select(0, order).view_as(centers)
                weight = weight.view(-1).index_select(0, order).view_as(weight)
            else:
                served = centers
            noise_scores = torch.bmm(served, noise.transpose(1, 2)).to(dtype)  # (W, T, M)
            if loss is not None:
                loss -= (F.softplus(noise_scores).sum(-1) * weight).sum() / lr
            negative = torch.sigmoid(noise_scores).mul_(weight.unsqueeze(-1)).to(low)
            if diagonal:
                pushed = torch.bmm(negative, noise).view(-1, dim)
                # A permutation: gathering each center's row back beats a scatter-add.
                center_grad.view(-1, dim).add_(pushed.index_select(0, position_of))
            else:
                center_grad.baddbmm_(negative, noise)
            noise_grad = torch.bmm(negative.transpose(1, 2), served).view(-1, dim)
        else:
            slot_valid = self._slot_mask(mask)
            noise_ids = negatives[slot_valid]  # (P, K)
            per_center = slot_valid.view(num_walks * length, -1).sum(1)
            rows_of = torch.repeat_interleave(
                torch.arange(num_walks * length, device=walks.device), per_center
            )
            u = centers.view(-1, dim).index_select(0, rows_of)  # (P, D)
            noise = context_table.index_select(0, noise_ids.reshape(-1))
            noise = noise.view(*noise_ids.shape, dim).to(low)
            noise_scores = torch.bmm(noise, u.unsqueeze(2)).squeeze(2).to(dtype)  # (P, K)
            if loss is not None:
                loss += F.softplus(noise_scores).sum()
            negative = torch.sigmoid(noise_scores).mul_(-lr).to(low)
            center_grad = center_grad.to(dtype)
            center_grad.view(-1, dim).index_add_(
                0, rows_of, torch.bmm(negative.unsqueeze(1), noise).squeeze(1).to(dtype)
            )
            noise_grad = (negative.unsqueeze(2) * u.unsqueeze(1)).view(-1, dim)
            noise_ids = noise_ids.reshape(-1)
        center_grad = center_grad.view(-1, dim).to(dtype)
        context_grad = context_grad.view(-1, dim).to(dtype)
        noise_grad = noise_grad.to(dtype)
        if duplicates != "sum":
            counter = self._occurrence_counter(center_table)
            _scale_duplicates([(flat, center_grad)], duplicates, cap, counter)
            # A context row also drawn as a negative counts once per occurrence of either.
            _scale_duplicates(
                [(flat, context_grad), (noise_ids, noise_grad)], duplicates, cap, counter
            )
        center_table.index_add_(0, flat, center_grad)
        context_table.index_add_(0, flat, context_grad)
        context_table.index_add_(0, noise_ids, noise_grad)
        return None if loss is None else float(loss)

    def _occurrence_counter(self, table: torch.Tensor) -> torch.Tensor:
        """A zeroed count per row, kept between steps (counting by scatter into it, then
        zeroing the touched entries, costs the batch's size, not the table's or a sort)."""
        counter = getattr(self, "_occurrences", None)
        if counter is None or counter.shape[0] != table.shape[0] or counter.device != table.device:
            counter = torch.zeros(table.shape[0], dtype=table.dtype, device=table.device)
            self._occurrences = counter
        return counter

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


def check_duplicates(duplicates: str) -> float | None:
    """The rule of :meth:`SkipGram.sgd_step` for rows repeated in a batch, checked.

    Returns the cap ``C`` of ``"cap:C"`` (a number >= 1), else None; raises ValueError
    naming the value otherwise.

    >>> check_duplicates("cap:1.5"), check_duplicates("mean")
    (1.5, None)
    """
    if duplicates in ("sum", "mean", "sqrt"):
        return None
    if isinstance(duplicates, str) and duplicates.startswith("cap:"):
        try:
            cap = float(duplicates[4:])
        except ValueError:
            cap = math.nan
        if math.isfinite(cap) and cap >= 1:
            return cap
    raise ValueError(
        f"duplicates must be 'sum', 'mean', 'sqrt' or 'cap:C' with a number C >= 1, got "
        f"{duplicates!r}"
    )


def _scale_duplicates(
    parts: list[tuple[torch.Tensor, torch.Tensor]],
    how: str,
    cap: float | None,
    counter: torch.Tensor,
) -> None:
    """For every ``(ids, grads)`` of ``parts``, divide the rows of ``grads`` by how often
    their id occurs in all the ``ids`` ("mean": then ``index_add_`` adds their mean), by its
    square root ("sqrt") or by ``count / C`` where that exceeds 1 ("cap:C", ``cap`` = C),
    in place. ``counter``: zeros, one per row; left zero."""
    for ids, _ in parts:
        counter.index_add_(0, ids, torch.ones(ids.shape, dtype=counter.dtype, device=ids.device))
    divisors = [counter.index_select(0, ids) for ids, _ in parts]
    for ids, _ in parts:
        counter.index_fill_(0, ids, 0)
    for (_, grads), divisor in zip(parts, divisors, strict=True):
        if how == "sqrt":
            divisor.sqrt_()
        elif cap is not None:  # "cap:C": at most C times the mean
            divisor.div_(cap).clamp_(min=1.0)
        grads.div_(divisor.to(grads.dtype).unsqueeze(1))


@functools.lru_cache(maxsize=16)
def _diagonal_permutation(
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


def _pair_mask(walks: torch.Tensor, window: int, radii: torch.Tensor | None) -> torch.Tensor:
    """``mask[w, i, j]``: positions ``i`` (center) and ``j`` (context) of walk ``w`` form a
    pair: ``0 < |i - j| <= min(radii[w, j], window)`` -- the window drawn at the context's
    position, as word2vec draws it -- both real nodes. Shape (W, T, T)."""
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


# ---------------------------------------------------------------------------- training
@functools.cache
def fast_matmul_dtype(device: str = "cpu") -> torch.dtype | None:
    """``torch.bfloat16`` where batched products in it are clearly (1.5x) faster than in
    float32 on ``device`` with the calling thread's torch thread count (CPUs with bfloat16
    units: AVX512-BF16, AMX), else None.

    Decided by timing both on a batch shaped like :meth:`SkipGram.sgd_step`'s, each after
    a first call (which compiles the bfloat16 kernel: milliseconds), best of 5.
    """
    if torch.device(device).type != "cpu":
        return None
    timings = {}
    for dtype in (torch.float32, torch.bfloat16):
        left = torch.ones(32, 41, 128, dtype=dtype)
        right = torch.ones(32, 128, 48, dtype=dtype)
        torch.bmm(left, right)
        best = math.inf
        for _ in range(5):
            start = time.perf_counter()
            torch.bmm(left, right)
            best = min(best, time.perf_counter() - start)
        timings[dtype] = best
    return torch.bfloat16 if timings[torch.bfloat16] < timings[torch.float32] / 1.5 else None


def train_node_embeddings(
    graph: Graph,
    *,
    dimensions: int = 128,
    walk_length: int = 80,
    num_walks: int = 10,
    window: int = 10,
    p: float = 1.0,
    q: float = 1.0,
    weighted: bool = False,
    negatives: int = 5,
    epochs: int = 1,
    sample: float = 1e-3,
    lr: float | None = None,
    trainer: str = "auto",
    sharing: str = "batch",
    walk_negatives: int | None = None,
    matmul_dtype: torch.dtype | str | None = "auto",
    batch_walks: int = 32,
    duplicates: str = "cap:1.5",
    chunk_walks: int = 8192,
    workers: int = 1,
    seed: int = 0,
    progress: bool = False,
    name: str = "deepwalk",
) -> torch.Tensor:
    """DeepWalk / node2vec embeddings of every node, trained the word2vec way.

    ``num_walks`` walks of ``walk_length`` steps from every node (node2vec's biased walks
    when ``p`` or ``q`` differ from 1), frequent nodes subsampled, a dynamic window of at
    most ``window``, ``negatives`` noise nodes per pair from ``degree ** 0.75``, and one
    pass of plain SGD whose learning rate decays linearly from ``lr`` to ``lr * 1e-4``
    over all walks (``epochs`` passes over ``num_walks`` walks per node). Walks are drawn
    ``chunk_walks`` at a time and consumed at once, so memory does not grow with
    ``num_walks`` or the number of nodes beyond the two tables.

    Two trainers: the compiled one (``graphemb_kernels.skipgram_train``,
    :mod:`graphemb.skipgram_compiled`) is word2vec's own algorithm -- rows updated one
    (context, node) pair at a time, in ``workers`` lock-free threads -- and is used on
    CPU graphs whenever the module is built and ``GRAPHEMB_DISABLE_KERNELS`` is not set;
    the torch trainer (batched steps of :meth:`SkipGram.sgd_step`) runs on CUDA graphs
    and as the fallback. ``sharing``, ``walk_negatives``, ``matmul_dtype``,
    ``batch_walks`` and ``duplicates`` are the torch trainer's only.

    Parameters
    ----------
    graph : Graph
        Walks follow its out-edges (store both directions of an undirected graph).
    dimensions : int
        Embedding size ``D``.
    walk_length : int
        Nodes per walk (the reference implementations' ``--walk-length``: a walk of
        ``walk_length`` nodes takes ``walk_length - 1`` steps).
    num_walks : int
        Walks started from every node per epoch.
    window : int
        Largest context distance (word2vec's ``window``).
    p, q : float
        node2vec's return and in-out parameters.
    weighted : bool
        Walks step in proportion to ``graph.edge_weight`` (see ``RandomWalker``).
    negatives : int
        Negatives per (center, context) pair ``K``.
    epochs : int
        Passes; each draws fresh walks.
    sample : float
        Subsampling threshold of frequent nodes (gensim's ``sample``; 0 disables). Node
        frequencies are their expected share of walk tokens, the in-degree share.
    lr : float, optional
        Initial learning rate of SGD (word2vec's ``alpha``). Default: word2vec's 0.025 for
        the compiled trainer, 0.035 for the torch trainer, whose batched step caps the move
        of repeated rows (``duplicates``), so the frequent nodes move less than in
        word2vec's one-pair-at-a-time updates, and the rare ones need the larger rate to
        train as far in one pass; together they score as gensim at 0.025 does
        (benchmarks/bench_deepwalk_quality.py: at 0.025 Macro-F1 was 3 points lower on the
        generated graph, at 0.05 with "cap:8" Cora's graph lost 11 points of Micro-F1).
    trainer : {"auto", "compiled", "torch"}
        "auto" (default): the compiled trainer where it can run (CPU graph, module built,
        not disabled), else the torch trainer; "compiled" raises where it cannot run.
    sharing : {"batch", "walk", "position"}
        Torch trainer: negatives of :meth:`SkipGram.forward`. (``"pair"``, K draws of
        their own per pair, is the compiled trainer's, with word2vec's sequential
        updates; summed into one synchronous step it collapsed every row to one norm on
        a small dense graph, so the torch trainer does not offer it.)
        ``"batch"`` (default) draws one block of ``walk_negatives`` noise nodes per walk of
        a step and scores each center against a block drawn for another walk (the
        diagonal of :func:`diagonal_blocks`), weighted to the same expected loss.
        ``"walk"`` scores the centers of a walk against its own block: up to 1.5 points
        lower F1 on Cora and CiteSeer (a block's rows then move with one coherent push from
        like centers). ``"position"`` is noisier still and trains worse embeddings.
    walk_negatives : int, optional
        Noise nodes per block with ``sharing="batch"`` or ``"walk"`` (one block per walk);
        default ``negatives * (window + 1)``, what a center draws in word2vec on average.
    matmul_dtype : torch.dtype, None, "auto" or a dtype's name
        Dtype of the batched products of :meth:`SkipGram.sgd_step` (None: the tables',
        float32); "auto": :func:`fast_matmul_dtype` (bfloat16 where the CPU has fast
        bfloat16 units; F1 the same as float32's in benchmarks/bench_deepwalk_quality.py).
    batch_walks : int
        Walks per SGD step. Small graphs need small batches to take enough steps: with
        32 (default) to 128 Cora's graph scores within 2 points of gensim, with 256 not.
        Graphs with hubs need them too: a hub repeated in a step moves by at most
        ``duplicates``' cap, so fewer, larger steps move it less (128 walks a step lost
        8 points of Micro-F1 on the generated 10k-node graph).
    duplicates : str
        How rows repeated within a step move, see :meth:`SkipGram.sgd_step`; default
        "cap:1.5": the summed gradient, at most 1.5 times the mean (with ``lr``'s default;
        "cap:2" scored up to 1 point lower Micro-F1 at 10 % labels, "cap:8" overshoots on
        Cora's graph, 2 points lower Micro-F1).
    chunk_walks : int
        Walks drawn at once (memory: ``chunk_walks * walk_length`` int64).
    workers : int
        Compiled trainer: threads, each training a share of every chunk of walks on the
        shared tables without locks (word2vec's threads); with 1 the result depends only on
        ``seed``. Torch trainer: processes (CPU), each trains its share of every chunk of
        walks, writing into tables in shared memory without locks, as word2vec's threads do.
        Each uses one core. Starting them costs seconds (an interpreter and torch each), and
        writers of one table slow each other's steps (hot rows, shared caches): on a 2-core
        machine 2 workers took 6.0 s where 1 took 3.8 s for 10 walks per node on a 10k-node
        graph, and 14.2 s against 15.3 s for 40 walks. Use them for long runs.
    seed : int
        Seeds initialisation, walks and negatives.
    progress : bool
        Show a tqdm progress bar (walks done).
    name : str
        Names of the embedding tables.

    Returns
    -------
    Tensor of float32, shape (N, D)
        The center rows (word2vec's input vectors), in node-id order.

    Raises
    ------
    TrainingDiverged
        A score or row came out non-finite (too high ``lr``); nothing is returned.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a graphemb.graph.Graph, got {type(graph).__name__}")
    walk_length = as_size("walk_length", walk_length, minimum=1)
    num_walks = as_size("num_walks", num_walks, minimum=1)
    epochs = as_size("epochs", epochs, minimum=1)
    negatives = as_size("negatives", negatives, minimum=1)
    batch_walks = as_size("batch_walks", batch_walks, minimum=1)
    chunk_walks = max(as_size("chunk_walks", chunk_walks, minimum=1), batch_walks)
    if trainer not in TRAINERS:
        raise ValueError(f"trainer must be one of {TRAINERS}, got {trainer!r}")
    kernel = compiled_trainer() if graph.device.type == "cpu" else None
    if trainer == "compiled" and kernel is None:
        raise ValueError(
            "trainer='compiled' needs a CPU graph and graphemb_kernels built with "
            f"skipgram_train (GRAPHEMB_DISABLE_KERNELS unset); graph on {graph.device}"
        )
    if trainer == "torch":
        kernel = None
    if lr is None:
        lr = TORCH_LR if kernel is None else COMPILED_LR
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if sharing == "pair":
        raise ValueError(
            "sharing='pair' is not a trainer option: word2vec's per-pair negatives with its "
            "one-pair-at-a-time updates are the compiled trainer (trainer='compiled', the "
            "default on CPU); the torch trainer takes 'batch', 'walk' or 'position'"
        )
    if sharing not in TRAINER_SHARING:
        raise ValueError(f"sharing must be one of {TRAINER_SHARING}, got {sharing!r}")
    check_duplicates(duplicates)
    if isinstance(matmul_dtype, str) and matmul_dtype != "auto":
        named = getattr(torch, matmul_dtype, None)
        if not (isinstance(named, torch.dtype) and named.is_floating_point):
            raise ValueError(
                f"matmul_dtype must be a floating torch.dtype, None, 'auto' or a dtype's name "
                f"such as 'bfloat16', got {matmul_dtype!r}"
            )
        matmul_dtype = named
    elif not (
        matmul_dtype is None or matmul_dtype == "auto" or isinstance(matmul_dtype, torch.dtype)
    ):
        raise ValueError(
            f"matmul_dtype must be a torch.dtype, None or 'auto', got {matmul_dtype!r}"
        )
    workers = as_size("workers", workers, minimum=1)
    per_block = negatives * (window + 1) if walk_negatives is None else walk_negatives
    settings = _Settings(
        dimensions=as_size("dimensions", dimensions, minimum=1),
        walk_length=walk_length,
        num_walks=num_walks,
        window=as_size("window", window, minimum=1),
        p=p,
        q=q,
        weighted=weighted,
        negatives=negatives,
        epochs=epochs,
        sample=sample,
        lr=float(lr),
        sharing=sharing,
        walk_negatives=as_size("walk_negatives", per_block, minimum=1),
        matmul_dtype=matmul_dtype,
        batch_walks=batch_walks,
        chunk_walks=chunk_walks,
        seed=seed,
        progress=progress,
        name=name,
        duplicates=duplicates,
    )
    if kernel is not None:
        return _train_compiled(kernel, graph, settings, workers)
    if workers == 1:
        return _train_process(0, 1, graph, settings)
    if graph.device.type != "cpu":
        raise ValueError(f"workers > 1 trains on CPU graphs, got a graph on {graph.device}")
    if sharing == "position":
        raise ValueError("workers > 1 supports sharing='walk' or 'pair'")
    import torch.multiprocessing as mp

    out = torch.empty(graph.num_nodes, settings.dimensions).share_memory_()
    port = _free_port()
    mp.start_processes(
        _worker,
        args=(workers, port, graph, settings, out),
        nprocs=workers,
        join=True,
        start_method="spawn",
    )
    return out


@dataclasses.dataclass(frozen=True)
class _Settings:
    """The checked arguments of :func:`train_node_embeddings`."""

    dimensions: int
    walk_length: int
    num_walks: int
    window: int
    p: float
    q: float
    negatives: int
    epochs: int
    sample: float
    lr: float
    sharing: str
    walk_negatives: int
    matmul_dtype: torch.dtype | str | None
    batch_walks: int
    chunk_walks: int
    seed: int
    progress: bool
    name: str
    duplicates: str
    weighted: bool = False


def _progress_bar(total: int, show: bool) -> Any:
    """A tqdm bar of walks when ``show`` (tqdm is needed only then), else a no-op."""
    if not show:
        return contextlib.nullcontext(_NoBar())
    from tqdm import tqdm

    return tqdm(total=total, unit="walk", smoothing=0.1)


class _NoBar:
    def update(self, count: int) -> None:
        pass


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _worker(
    rank: int, world_size: int, port: int, graph: Graph, settings: _Settings, out: torch.Tensor
) -> None:
    """One of ``world_size`` training processes on tables in shared memory."""
    import torch.distributed as dist

    torch.set_num_threads(1)  # one core per process: they share the machine
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=DEFAULT_TIMEOUT.total_seconds()),
    )
    try:
        table = _train_process(rank, world_size, graph, settings)
        if rank == 0:
            out.copy_(table)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _train_process(rank: int, world_size: int, graph: Graph, settings: _Settings) -> torch.Tensor:
    """The training loop of one process: its share of every chunk of walks.

    With several processes the tables live once in shared memory and every process
    writes its SGD steps into them without locks (word2vec's threads do the same); the
    learning rate decays with the process's own progress, equal shares keeping all in
    step. Returns a copy of the center rows.
    """
    from .optim import SparseSGD

    device = graph.device
    walker = _walker(graph, settings)
    noise, keep = _noise_and_keep(graph, settings)
    model = SkipGram(
        graph.num_nodes,
        settings.dimensions,
        settings.window,
        settings.name,
        device=device,
        seed=settings.seed,
        sharing=settings.sharing,
        num_negatives=settings.negatives,
    )
    # The fused step (no autograd, no optimizer) where it applies; SparseSGD otherwise.
    optimizer = (
        SparseSGD(model.embeddings, lr=settings.lr) if settings.sharing == "position" else None
    )
    matmul_dtype = settings.matmul_dtype
    if matmul_dtype == "auto":
        matmul_dtype = fast_matmul_dtype(str(device.type))
    generator = torch.Generator(device=device).manual_seed(settings.seed * 1_000_003 + rank)
    order_generator = torch.Generator().manual_seed(settings.seed)  # same order everywhere
    total = settings.epochs * settings.num_walks * graph.num_nodes
    done = 0
    bar = _progress_bar(total, settings.progress and rank == 0)
    with bar as shown:
        for index, count, starts in _chunks(graph, settings, order_generator):
            mine = starts.tensor_split(world_size)[rank].to(device)
            walks = walker(mine, settings.walk_length - 1, generator=generator)
            walks = subsample_walks(walks, keep, generator=generator)
            for batch in walks.split(settings.batch_walks):
                _sgd_step(
                    model,
                    optimizer,
                    batch,
                    noise,
                    settings.walk_negatives,
                    settings.lr,
                    done / total,
                    generator,
                    matmul_dtype,  # type: ignore[arg-type]
                    settings.duplicates,
                )
                done += batch.shape[0] * world_size
                shown.update(batch.shape[0] * world_size)
            where = f"in walk chunk {index + 1} of {count}"
            check_finite(model.center.weight.detach(), settings.lr, where)
            check_finite(model.context.weight.detach(), settings.lr, where)
    return model.center.weight.detach().clone()


def _walker(graph: Graph, settings: _Settings) -> Any:
    """The random walker of both trainers."""
    from .sampling.walks import RandomWalker

    return RandomWalker(graph, settings.p, settings.q, weighted=settings.weighted)


def _noise_and_keep(graph: Graph, settings: _Settings) -> tuple[NegativeSampler, torch.Tensor]:
    """The noise distribution (in-degree ** 0.75) and the subsampling keep probabilities."""
    degrees = graph.in_degrees()
    noise = NegativeSampler(degrees if bool((degrees > 0).any()) else torch.ones_like(degrees))
    return noise, keep_probabilities(degrees, settings.sample)


def _chunks(graph: Graph, settings: _Settings, order_generator: torch.Generator) -> Any:
    """``(index, count, start nodes)`` of every walk chunk of the run: each round a fresh
    permutation of the nodes, split into ``chunk_walks``."""
    per_round = -(-graph.num_nodes // settings.chunk_walks)
    count = per_round * settings.epochs * settings.num_walks
    index = 0
    for _ in range(settings.epochs * settings.num_walks):
        order = torch.randperm(graph.num_nodes, generator=order_generator)
        for starts in order.split(settings.chunk_walks):
            yield index, count, starts
            index += 1


def _train_compiled(kernel: Any, graph: Graph, settings: _Settings, threads: int) -> torch.Tensor:
    """The compiled Hogwild trainer over every chunk of walks (CPU): returns syn0."""
    walker = _walker(graph, settings)
    noise, keep = _noise_and_keep(graph, settings)
    alias = tuple(t.cpu().contiguous() for t in noise.alias_table)
    keep = keep.cpu().contiguous()
    syn0, syn1 = init_tables(graph.num_nodes, settings.dimensions, settings.seed)
    generator = torch.Generator().manual_seed(settings.seed * 1_000_003)
    order_generator = torch.Generator().manual_seed(settings.seed)
    total = settings.epochs * settings.num_walks * graph.num_nodes
    done = 0
    with _progress_bar(total, settings.progress) as shown:
        for index, count, starts in _chunks(graph, settings, order_generator):
            walks = walker(starts, settings.walk_length - 1, generator=generator)
            hogwild_pass(
                kernel,
                walks,
                syn0,
                syn1,
                keep,
                alias,  # type: ignore[arg-type]
                window=settings.window,
                negatives=settings.negatives,
                lr=settings.lr,
                walks_before=done,
                total_walks=total,
                threads=threads,
                seed=chunk_seed(settings.seed, index),
                chunk=f"walk chunk {index + 1} of {count}",
            )
            done += walks.shape[0]
            shown.update(walks.shape[0])
    check_finite(syn0, settings.lr, "by the end of training")
    return syn0


def _sgd_step(
    model: SkipGram,
    optimizer: torch.optim.Optimizer | None,
    walks: torch.Tensor,
    noise: NegativeSampler,
    walk_negatives: int,
    lr: float,
    progress: float,
    generator: torch.Generator,
    matmul_dtype: torch.dtype | None,
    duplicates: str,
) -> None:
    """One summed-loss SGD step on ``walks`` at the linearly decayed learning rate."""
    radii = dynamic_radii(walks.shape, model.window, device=walks.device, generator=generator)
    rate = lr * max(1.0 - progress, 1e-4)
    drawn = noise(model.negatives_shape(walks.shape, walk_negatives), generator=generator)
    if optimizer is None:
        model.sgd_step(
            walks,
            drawn,
            lr=rate,
            radii=radii,
            matmul_dtype=matmul_dtype,
            duplicates=duplicates,
            return_loss=False,
        )
        return
    loss = model(walks, drawn, radii=radii, reduction="sum")
    loss.backward()
    for group in optimizer.param_groups:
        group["lr"] = rate
    optimizer.step()
