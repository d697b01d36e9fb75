"""The learning rate of a run (:class:`LearningRate`): word2vec's linear decay, held for
blocks of 10,000 tokens, the same for every backend."""

from __future__ import annotations

import dataclasses

__all__ = ["FINAL_RATE", "HOLD_TOKENS", "LearningRate"]

FINAL_RATE = 1.0 / 250.0
"""The last learning rate of a run as a share of the first: gensim's (``alpha`` 0.025 down
to ``min_alpha`` 0.0001)."""

HOLD_TOKENS = 10_000
"""Tokens for which the rate is held (word2vec.c recomputes it every 10,000 words a thread
trains, gensim once per job of ``batch_words=10000``)."""


@dataclasses.dataclass(frozen=True)
class LearningRate:
    """``lr * max(1 - (1 - FINAL_RATE) * p, FINAL_RATE)`` after ``done`` of ``total_walks``
    walks, with ``p = (done // hold_walks) * hold_walks / total_walks``.

    Holding the rate for blocks of ``hold_walks`` walks (10,000 tokens) rather than
    lowering it every walk is part of word2vec's algorithm: over a run it is about 1 % more
    learning, to which small dense graphs are sensitive.

    Attributes
    ----------
    lr : float
        The first rate.
    total_walks : int
        Walks trained in the whole run (passes over the same walks count again).
    hold_walks : int
        Walks per block of held rate: ``max(1, HOLD_TOKENS // walk_length)``.

    Examples
    --------
    >>> rate = LearningRate.of_run(0.025, total_walks=1000, walk_length=40)
    >>> rate.hold_walks, rate.at(0), rate.at(249), round(rate.at(250), 6)
    (250, 0.025, 0.025, 0.018775)
    """

    lr: float
    total_walks: int
    hold_walks: int

    @classmethod
    def of_run(cls, lr: float, total_walks: int, walk_length: int) -> LearningRate:
        """The schedule of a run of ``total_walks`` walks of ``walk_length`` nodes."""
        return cls(float(lr), max(int(total_walks), 1), max(1, HOLD_TOKENS // walk_length))

    def at(self, done: int) -> float:
        """The rate after ``done`` walks of the run."""
        progress = (done // self.hold_walks) * self.hold_walks / self.total_walks
        return self.lr * max(1.0 - (1.0 - FINAL_RATE) * progress, FINAL_RATE)
