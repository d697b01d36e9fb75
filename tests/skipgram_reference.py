"""An independent float64 reference of the compiled skip-gram trainer
(``graphemb_kernels.skipgram_train``, ``csrc/skipgram/``): word2vec's skip-gram with
negative sampling written from its published algorithm, one thread, driven by the random
stream the kernel documents (splitmix64). No code is shared with graphemb."""

from __future__ import annotations

import math

import numpy as np
import torch

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix(z: int) -> int:
    """splitmix64's output function."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class SplitMix64:
    """Vigna's splitmix64 (the stream the kernel documents), in Python integers."""

    def __init__(self, state: int) -> None:
        self.state = state

    def next(self) -> int:
        self.state = (self.state + GAMMA) & M64
        return mix(self.state)

    def below(self, n: int) -> int:
        return (self.next() * n) >> 64

    def uniform(self) -> float:
        return (self.next() >> 11) * 2.0**-53


def _noise(rng: SplitMix64, alias: tuple[list, list, list], word: int, count: int) -> list:
    """``count`` draws of the alias table (a column, then its coin), the node ``word``
    itself skipped: the (target, label) pairs of one draw of noise nodes."""
    nodes, coins, aliases = alias
    targets = [(word, 1.0)]
    for _ in range(count):
        column = rng.below(len(nodes))
        target = nodes[column] if rng.uniform() < coins[column] else aliases[column]
        if target != word:
            targets.append((target, 0.0))
    return targets


def reference(
    walks, syn0, syn1, keep, alias, window, negatives, lr, before, total, seed, hold=1,
    sharing="pair",
):  # fmt: skip
    """word2vec's skip-gram with negative sampling in float64, one thread; the rate is
    recomputed at the start of every block of ``hold`` walks of the run.

    ``sharing="pair"``: every (context, node) pair draws its own ``negatives`` noise nodes
    (word2vec); ``"position"``: a position draws them once, right after its window's
    radius when the window holds a context, and every context of the window trains against
    them. Either way a context's targets are trained one after the other, its input row
    changed after the last.
    """
    alias = tuple(t.tolist() for t in alias)
    syn0, syn1 = syn0.double().numpy().copy(), syn1.double().numpy().copy()
    keep = keep.tolist()
    rng = SplitMix64(mix(seed))
    for index, walk in enumerate(walks.tolist()):
        block_start = (before + index) - (before + index) % hold
        alpha = lr * max(1.0 - (1.0 - 1.0 / 250) * block_start / total, 1.0 / 250)
        kept = []
        for node in walk:
            if node < 0:
                break
            if keep[node] >= 1.0 or rng.uniform() < keep[node]:
                kept.append(node)
        for pos, word in enumerate(kept):
            radius = 1 + rng.below(window)
            contexts = [
                c
                for c in range(max(pos - radius, 0), min(pos + radius, len(kept) - 1) + 1)
                if c != pos
            ]
            if sharing == "position" and contexts:
                shared = _noise(rng, alias, word, negatives)
            for c in contexts:
                row = syn0[kept[c]]
                neu1e = np.zeros_like(row)
                targets = shared if sharing == "position" else _noise(rng, alias, word, negatives)
                for target, label in targets:
                    g = (label - 1.0 / (1.0 + math.exp(-row @ syn1[target]))) * alpha
                    neu1e += g * syn1[target]
                    syn1[target] += g * row
                row += neu1e
    return torch.from_numpy(syn0), torch.from_numpy(syn1)
