"""The torch backend: word2vec's skip-gram updates in batched rounds of torch operations, on
any device.

word2vec trains one (context, node) pair at a time: the context's input row ``x``
against the node's output row (label 1) and ``K`` noise rows (label 0), each scored
``f = x . y``, each moved by ``g * x`` with ``g = (label - sigmoid(f)) * lr``, and ``x``
moved by the sum of ``g * y`` after its ``K + 1`` scores. Summing the updates of many
pairs into one step is not the same: a row that takes part in many pairs of a step gets
all their updates computed from its old value, and on small or dense graphs (where every
step revisits the same rows) that trains visibly worse.

So a step trains the walks of about one position per ``K`` nodes of the graph, in
``2 * window`` rounds (:func:`~graphemb.skipgram.windows.pair_rounds`): one per offset between the
context and the node, in random order. Within a round every position is the context of
one pair and the node of one other, so no input or output row takes two updates at once
(noise rows aside, about ``K`` draws per round spread over the graph): each round is
word2vec's sequential update of its pairs, and a step is word2vec's updates of its walks
in another order. The step's size follows the graph's (:class:`TorchOptions`), so the
number of updates a node takes per walk through it does not depend on the graph's size.
"""

from __future__ import annotations

from types import TracebackType

import torch

from ..corpus import Chunk, Corpus
from ..guard import diverged
from ..options import SkipGramOptions, TorchOptions
from ..rate import LearningRate
from ..windows import dynamic_radii, pair_rounds, subsample_walks
from .rows import EmbeddingRows, LocalRows

__all__ = ["TorchBackend", "train_round_"]


class TorchBackend:
    """word2vec's updates in rounds of batched torch operations (see the module's docstring),
    on the graph's device, with ``workers`` torch threads on CPU; on the rows of
    :class:`~.rows.LocalRows`, or of :class:`~.rows.EmbeddingRows` where a process group
    trains together (each rank its share of every step)."""

    name = "torch"

    def __init__(
        self,
        corpus: Corpus,
        options: SkipGramOptions,
        torch_options: TorchOptions,
        workers: int,
        rows: LocalRows | EmbeddingRows,
    ) -> None:
        device = corpus.device
        self._options = options
        self._rows = rows
        self._noise, self._keep = corpus.noise, corpus.keep.to(device)
        seed = options.seed * 7 + 1 + 1_000_003 * rows.rank
        self._generator = torch.Generator(device=device).manual_seed(seed)
        self._order = torch.Generator().manual_seed(options.seed * 7 + 2)  # the same on all ranks
        tokens = torch_options.step_tokens or (
            corpus.num_nodes // options.negatives
            if rows.world_size == 1
            else torch_options.max_round_pairs * rows.world_size  # few collectives
        )
        tokens = min(tokens, torch_options.max_round_pairs * rows.world_size)
        self._step_walks = max(1, tokens // options.walk_length)
        self._workers, self._device = workers, device
        self._threads_before = 0
        self._bad = torch.zeros((), dtype=torch.bool, device=device)

    def __enter__(self) -> TorchBackend:
        self._threads_before = torch.get_num_threads()
        if self._device.type == "cpu":
            torch.set_num_threads(self._workers)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        torch.set_num_threads(self._threads_before)

    def train_chunk(self, chunk: Chunk, repeat: int, walks_before: int, rate: LearningRate) -> None:
        """This rank's walks of the chunk, subsampled afresh, in steps of rounds (as many
        steps on every rank)."""
        options = self._options
        walks = subsample_walks(chunk.walks, self._keep, generator=self._generator)
        steps = max(1, -(-chunk.size // self._step_walks))
        for step, batch in enumerate(walks.tensor_split(steps)):
            lr = rate.at(walks_before + step * chunk.size // steps)
            radii = dynamic_radii(
                batch.shape, options.window, device=batch.device, generator=self._generator
            )
            rounds = pair_rounds(batch, radii, options.window)
            # One draw of noise nodes for the whole step (each pair its own K), split by
            # round: one sampler call a step instead of one a round.
            sizes = [contexts.numel() for contexts, _ in rounds]
            noise = self._noise((sum(sizes), options.negatives), generator=self._generator)
            noise_of_round = noise.split(sizes)
            for position in torch.randperm(len(rounds), generator=self._order).tolist():
                contexts, nodes = rounds[position]
                if sizes[position] or self._rows.world_size > 1:  # collective on ranks
                    self._bad |= train_round_(
                        self._rows, contexts, nodes, noise_of_round[position], lr
                    )
        if self._rows.any_rank(self._bad):  # one host synchronisation a chunk
            raise diverged(
                f"in {chunk.name}",
                f"scores were not finite at a learning rate of "
                f"{rate.at(walks_before + chunk.size):.4g}",
                rate.lr,
            )

    def input_rows(self) -> torch.Tensor:
        return self._rows.input_rows()


def train_round_(
    rows: LocalRows | EmbeddingRows,
    contexts: torch.Tensor,
    nodes: torch.Tensor,
    noise: torch.Tensor,
    lr: float,
) -> torch.Tensor:
    """word2vec's update of one round of pairs, in place.

    Pair ``i`` trains the input row of ``contexts[i]`` against the output row of
    ``nodes[i]`` (label 1) and those of ``noise[i, k]`` (label 0; skipped where the noise
    node is the node itself, as word2vec does). Every score reads the rows as they were
    before the round; where no row takes part in two pairs (see :func:`pair_rounds`) that
    is word2vec's sequential update of the pairs, in any order.

    Parameters
    ----------
    rows : LocalRows or EmbeddingRows
        The tables, updated in place.
    contexts, nodes : Tensor of int64 (P,)
    noise : Tensor of int64 (P, K)
    lr : float
        The learning rate.

    Returns
    -------
    Tensor of bool, 0-dimensional
        Whether a score was not finite (no host synchronisation).
    """
    count, negatives = noise.shape
    targets = torch.cat([nodes[:, None], noise], dim=1).view(-1)  # per pair: label 1, then 0s
    x, y = rows.read(contexts, targets)  # (P, D), (P * (K + 1), D)
    y = y.view(count, negatives + 1, y.shape[-1])
    scores = torch.bmm(y, x.unsqueeze(2)).squeeze(2)  # (P, K + 1)
    g = torch.sigmoid(scores).mul_(-lr)  # (label - sigmoid(score)) * lr
    g[:, 0] += lr
    g[:, 1:].masked_fill_(noise == nodes[:, None], 0.0)
    dx = torch.bmm(g.unsqueeze(1), y).squeeze(1)
    dy = (g.unsqueeze(2) * x.unsqueeze(1)).view(count * (negatives + 1), y.shape[-1])
    rows.add(contexts, dx, targets, dy)
    return ~torch.isfinite(scores).all()
