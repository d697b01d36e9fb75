"""Random walks on a :class:`~graphemb.graph.Graph`: uniform (DeepWalk) and node2vec's
biased second-order walks, on CPU and CUDA.

Walks follow *out*-edges (``graph.csr()``). On CPU the compiled kernels walk (every walker
on a random stream of its own, seeded from one number drawn from the generator; no
temporaries); elsewhere, and with ``GRAPHEMB_DISABLE_KERNELS=1``, every walker takes one
step per iteration of a torch loop over the walk's length -- never a loop over walkers.
Both draw from the same distribution, and all randomness comes from one
``torch.Generator`` on the graph's device, so a seeded generator gives the same walks
on every run. A walker standing on a node without out-neighbours stops there (no restart):
the rest of its row is :data:`PAD`. Weighted walks (``weighted=True``) follow an out-edge
with probability proportional to its weight; a node whose out-edges all weigh 0 is a node
without out-neighbours for them.

Example
-------
>>> import torch
>>> from graphemb.graph import Graph
>>> from graphemb.sampling.walks import PAD, random_walks
>>> ring = Graph.from_edges(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]))
>>> random_walks(ring, torch.tensor([0, 2]), walk_length=4)
tensor([[0, 1, 2, 0, 1],
        [2, 0, 1, 2, 0]])
>>> path = Graph.from_edges(torch.tensor([0, 1]), torch.tensor([1, 2]))   # 2 is a sink
>>> random_walks(path, torch.tensor([0]), walk_length=4)
tensor([[ 0,  1,  2, -1, -1]])
"""

from __future__ import annotations

import math
import numbers

import torch

from .._checks import as_size, check_generator, check_node_id_vector, check_node_ids
from ..graph import Graph
from ._exact_step import Node2vecRows, exact_node2vec_step
from ._kernels import compiled_sampling, draw_key

__all__ = ["PAD", "RandomWalker", "random_walks"]

#: Fills the steps of a walk after it reached a node without out-neighbours.
PAD = -1

# Edge keys src * N + dst must fit in int64 (node2vec's "is x a neighbour of t" lookup).
_MAX_KEYED_NODES = math.isqrt(2**63 - 1)
# Proposals of a node2vec step before it is drawn from its exact distribution (_exact_step)
_PROPOSALS = 32


class RandomWalker:
    """Draws random walks on ``graph``; build once, call every epoch.

    With ``p == q == 1`` (the default) a walker at node ``v`` moves along one of ``v``'s
    out-edges chosen uniformly (DeepWalk; parallel edges count as often as they occur).
    Otherwise the walk is node2vec's second-order walk (Grover & Leskovec, 2016): after
    stepping ``t -> v``, the next node ``x`` among ``v``'s out-neighbours is drawn with
    probability proportional to

    * ``1 / p`` if ``x == t`` (return),
    * ``1``     if ``t -> x`` is an edge (``x`` is at distance 1 from ``t``),
    * ``1 / q`` otherwise (``x`` moves away from ``t``).

    The first step of a walk is uniform. The biased step uses rejection sampling (as
    KnightKing and PyG's ``torch_cluster`` do): propose a uniform out-neighbour, accept it
    with probability ``bias / max(1/p, 1, 1/q)``, redraw for the rejected walkers only.
    A walker whose 32 proposals were all rejected (extreme ``p`` or ``q`` where no out-edge
    has the envelope's bias) draws from the step's exact distribution instead, its row's
    biases summed: the distribution stays exact and no step takes millions of proposals.
    No per-edge biases are precomputed, so memory stays at one sorted key per edge.

    With ``weighted=True`` (the reference node2vec's ``--weighted``) every step follows
    out-edge ``e`` with probability proportional to its weight ``w_e``
    (:attr:`Graph.edge_weight`), times the bias above for node2vec: proposals are drawn
    in proportion to the weights and accepted as above, which is exact. A weighted step
    is one binary search of the per-node cumulative weights (float64 prefix sums over
    the CSR order, 8 bytes per edge; their rounding, about ``2**-53`` times the total
    weight, shifts the probabilities by that much). Edges of weight 0 are never taken,
    and a node whose out-edges all weigh 0 ends walks like a node without out-edges; for
    node2vec's distance they still count as edges (as in the reference implementation).

    Parameters
    ----------
    graph : Graph
        The graph (CPU or CUDA); walks are drawn where it lives.
    p : float
        Return parameter, > 0: small ``p`` keeps walks near where they came from.
    q : float
        In-out parameter, > 0: small ``q`` pushes walks outwards (DFS-like), large ``q``
        keeps them local (BFS-like).
    weighted : bool
        Steps in proportion to the edge weights; the graph must have them.

    Examples
    --------
    >>> import torch
    >>> from graphemb.graph import Graph
    >>> from graphemb.sampling.walks import RandomWalker
    >>> star = Graph.from_edges(torch.tensor([0, 0, 0, 1, 2, 3]),
    ...                         torch.tensor([1, 2, 3, 0, 0, 0]))
    >>> walker = RandomWalker(star, p=1e-9, q=1.0)      # practically always return
    >>> walker(torch.tensor([1, 2]), 4, generator=torch.Generator().manual_seed(0))[:, 2:]
    tensor([[1, 0, 1],
            [2, 0, 2]])
    """

    def __init__(
        self, graph: Graph, p: float = 1.0, q: float = 1.0, weighted: bool = False
    ) -> None:
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a graphemb.graph.Graph, got {type(graph).__name__}")
        if not isinstance(weighted, bool):
            raise TypeError(f"weighted must be a bool, got {weighted!r}")
        if weighted and graph.edge_weight is None:
            raise ValueError(
                "weighted=True needs a graph with edge weights (Graph.edge_weight is None)"
            )
        self._p = _positive_number("p", p)
        self._q = _positive_number("q", q)
        self._weighted = weighted
        self._graph = graph
        if not self.uniform and graph.num_nodes > _MAX_KEYED_NODES:
            raise ValueError(
                f"node2vec walks support at most {_MAX_KEYED_NODES} nodes, the graph has "
                f"{graph.num_nodes}"
            )
        # node2vec's "is t -> x an edge?" bisects t's neighbour list, which must be sorted.
        out = graph.out_adjacency(sorted_rows=not self.uniform, weighted=weighted)
        # No per-node array beyond the graph's: a step reads its degrees off indptr (and,
        # weighted, off the last edge of positive weight, which the step needs anyway).
        self._indptr, self._indices = out.indptr, out.indices
        self._cumulative, self._last = out.cumulative, out.last

    @property
    def graph(self) -> Graph:
        """The graph walked on; walks are drawn on its device."""
        return self._graph

    @property
    def p(self) -> float:
        """node2vec's return parameter: a step back weighs ``1 / p``."""
        return self._p

    @property
    def q(self) -> float:
        """node2vec's in-out parameter.

        A step to a node two hops from the previous one weighs ``1 / q``, a step to
        one of its neighbours ``1``.
        """
        return self._q

    @property
    def weighted(self) -> bool:
        """Whether steps follow the edges in proportion to their weights."""
        return self._weighted

    @property
    def uniform(self) -> bool:
        """Whether the walks are first-order uniform walks (``p == q == 1``)."""
        return self._p == 1.0 and self._q == 1.0

    def __call__(
        self,
        start: torch.Tensor,
        walk_length: int,
        *,
        generator: torch.Generator | None = None,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One walk from each node of ``start``.

        Parameters
        ----------
        start : Tensor of integers, shape (W,)
            Start node of each walk (repeats allowed), on any device. It may be ``out[:, 0]``
            itself: the walks then start from the nodes already written there (a caller that
            computes its start nodes into that column holds no array of them).
        walk_length : int
            Number of steps ``L`` (>= 0).
        generator : torch.Generator, optional
            Source of randomness, on the graph's device. Default: torch's default
            generator of that device.
        out : Tensor of int64, shape (W, L + 1), optional
            Where to write the walks (contiguous, on the graph's device): a caller that
            draws walks repeatedly reuses one buffer instead of allocating one per call.

        Returns
        -------
        Tensor of int64, shape (W, L + 1), on the graph's device
            Row ``i`` is the walk ``start[i], v_1, ..., v_L``: each consecutive pair is an
            edge of the graph. A walk that reaches a node without out-neighbours stops;
            its remaining entries are :data:`PAD` (-1). ``out`` when given.
        """
        start = self._checked_start(start)
        walk_length = as_size("walk_length", walk_length)
        check_generator(generator, self._graph.device)
        shape = (start.numel(), walk_length + 1)
        if out is None:
            walks = torch.empty(shape, dtype=torch.int64, device=start.device)
        else:
            walks = _checked_out(out, shape, start.device)
            _check_no_overlap(start, walks)
        module = compiled_sampling(self._graph, "random_walks")
        if module is not None:  # writes every entry: the starts, the steps and the PADs
            module.random_walks(self._indptr, self._indices, self._cumulative, self._last,
                                start, self._p, self._q, draw_key(generator),
                                walks)  # fmt: skip
            return walks
        walks[:, 0].copy_(start)  # nothing to copy when start is that column
        walks[:, 1:].fill_(PAD)
        if walk_length == 0 or start.numel() == 0 or self._graph.num_edges == 0:
            return walks
        # Dead walkers keep standing on their last node (a valid id, so that gathers stay
        # in range) and write PAD; no compaction, hence no host synchronisation per step.
        current = start
        previous = start
        alive = torch.ones_like(start, dtype=torch.bool)
        for step in range(1, walk_length + 1):
            row = self._rows(current)
            alive &= self._walkable(current, row)
            if self.uniform or step == 1:
                following = self._first_order_step(current, row, generator)
            else:
                following = self._node2vec_step(previous, current, alive, generator)
            walks[:, step] = torch.where(alive, following, PAD)
            previous = current
            current = torch.where(alive, following, current)
        return walks

    # ------------------------------------------------------------------ one step
    def _rows(self, nodes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Where each node's row of out-edges starts and ends in ``indices``: int64 (W,)
        twice, ``indptr[nodes]`` and ``indptr[nodes + 1]``."""
        # index_select: faster than []
        return self._indptr.index_select(0, nodes), self._indptr.index_select(0, nodes + 1)

    def _walkable(
        self, nodes: torch.Tensor, row: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """bool (W,): whether a walk can leave each node, i.e. it has an out-edge (of
        positive weight, weighted); ``row`` is :meth:`_rows` of ``nodes``."""
        begin, end = row
        if self._last is None:
            return end > begin
        # the last edge of positive weight lies in the row (it is begin - 1 if none does)
        return self._last.index_select(0, nodes) >= begin

    def _first_order_step(
        self,
        current: torch.Tensor,
        row: tuple[torch.Tensor, torch.Tensor],
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        """An out-neighbour of each ``current`` node, uniform or in proportion to the
        weights (garbage where it has none); ``row`` is :meth:`_rows` of ``current``."""
        if self._weighted:
            return self._weighted_step(current, row, generator)
        return self._uniform_step(row, generator)

    def _weighted_step(
        self,
        current: torch.Tensor,
        row: tuple[torch.Tensor, torch.Tensor],
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        """An out-neighbour of each ``current`` node drawn in proportion to the edge
        weights (garbage where every out-weight is 0); ``row`` is :meth:`_rows` of it."""
        assert self._cumulative is not None and self._last is not None  # built if weighted
        uniform = torch.rand(
            current.numel(), dtype=torch.float64, device=current.device, generator=generator
        )
        # The edge e whose cumulative interval [C[e-1], C[e]) holds low + u * (high - low):
        # a weight-0 edge has an empty interval and is never found.
        low = self._cumulative.index_select(0, row[0])
        high = self._cumulative.index_select(0, row[1])
        target = uniform.mul_(high - low).add_(low)
        edge = torch.searchsorted(self._cumulative, target, right=True).sub_(1)
        # Rounding may reach the row's end: the last edge of positive weight then.
        edge = torch.minimum(edge, self._last.index_select(0, current)).clamp_(min=0)
        return self._indices.index_select(0, edge)

    def _uniform_step(
        self, row: tuple[torch.Tensor, torch.Tensor], generator: torch.Generator | None
    ) -> torch.Tensor:
        """A uniform out-neighbour of each node whose row of out-edges is ``row``
        (:meth:`_rows`; garbage where the row is empty)."""
        begin, end = row
        # float64: floor(u * degree) is uniform on [0, degree) up to 2**-53, and below degree
        # (u < 1 and the rounding of u * degree cannot reach degree).
        uniform = torch.rand(
            begin.numel(), dtype=torch.float64, device=begin.device, generator=generator
        )
        offset = uniform.mul_(end - begin).long()
        edge = begin + offset
        # A node without out-edges may start at indptr = E: keep the gather in range.
        return self._indices.index_select(0, edge.clamp_(max=self._graph.num_edges - 1))

    def _node2vec_step(
        self,
        previous: torch.Tensor,
        current: torch.Tensor,
        alive: torch.Tensor,
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        """node2vec's biased step for every live walker, by rejection sampling."""
        following = current.clone()
        back, near, away = 1.0 / self._p, 1.0, 1.0 / self._q
        envelope = max(back, near, away)
        # Expected proposals per walker is at most envelope / min weight. Large sets take one
        # proposal per walker and round; small ones (the tail, or small batches) take that
        # many at once -- the first accepted one is exactly what sequential rejection
        # sampling returns -- so the loop ends in a few rounds instead of ~log(n).
        tail_trials = min(32, math.ceil(2 * envelope / min(back, near, away)))
        pending = torch.nonzero(alive).squeeze(1)
        proposed = 0  # proposals so far of every walker still pending
        while pending.numel():
            if proposed >= _PROPOSALS:  # their biases lie far below the envelope
                rows = Node2vecRows(
                    self._indptr, self._indices, self._cumulative, (back, near, away),
                    self._is_edge,
                )  # fmt: skip
                following[pending] = exact_node2vec_step(
                    rows, previous.index_select(0, pending), current.index_select(0, pending),
                    generator,
                )  # fmt: skip
                break
            trials = 1 if pending.numel() > 65536 else tail_trials
            proposed += trials
            count = pending.numel()
            tried = pending.repeat(trials)  # trial r of walker i at r * count + i
            here = current.index_select(0, tried)
            came_from = previous.index_select(0, tried)
            proposal = self._first_order_step(here, self._rows(here), generator)
            threshold = torch.rand(
                tried.numel(), dtype=torch.float64, device=current.device, generator=generator
            ).mul_(envelope)
            returns = proposal == came_from
            # Accept x with probability weight(x) / envelope, i.e. when threshold < weight.
            # The neighbour test is needed only when the threshold lies between the weights
            # of "near" and "away": elsewhere both kinds give the same answer.
            accept = threshold < min(near, away)
            undecided = (threshold < max(near, away)) & ~accept & ~returns
            if near != away and bool(undecided.any()):
                ask = torch.nonzero(undecided).squeeze(1)
                is_near = self._is_edge(
                    came_from.index_select(0, ask), proposal.index_select(0, ask)
                )
                accept[ask] = is_near if near > away else ~is_near
            accept = torch.where(returns, threshold < back, accept).view(trials, count)
            done = accept.any(0)
            first = accept.byte().argmax(0)  # the first accepted trial of each walker
            chosen = proposal.view(trials, count).gather(0, first.unsqueeze(0)).squeeze(0)
            following[pending[done]] = chosen[done]
            pending = pending[~done]
        return following

    def _is_edge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        """Whether ``src[i] -> dst[i]`` is an edge: bisection of ``src[i]``'s sorted
        neighbour list, all queries at once (a global search over every edge would miss
        the cache at each probe)."""
        low = self._indptr.index_select(0, src)
        end = self._indptr.index_select(0, src + 1)
        high = end.clone()
        last = self._graph.num_edges - 1
        widest = int((end - low).max()) if src.numel() else 0
        for _ in range(widest.bit_length()):
            middle = (low + high) >> 1
            smaller = self._indices.index_select(0, middle.clamp(max=last)) < dst
            searching = low < high
            low = torch.where(searching & smaller, middle + 1, low)
            high = torch.where(searching & ~smaller, middle, high)
        found = self._indices.index_select(0, low.clamp(max=last)) == dst
        return found & (low < end)

    def _checked_start(self, start: torch.Tensor) -> torch.Tensor:
        start = check_node_id_vector("start", start)
        start = start.to(device=self._graph.device, dtype=torch.int64)
        check_node_ids(start, self._graph.num_nodes, "start")
        return start

    def __repr__(self) -> str:
        kind = "uniform" if self.uniform else f"node2vec(p={self._p}, q={self._q})"
        if self._weighted:
            kind = f"weighted {kind}"
        return f"RandomWalker({kind}, {self._graph!r})"


def random_walks(
    graph: Graph,
    start: torch.Tensor,
    walk_length: int,
    *,
    p: float = 1.0,
    q: float = 1.0,
    weighted: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One random walk of ``walk_length`` steps from each node of ``start``.

    Shorthand for ``RandomWalker(graph, p, q, weighted)(start, walk_length,
    generator=generator)``;
    build a :class:`RandomWalker` once to draw walks repeatedly (node2vec walks sort the
    edges once per walker).

    Parameters
    ----------
    graph : Graph
        Walks follow its out-edges.
    start : Tensor of integers, shape (W,)
        Start nodes.
    walk_length : int
        Steps per walk ``L``.
    p, q : float
        node2vec's return and in-out parameters; ``p == q == 1`` gives uniform walks.
    weighted : bool
        Steps in proportion to ``graph.edge_weight`` (see :class:`RandomWalker`).
    generator : torch.Generator, optional
        On the graph's device.

    Returns
    -------
    Tensor of int64, shape (W, L + 1)
        Walks, :data:`PAD` after a node without out-neighbours.
    """
    return RandomWalker(graph, p, q, weighted)(start, walk_length, generator=generator)


def _checked_out(out: object, shape: tuple[int, int], device: torch.device) -> torch.Tensor:
    """``out`` if it can hold walks of ``shape`` on ``device``, else a clear error."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if out.dtype != torch.int64 or tuple(out.shape) != shape or out.device != device:
        raise ValueError(
            f"out must be an int64 tensor of shape {shape} on {device}, got "
            f"{out.dtype} {tuple(out.shape)} on {out.device}"
        )
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    return out


def _check_no_overlap(start: torch.Tensor, walks: torch.Tensor) -> None:
    """``start`` must be ``walks[:, 0]`` itself or lie outside ``walks``: any other overlap
    would let one walk overwrite another's start before it is read."""
    if start.numel() == 0 or walks.numel() == 0 or start.device != walks.device:
        return
    size = walks.element_size()  # start's too: both int64
    start_end = start.data_ptr() + ((start.numel() - 1) * start.stride(0) + 1) * size
    if start_end <= walks.data_ptr() or start.data_ptr() >= walks.data_ptr() + walks.numel() * size:
        return  # apart
    first_column = walks[:, 0]
    same = start.data_ptr() == first_column.data_ptr() and (
        start.numel() < 2 or start.stride(0) == first_column.stride(0)
    )
    if not same:
        raise ValueError(
            "start shares memory with out but is not out[:, 0]: the walks would overwrite "
            "start nodes not yet read"
        )


def _positive_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {value!r}")
    number = float(value)
    if not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return number
