"""word2vec's subsampling of frequent tokens: the probability of keeping each occurrence of
a node, from how often the corpus holds it (:func:`keep_probabilities`). Frequent nodes are
dropped more often, so the rest of a window moves closer and rare nodes weigh more."""

from __future__ import annotations

import math

import torch

__all__ = ["keep_probabilities"]


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
