"""Noise nodes for negative sampling: draws proportional to ``weight ** power`` (word2vec's
unigram ** 0.75 distribution over node degrees) by Walker's alias method."""

from __future__ import annotations

import math

import torch

from .._checks import as_size
from ..graph import Graph

__all__ = ["NegativeSampler"]


class NegativeSampler:
    """Draws nodes with probability proportional to ``weights ** power``.

    Sampling uses Walker's alias method over the nodes of positive weight (built once in
    float64, O(N)): a draw is one uniform column and one uniform number, no search, and a
    node of weight 0 is never drawn.

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
        positive = torch.nonzero(scaled).view(-1)
        keep, alias = _alias_table(scaled.index_select(0, positive).div_(total))
        del scaled  # the table is all a draw needs: no other array of N floats is kept
        self._nodes = positive  # column c of the table stands for node positive[c]
        self._keep = keep
        self._alias_nodes = positive.index_select(0, alias)
        self._num_nodes = weights.numel()
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
        """Probability of drawing each node, float64, shape (N,): read back from the alias
        table on each call (a column's ``keep`` share goes to its node, the rest to its
        alias), so that the sampler holds no second array of N floats."""
        columns = self._nodes.numel()
        probabilities = torch.zeros(self._num_nodes, dtype=torch.float64, device=self.device)
        probabilities.index_add_(0, self._nodes, self._keep / columns)
        return probabilities.index_add_(0, self._alias_nodes, (1.0 - self._keep) / columns)

    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @property
    def alias_table(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(nodes, keep, alias_nodes)``, each of shape (n,) for the ``n`` nodes of positive
        weight: a draw picks a uniform column ``c`` and gives ``nodes[c]`` with probability
        ``keep[c]`` (float64), else ``alias_nodes[c]`` (int64 node ids)."""
        return self._nodes, self._keep, self._alias_nodes

    @property
    def device(self) -> torch.device:
        return self._keep.device

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
