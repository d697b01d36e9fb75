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


def alias_draw(rng: SplitMix64, alias: tuple[list, list, list]) -> int:
    """One draw of the alias table: a column, then its coin."""
    nodes, coins, aliases = alias
    column = rng.below(len(nodes))
    return nodes[column] if rng.uniform() < coins[column] else aliases[column]


class NoisePool:
    """Noise nodes as the kernel documents them (``csrc/skipgram/noise.h``): without a pool
    (``size`` 0) every one a fresh draw; with one, ``size`` fresh draws first, then each
    noise node the content of a uniform slot, the next slot in turn refreshed before every
    ``reuse``-th."""

    def __init__(self, rng: SplitMix64, alias: tuple[list, list, list], size: int, reuse: int):
        self.rng, self.alias, self.reuse, self.left, self.next = rng, alias, reuse, reuse, 0
        self.slots = [alias_draw(rng, alias) for _ in range(size)]

    def draw(self) -> int:
        if not self.slots:
            return alias_draw(self.rng, self.alias)
        self.left -= 1
        if self.left == 0:
            self.slots[self.next] = alias_draw(self.rng, self.alias)
            self.next = (self.next + 1) % len(self.slots)
            self.left = self.reuse
        return self.slots[self.rng.below(len(self.slots))]


def _noise(pool: NoisePool, word: int, count: int) -> list:
    """``count`` noise nodes, the node ``word`` itself skipped: the (target, label) pairs of
    one draw of noise nodes."""
    targets = [(word, 1.0)]
    for _ in range(count):
        target = pool.draw()
        if target != word:
            targets.append((target, 0.0))
    return targets


def reference(
    walks, syn0, syn1, keep, alias, window, negatives, lr, before, total, seed, hold=1,
    sharing="pair", pool=0, reuse=1,
):  # fmt: skip
    """word2vec's skip-gram with negative sampling in float64, one thread; the rate is
    recomputed at the start of every block of ``hold`` walks of the run.

    ``sharing="pair"``: every (context, node) pair draws its own ``negatives`` noise nodes
    (word2vec); ``"position"``: a position draws them once, right after its window's
    radius when the window holds a context, and every context of the window trains against
    them. Either way a context's targets are trained one after the other, its input row
    changed after the last. ``pool`` and ``reuse``: where noise nodes come from
    (:class:`NoisePool`).
    """
    alias = tuple(t.tolist() for t in alias)
    syn0, syn1 = syn0.double().numpy().copy(), syn1.double().numpy().copy()
    keep = keep.tolist()
    rng = SplitMix64(mix(seed))
    noise = NoisePool(rng, alias, pool, reuse)
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
                shared = _noise(noise, word, negatives)
            for c in contexts:
                row = syn0[kept[c]]
                neu1e = np.zeros_like(row)
                targets = shared if sharing == "position" else _noise(noise, word, negatives)
                for target, label in targets:
                    g = (label - 1.0 / (1.0 + math.exp(-row @ syn1[target]))) * alpha
                    neu1e += g * syn1[target]
                    syn1[target] += g * row
                row += neu1e
    return torch.from_numpy(syn0), torch.from_numpy(syn1)
