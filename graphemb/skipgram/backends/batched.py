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
from .base import initial_tables

__all__ = ["TorchBackend", "train_round_"]


class TorchBackend:
    """word2vec's updates in rounds of batched torch operations (see the module's docstring),
    on the graph's device, with ``workers`` torch threads on CPU."""

    name = "torch"

    def __init__(
        self, corpus: Corpus, options: SkipGramOptions, torch_options: TorchOptions, workers: int
    ) -> None:
        device = corpus.device
        self._options = options
        self._noise, self._keep = corpus.noise, corpus.keep.to(device)
        syn0, syn1 = initial_tables(corpus.num_nodes, options.dimensions, options.seed)
        self._syn0, self._syn1 = syn0.to(device), syn1.to(device)
        self._generator = torch.Generator(device=device).manual_seed(options.seed * 7 + 1)
        self._order = torch.Generator().manual_seed(options.seed * 7 + 2)
        tokens = torch_options.step_tokens or corpus.num_nodes // options.negatives
        tokens = min(tokens, torch_options.max_round_pairs)
        self._step_walks = max(1, tokens // options.walk_length)
        self._workers = workers
        self._threads_before = 0
        self._bad = torch.zeros((), dtype=torch.bool, device=device)

    def __enter__(self) -> TorchBackend:
        self._threads_before = torch.get_num_threads()
        if self._syn0.device.type == "cpu":
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
        """The chunk's walks, subsampled afresh, in steps of rounds."""
        options = self._options
        walks = subsample_walks(chunk.walks, self._keep, generator=self._generator)
        done = walks_before
        for batch in walks.split(self._step_walks):
            lr = rate.at(done)
            radii = dynamic_radii(
                batch.shape, options.window, device=batch.device, generator=self._generator
            )
            rounds = pair_rounds(batch, radii, options.window)
            for position in torch.randperm(len(rounds), generator=self._order).tolist():
                contexts, nodes = rounds[position]
                if contexts.numel():
                    noise = self._noise(
                        (contexts.numel(), options.negatives), generator=self._generator
                    )
                    self._bad |= train_round_(self._syn0, self._syn1, contexts, nodes, noise, lr)
            done += batch.shape[0]
        if bool(self._bad):  # one host synchronisation a chunk
            raise diverged(
                f"in {chunk.name}",
                f"scores were not finite at a learning rate of {rate.at(done):.4g}",
                rate.lr,
            )

    def input_rows(self) -> torch.Tensor:
        return self._syn0


def train_round_(
    syn0: torch.Tensor,
    syn1: torch.Tensor,
    contexts: torch.Tensor,
    nodes: torch.Tensor,
    noise: torch.Tensor,
    lr: float,
) -> torch.Tensor:
    """word2vec's update of one round of pairs, in place.

    Pair ``i`` trains the input row ``syn0[contexts[i]]`` against the output row
    ``syn1[nodes[i]]`` (label 1) and ``syn1[noise[i, k]]`` (label 0; skipped where the noise
    node is the node itself, as word2vec does). Every score reads the rows as they were
    before the round; where no row takes part in two pairs (see :func:`pair_rounds`) that
    is word2vec's sequential update of the pairs, in any order.

    Parameters
    ----------
    syn0, syn1 : Tensor of float (N, D)
        Input and output rows, updated in place.
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
    dim = syn0.shape[1]
    targets = torch.cat([nodes[:, None], noise], dim=1)  # (P, K + 1): label 1, then 0s
    x = syn0.index_select(0, contexts)  # (P, D)
    y = syn1.index_select(0, targets.view(-1)).view(count, negatives + 1, dim)
    scores = torch.bmm(y, x.unsqueeze(2)).squeeze(2)  # (P, K + 1)
    g = torch.sigmoid(scores).mul_(-lr)  # (label - sigmoid(score)) * lr
    g[:, 0] += lr
    g[:, 1:].masked_fill_(noise == nodes[:, None], 0.0)
    syn0.index_add_(0, contexts, torch.bmm(g.unsqueeze(1), y).squeeze(1))
    syn1.index_add_(0, targets.view(-1), (g.unsqueeze(2) * x.unsqueeze(1)).view(-1, dim))
    return ~torch.isfinite(scores).all()
